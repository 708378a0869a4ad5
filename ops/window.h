#pragma once
// The sliding-window geometry shared by conv2d, im2col/col2im and max_pool2d (internal to ops/).
#include "core/shape.h"
#include "ops/kernels.h"

namespace minidl {

/// Checks kernel, stride, padding and dilation against a C x H x W image (errors name `op`) and
/// derives the output size: out = (in + 2 * padding - dilation * (k - 1) - 1) / stride + 1.
ConvGeometry window_geometry(const char* op, int64_t channels, int64_t height, int64_t width, Size2 kernel,
                             Size2 stride, Size2 padding, Size2 dilation);

}  // namespace minidl
