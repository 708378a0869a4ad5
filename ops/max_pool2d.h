#pragma once
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// Max over kernel windows of x [N, C, H, W]; stride defaults to the kernel size. Backward routes
/// each gradient to the element that was the maximum. ceil_mode rounds the output size up, as in
/// PyTorch (ops/window.h).   max_pool2d(x, 2), max_pool2d(x, 3, 2, 1, 1, /*ceil_mode=*/true)
Tensor max_pool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);

}  // namespace minidl
