#pragma once
// select and unbind: views that take one position along a dimension and drop that dimension.
// Differentiable (as narrow + squeeze); they share the input's storage.
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// The view at `index` along `dim` (negative counts from the end), without that dimension, as
/// x.select(dim, index) and x[index] for dim 0.   select(x, 1, 0)  // x[:, 0]
Tensor select(const Tensor& x, int64_t dim, int64_t index);
/// Every select along `dim`, in order.   auto rows = unbind(x);  // x.size(0) views
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);

}  // namespace minidl
