#pragma once
// A convolution with its ReLU (and a following max pool) as one op: the same values and gradients as
// the composition, with fewer passes over the convolution's output.
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// relu(conv2d(x, weight, bias, stride, padding, dilation)): the bias and the ReLU are one pass over
/// the convolution's output, and the backward takes the ReLU's mask and the bias gradient in one pass.
Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
                   Size2 padding = 0, Size2 dilation = 1);

/// max_pool2d(relu(conv2d(x, weight, bias, stride, padding, dilation)), pool): a pool of
/// non-overlapping pool x pool windows (stride = kernel, no padding). One kernel reads the
/// convolution's output once and writes the pooled result: the bias is constant over a window and
/// ReLU is monotonic, so the pooled maximum of relu(x + b) is relu(max(x + b)). Its backward writes
/// the convolution's gradient in one pass and takes the bias gradient from the pooled gradient.
Tensor conv2d_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                              Size2 dilation, int64_t pool);

}  // namespace minidl
