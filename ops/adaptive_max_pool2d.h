#pragma once
// Adaptive max pooling: the max over the windows that give a requested output size.
#include <tuple>

#include "core/tensor.h"

namespace minidl {

/// Max of x [N, C, H, W] (or [C, H, W]) over the windows that give an output of `output_size`:
/// output row i covers rows [floor(i * H / out_h), ceil((i + 1) * H / out_h)), columns likewise, as
/// adaptive_avg_pool2d. Returns (values, indices), indices int64, each the flat position h * W + w
/// of its maximum in its plane (the first maximum; a NaN wins), as torch.adaptive_max_pool2d. The
/// gradient reaches each window's maximum.
///   auto [values, indices] = adaptive_max_pool2d(x, {7, 7});
std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& x, Size2 output_size);

}  // namespace minidl
