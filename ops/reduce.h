#pragma once
// Reductions: sum, mean and variance over all or some dims, max/min and argmax/argmin over one dim.
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// Sum of all elements, a 0-d tensor; for a bool tensor the int64 count of true elements.
Tensor sum(const Tensor& x);
/// sum(x, {0}) over rows; keepdim keeps the reduced dims with size 1. An empty list reduces every
/// dim, as PyTorch's sum(x, dim=[]).
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

struct MaxResult {
  Tensor values;
  Tensor indices;  // int64
};
/// Maximum over `dim` and where it is (the first on ties). Gradient flows to that element.
MaxResult max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Minimum over `dim` and where it is (the first on ties), as max of -x.
MaxResult min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
/// Variance over `dims`: unbiased (divided by n - 1, PyTorch's default) or not (by n).
///   var(x, {0}), var(x, {2, 3}, /*unbiased=*/false, /*keepdim=*/true)
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased = true, bool keepdim = false);

/// Sums `x` down to `shape` (the inverse of broadcasting): the backward of broadcasting ops.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

}  // namespace minidl
