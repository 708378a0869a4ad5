#pragma once
// The device passes of mixed-precision training that GradScaler (optim/grad_scaler.h) is built on,
// as PyTorch's torch._amp_foreach_non_finite_check_and_unscale_ and torch._amp_update_scale_.
// Neither reads anything back to the host, so a scaled training step can be captured in a CUDA graph.
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// Multiplies every gradient by *inv_scale in place and sets found_inf to 1 where any of them holds
/// an inf or NaN (it never resets found_inf to 0). One fused pass over the whole list on their
/// device. found_inf and inv_scale: 0-d float32 tensors on that device; grads: floating, any dtypes.
///   Tensor found_inf = zeros({}, kFloat32, dev);  amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv);
void amp_foreach_non_finite_check_and_unscale_(std::vector<Tensor>& grads, Tensor& found_inf, const Tensor& inv_scale);

/// Updates the loss scale from found_inf, on the device: if found_inf != 0 the scale is multiplied by
/// backoff_factor and growth_tracker reset; else growth_tracker counts one more good step, and at
/// growth_interval the scale is multiplied by growth_factor (while it stays finite) and the count reset.
/// scale: 0-d float32, growth_tracker: 0-d int32, found_inf: 0-d float32, one device.
///   amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2000);
Tensor& amp_update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                          double backoff_factor, int64_t growth_interval);

}  // namespace minidl
