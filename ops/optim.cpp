#include "ops/optim.h"

namespace minidl {

namespace {
void check_state(const char* op, const Tensor& param, const Tensor& other, const char* what) {
  MINIDL_CHECK(other.shape() == param.shape() && other.dtype() == param.dtype() && other.device() == param.device(),
               op, ": ", what, " is ", other.shape(), " ", other.dtype(), " on ", other.device(), " but the parameter is ",
               param.shape(), " ", param.dtype(), " on ", param.device());
  MINIDL_CHECK(other.is_contiguous(), op, ": ", what, " must be contiguous");
}

// Autocast's copies written by an update: float32 parameters, copies of one 16-bit dtype.
void check_copies(const char* op, const std::vector<Tensor>& params, const std::vector<Tensor>& copies) {
  MINIDL_CHECK(copies.size() == params.size(), op, ": expected one 16-bit copy (or none) per parameter, got ",
               copies.size(), " for ", params.size(), " parameters");
  DType dtype = kFloat32;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& c = copies[i];
    if (!c.defined()) continue;
    if (dtype == kFloat32) dtype = c.dtype();
    MINIDL_CHECK(params[i].dtype() == kFloat32 && is_reduced_floating(c.dtype()) && c.dtype() == dtype &&
                     c.shape() == params[i].shape() && c.device() == params[i].device() && c.is_contiguous(),
                 op, ": expected contiguous 16-bit copies of one dtype with their float32 parameters' shapes and "
                 "devices, got a ", c.dtype(), " ", c.shape(), " copy on ", c.device(), " of a ", params[i].dtype(), " ",
                 params[i].shape(), " parameter on ", params[i].device());
  }
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
  if (config.copies) check_copies("sgd", params, *config.copies);
  kernels_for(params[0].device()).sgd_step_multi(params, grads, momentum_bufs, config);
  for (const Tensor& p : params) p.bump_version();
  for (const Tensor& m : momentum_bufs) m.bump_version();
  if (config.copies)
    for (const Tensor& c : *config.copies)
      if (c.defined()) c.bump_version();
}

void adam_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamConfig& config) {
  MINIDL_CHECK(param.is_contiguous(), "adam: parameters must be contiguous");
  check_state("adam", param, grad, "the gradient");
  check_state("adam", param, exp_avg, "exp_avg");
  check_state("adam", param, exp_avg_sq, "exp_avg_sq");
  MINIDL_CHECK(!config.amsgrad || config.max_exp_avg_sq, "adam: amsgrad needs the max_exp_avg_sq buffer");
  if (config.amsgrad) check_state("adam", param, *config.max_exp_avg_sq, "max_exp_avg_sq");
  // The per-parameter CUDA kernel predates amsgrad and maximize; CUDA steps go through adam_update_multi_.
  MINIDL_CHECK(param.device().is_cpu() || (!config.amsgrad && !config.maximize),
               "adam: amsgrad and maximize on ", param.device(), " take adam_update_multi_");
  kernels_for(param.device()).adam_step(param, grad, exp_avg, exp_avg_sq, config);
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
  if (config.amsgrad) config.max_exp_avg_sq->bump_version();
}

void adam_update_multi_(AdamTensorLists& t, const AdamMultiConfig& config) {
  const size_t n = t.params.size();
  MINIDL_CHECK(t.grads.size() == n && t.exp_avgs.size() == n && t.exp_avg_sqs.size() == n && t.steps.size() == n &&
                   t.max_exp_avg_sqs.size() == (config.amsgrad ? n : 0),
               "adam: expected one gradient, exp_avg, exp_avg_sq", config.amsgrad ? ", max_exp_avg_sq" : "",
               " and step count per parameter");
  if (n == 0) return;
  const Device device = t.params[0].device();
  for (size_t i = 0; i < n; ++i) {
    MINIDL_CHECK(t.params[i].is_contiguous(), "adam: parameters must be contiguous");
    MINIDL_CHECK(t.params[i].device() == device && t.params[i].dtype() == t.params[0].dtype(),
                 "adam: one multi-tensor update takes parameters of one device and dtype, got ", t.params[0].dtype(),
                 " on ", device, " and ", t.params[i].dtype(), " on ", t.params[i].device());
    check_state("adam", t.params[i], t.grads[i], "the gradient");
    check_state("adam", t.params[i], t.exp_avgs[i], "exp_avg");
    check_state("adam", t.params[i], t.exp_avg_sqs[i], "exp_avg_sq");
    if (config.amsgrad) check_state("adam", t.params[i], t.max_exp_avg_sqs[i], "max_exp_avg_sq");
    const Tensor& s = t.steps[i];
    MINIDL_CHECK(s.numel() == 1 && s.dtype() == kFloat32 && s.device() == device,
                 "adam: expected each step count as a one-element float32 tensor on ", device, ", got ", s.dtype(),
                 " of shape ", s.shape(), " on ", s.device());
  }
  MINIDL_CHECK(config.lr && config.lr->numel() == 1 && config.lr->dtype() == t.params[0].dtype() &&
                   config.lr->device() == device,
               "adam: expected the learning rate as a one-element ", t.params[0].dtype(), " tensor on ", device);
  MINIDL_CHECK(!config.found_inf || (config.found_inf->numel() == 1 && config.found_inf->dtype() == kFloat32 &&
                                     config.found_inf->device() == device),
               "adam: expected found_inf as a one-element float32 tensor on ", device);
  if (config.copies) check_copies("adam", t.params, *config.copies);
  kernels_for(device).adam_step_multi(t, config);
  for (auto* list : {&t.params, &t.exp_avgs, &t.exp_avg_sqs, &t.max_exp_avg_sqs, &t.steps})
    for (const Tensor& x : *list) x.bump_version();
  if (config.copies)
    for (const Tensor& c : *config.copies)
      if (c.defined()) c.bump_version();
}

Tensor clip_grad_norm_fused_(std::vector<Tensor>& grads, double max_norm) {
  if (grads.empty()) return {};
  for (const Tensor& g : grads) {
    if (!g.is_contiguous() || g.device() != grads[0].device() || g.dtype() != grads[0].dtype()) return {};
  }
  Tensor total = Tensor::empty({}, grads[0].dtype(), grads[0].device());
  if (!kernels_for(grads[0].device()).clip_grad_norm_multi(grads, max_norm, total)) return {};
  for (const Tensor& g : grads) g.bump_version();
  return total;
}

}  // namespace minidl
