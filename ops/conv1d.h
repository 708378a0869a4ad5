#pragma once
// 1-d convolution and pooling over [N, C, L] (or [C, L]), as torch::conv1d, max_pool1d and
// avg_pool1d.
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// x [N, C, L] or [C, L], weight [O, C / groups, k], bias [O] or undefined -> [N, O, out] with
/// out = (L + 2 * padding - dilation * (k - 1) - 1) / stride + 1.   conv1d(x, w, b, 1, 1)
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
/// Max over windows of x [N, C, L] or [C, L]; stride defaults to the kernel size; padding counts as
/// -infinity; ceil_mode rounds the output size up.   max_pool1d(x, 2)
Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, int64_t dilation = 1, bool ceil_mode = false);
/// Mean over windows of x [N, C, L] or [C, L], as avg_pool2d over one dimension.   avg_pool1d(x, 3, 1, 1)
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, bool ceil_mode = false, bool count_include_pad = true);

}  // namespace minidl
