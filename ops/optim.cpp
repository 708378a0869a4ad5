#include "ops/optim.h"

namespace minidl {

namespace {
void check_state(const char* op, const Tensor& param, const Tensor& other, const char* what) {
  MINIDL_CHECK(other.shape() == param.shape() && other.dtype() == param.dtype() && other.device() == param.device(),
               op, ": ", what, " is ", other.shape(), " ", other.dtype(), " on ", other.device(), " but the parameter is ",
               param.shape(), " ", param.dtype(), " on ", param.device());
  MINIDL_CHECK(other.is_contiguous(), op, ": ", what, " must be contiguous");
}
}  // namespace

void sgd_update_(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& config) {
  MINIDL_CHECK(param.is_contiguous(), "sgd: parameters must be contiguous");
  check_state("sgd", param, grad, "the gradient");
  if (momentum_buf) check_state("sgd", param, *momentum_buf, "the momentum buffer");
  kernels_for(param.device()).sgd_step(param, grad, momentum_buf, config);
  param.bump_version();
  if (momentum_buf) momentum_buf->bump_version();
}

void sgd_update_(std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& momentum_bufs,
                 const SgdConfig& config) {
  MINIDL_CHECK(grads.size() == params.size() && (momentum_bufs.empty() || momentum_bufs.size() == params.size()),
               "sgd: expected one gradient", momentum_bufs.empty() ? "" : " and one momentum buffer", " per parameter");
  if (params.empty()) return;
  for (size_t i = 0; i < params.size(); ++i) {
    MINIDL_CHECK(params[i].is_contiguous(), "sgd: parameters must be contiguous");
    MINIDL_CHECK(params[i].device() == params[0].device() && params[i].dtype() == params[0].dtype(),
                 "sgd: one multi-tensor update takes parameters of one device and dtype, got ", params[0].dtype(),
                 " on ", params[0].device(), " and ", params[i].dtype(), " on ", params[i].device());
    check_state("sgd", params[i], grads[i], "the gradient");
    if (!momentum_bufs.empty()) check_state("sgd", params[i], momentum_bufs[i], "the momentum buffer");
  }
  kernels_for(params[0].device()).sgd_step_multi(params, grads, momentum_bufs, config);
  for (const Tensor& p : params) p.bump_version();
  for (const Tensor& m : momentum_bufs) m.bump_version();
}

void adam_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamConfig& config) {
  MINIDL_CHECK(param.is_contiguous(), "adam: parameters must be contiguous");
  check_state("adam", param, grad, "the gradient");
  check_state("adam", param, exp_avg, "exp_avg");
  check_state("adam", param, exp_avg_sq, "exp_avg_sq");
  kernels_for(param.device()).adam_step(param, grad, exp_avg, exp_avg_sq, config);
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
}

}  // namespace minidl
