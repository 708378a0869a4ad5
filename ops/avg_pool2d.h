#pragma once
// Average pooling: over fixed windows (avg_pool2d) and over windows sized to give a requested
// output (adaptive_avg_pool2d, whose 1x1 form is the global average pooling that ends a ResNet).
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// Mean over kernel windows of x [N, C, H, W], as torch.nn.functional.avg_pool2d: stride defaults
/// to the kernel size, padding is at most half the kernel, ceil_mode rounds the output size up,
/// and count_include_pad counts the zero padding in each window's divisor.
///   avg_pool2d(x, 2), avg_pool2d(x, 3, 2, 1, /*ceil_mode=*/false, /*count_include_pad=*/false)
Tensor avg_pool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);

/// Mean of x [N, C, H, W] over the windows that give an output of `output_size`: output row i
/// averages rows [floor(i * H / out_h), ceil((i + 1) * H / out_h)), columns likewise.
///   adaptive_avg_pool2d(x, 1)  // [N, C, 1, 1]: global average pooling
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);

}  // namespace minidl
