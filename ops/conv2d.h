#pragma once
// 2-D convolution by im2col + GEMM, and im2col / col2im as differentiable ops of their own.
#include "core/tensor.h"

namespace minidl {

/// x [N, C, H, W], weight [O, C, kh, kw], bias [O] or undefined -> [N, O, out_h, out_w] with
/// out = (in + 2 * padding - dilation * (k - 1) - 1) / stride + 1.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
              Size2 padding = 0, Size2 dilation = 1);

/// x [N, C, H, W] -> [N, C*kh*kw, out_h*out_w]: each column holds one receptive field.
Tensor im2col(const Tensor& x, Size2 kernel, Size2 stride = 1, Size2 padding = 0, Size2 dilation = 1);
/// The adjoint of im2col: sums columns back into an image of size `image` (height, width).
Tensor col2im(const Tensor& cols, Size2 image, Size2 kernel, Size2 stride = 1, Size2 padding = 0,
              Size2 dilation = 1);

}  // namespace minidl
