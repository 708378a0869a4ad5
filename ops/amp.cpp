// Checks the arguments of the mixed-precision passes and hands them to the device's kernels.
#include "ops/amp.h"

#include "core/autograd.h"
#include "ops/kernels.h"

namespace minidl {

namespace {

void check_scalar(const char* op, const char* name, const Tensor& t, DType dtype, Device device) {
  MINIDL_CHECK(t.defined(), op, ": expected ", name, " to be a one-element ", dtype, " tensor, got an undefined tensor");
  MINIDL_CHECK(t.numel() == 1 && t.dtype() == dtype, op, ": expected ", name, " to be a one-element ", dtype,
               " tensor, got ", t.dtype(), " of shape ", t.shape());
  MINIDL_CHECK(t.device() == device, op, ": expected ", name, " on ", device, " (where the other tensors are), got ",
               t.device());
}

}  // namespace

void amp_foreach_non_finite_check_and_unscale_(std::vector<Tensor>& grads, Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "amp_foreach_non_finite_check_and_unscale_";
  MINIDL_CHECK(found_inf.defined(), op, ": expected found_inf, got an undefined tensor");
  const Device device = found_inf.device();
  check_scalar(op, "found_inf", found_inf, kFloat32, device);
  check_scalar(op, "inv_scale", inv_scale, kFloat32, device);
  std::vector<Tensor> work, strided;
  std::vector<size_t> strided_at;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    MINIDL_CHECK(is_floating(g.dtype()), op, ": expected floating gradients, got ", g.dtype(), " at index ", i);
    MINIDL_CHECK(g.device() == device, op, ": expected every gradient on ", device, " (found_inf's device), got ",
                 g.device(), " at index ", i);
    if (g.is_contiguous()) {
      work.push_back(g);
    } else {  // unscaled through a contiguous copy, written back below
      strided_at.push_back(i);
      work.push_back(g.contiguous());
      strided.push_back(work.back());
    }
  }
  NoGradGuard no_grad;
  if (!work.empty()) kernels_for(device).amp_non_finite_check_and_unscale(work, found_inf, inv_scale);
  for (size_t k = 0; k < strided_at.size(); ++k) grads[strided_at[k]].copy_(strided[k]);
  for (const Tensor& g : work) g.bump_version();
  found_inf.bump_version();
}

Tensor& amp_update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                          double backoff_factor, int64_t growth_interval) {
  const char* op = "amp_update_scale_";
  MINIDL_CHECK(scale.defined(), op, ": expected scale, got an undefined tensor");
  check_scalar(op, "scale", scale, kFloat32, scale.device());
  check_scalar(op, "growth_tracker", growth_tracker, kInt32, scale.device());
  check_scalar(op, "found_inf", found_inf, kFloat32, scale.device());
  MINIDL_CHECK(growth_factor > 1 && backoff_factor > 0 && backoff_factor < 1 && growth_interval > 0, op,
               ": expected growth_factor > 1, 0 < backoff_factor < 1 and growth_interval > 0, got ", growth_factor,
               ", ", backoff_factor, " and ", growth_interval);
  kernels_for(scale.device()).amp_update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                               growth_interval);
  scale.bump_version();
  growth_tracker.bump_version();
  return scale;
}

}  // namespace minidl
