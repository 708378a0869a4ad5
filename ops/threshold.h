#pragma once
// threshold, as torch::threshold: a differentiable composition of a comparison and where.
#include "core/tensor.h"

namespace minidl {

/// x where x > threshold, else value (a NaN stays NaN, as PyTorch's). The gradient is 1 where
/// x > threshold, 0 elsewhere.   threshold(x, 0.1, 20.0)
Tensor threshold(const Tensor& x, double threshold, double value);

}  // namespace minidl
