#pragma once
// The sliding-window geometry shared by conv2d, conv_transpose2d, im2col/col2im and pooling, and
// the bias gradient of both convolutions (internal to ops/).
#include "core/shape.h"
#include "ops/kernels.h"

namespace minidl {

/// Checks kernel, stride, padding and dilation against a C x H x W image (errors name `op`) and
/// derives the output size: out = (in + 2 * padding - dilation * (k - 1) - 1) / stride + 1.
ConvGeometry window_geometry(const char* op, int64_t channels, int64_t height, int64_t width, Size2 kernel,
                             Size2 stride, Size2 padding, Size2 dilation);

/// The window geometry of pooling (max_pool2d, avg_pool2d), as PyTorch checks and sizes it: padding
/// at most half the kernel, and with ceil_mode the output rounds up, keeping only windows that
/// start inside the image or its left/top padding:
///   out = ceil((in + 2 * padding - dilation * (k - 1) - 1) / stride) + 1, minus 1 if the last
///   window would start at or past in + padding.
ConvGeometry pool_geometry(const char* op, int64_t channels, int64_t height, int64_t width, Size2 kernel,
                           Size2 stride, Size2 padding, Size2 dilation, bool ceil_mode);

/// The bias gradient of a convolution: g3 [N, C, P] summed over N and P into [C], rows first
/// (contiguous), then the batch.
Tensor conv_bias_grad(const Tensor& g3);
/// The same from a 4-D gradient [N, C, H, W], contiguous or channels-last: the channels-last one
/// summed as the rows of [N*H*W, C] in one pass, without a transpose.
Tensor conv_bias_grad_4d(const Tensor& grad);

}  // namespace minidl
