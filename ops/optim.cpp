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
}

void adam_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamConfig& config) {
  MINIDL_CHECK(param.is_contiguous(), "adam: parameters must be contiguous");
  check_state("adam", param, grad, "the gradient");
  check_state("adam", param, exp_avg, "exp_avg");
  check_state("adam", param, exp_avg_sq, "exp_avg_sq");
  kernels_for(param.device()).adam_step(param, grad, exp_avg, exp_avg_sq, config);
}

}  // namespace minidl
