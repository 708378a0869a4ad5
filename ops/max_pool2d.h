#pragma once
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// Max over kernel windows of x [N, C, H, W]; stride defaults to the kernel size. Backward routes
/// each gradient to the element that was the maximum.   max_pool2d(x, 2)
Tensor max_pool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride = std::nullopt, Size2 padding = 0);

}  // namespace minidl
