#pragma once
// Pixel shuffle and its inverse (sub-pixel convolution's rearrangement), as torch's: reshape and
// permute compositions, differentiable on every device.
#include <cstdint>

#include "core/tensor.h"

namespace minidl {

/// [*, C * r^2, H, W] -> [*, C, H * r, W * r] with r = upscale_factor: each group of r^2 channels
/// becomes an r x r block of pixels.   pixel_shuffle(conv_out, 3)  // [1, 9, 4, 4] -> [1, 1, 12, 12]
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);

/// The inverse: [*, C, H * r, W * r] -> [*, C * r^2, H, W] with r = downscale_factor.
///   pixel_unshuffle(image, 2)  // [1, 3, 8, 8] -> [1, 12, 4, 4]
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);

}  // namespace minidl
