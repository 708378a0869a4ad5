#pragma once
// 2-D transposed convolution ("deconvolution"): the adjoint of conv2d.
#include "core/tensor.h"

namespace minidl {

/// x [N, C_in, H, W], weight [C_in, C_out / groups, kh, kw] (PyTorch's layout), bias [C_out] or
/// undefined -> [N, C_out, out_h, out_w] with
///   out = (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
/// conv_transpose2d(y, w) is the gradient of conv2d(x, w) with respect to x, applied to y. As in
/// PyTorch, output_padding must be smaller than the stride or the dilation, and groups comes before
/// dilation.   conv_transpose2d(x, w, b, /*stride=*/2, /*padding=*/1, /*output_padding=*/1)
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
                        Size2 padding = 0, Size2 output_padding = 0, int64_t groups = 1, Size2 dilation = 1);

}  // namespace minidl
