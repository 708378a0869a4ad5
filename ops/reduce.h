#pragma once
// Reductions: sum, mean, prod, variance, standard deviation, norms and logsumexp over all or some
// dims; any/all; max/min over all elements, amax/amin over dims, max/min and argmax/argmin over one
// dim. A dims list that is empty reduces every dim, as PyTorch's dim=[] does.
//
// 16-bit inputs: sum and prod accumulate in float32 and round the result to the input's dtype, as
// PyTorch's do (a float16 sum past float16's range is infinite). The statistics built on a sum
// (mean, var, std, norm, logsumexp, nanmean; cov and corrcoef in statistics.h) are computed in
// float32 and rounded once, so an intermediate sum or count that the 16-bit dtype cannot hold (a
// float16 mean of 70,000 values, a bfloat16 count of 257) never reaches the result.
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// Sum of all elements, a 0-d tensor; for a bool tensor the int64 count of true elements.
Tensor sum(const Tensor& x);
/// sum(x, {0}) over rows; keepdim keeps the reduced dims with size 1. An empty list reduces every
/// dim, as PyTorch's sum(x, dim=[]).
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim = false);
/// sum and mean in `dtype`, libtorch's dtype argument: x converted first, then reduced there (a
/// float16 tensor summed in float32; under autocast the dtype asked for is kept).
///   sum(x, kFloat64), mean(h, {1}, false, kFloat32)
Tensor sum(const Tensor& x, DType dtype);
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, DType dtype);
Tensor mean(const Tensor& x, DType dtype);
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, DType dtype);

struct MaxResult {
  Tensor values;
  Tensor indices;  // int64
};
/// Maximum over `dim` and where it is (the first on ties). Gradient flows to that element.
MaxResult max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Without a dim, the index into the flattened tensor (0-d; every dim 1 with keepdim), as
/// torch.argmax.   argmax(logits, 1), argmax(x)
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Minimum over `dim` and where it is (the first on ties), as max of -x.
MaxResult min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Variance over `dims`: unbiased (divided by n - 1, PyTorch's default) or not (by n).
///   var(x, {0}), var(x, {2, 3}, /*unbiased=*/false, /*keepdim=*/true)
Tensor var(const Tensor& x, IntArrayRef dims, bool unbiased = true, bool keepdim = false);

/// var over every element; `unbiased` must be a bool (a braced dims list picks the overload above).
///   var(x), var(x, /*unbiased=*/false)
Tensor var(const Tensor& x);
template <class Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
Tensor var(const Tensor& x, Bool unbiased) {
  return var(x, std::vector<int64_t>{}, unbiased, false);
}
/// var with libtorch's `correction`: divided by max(0, n - correction) (1: unbiased, 0: biased).
///   var(x, {1}, Scalar(0), /*keepdim=*/true)
Tensor var(const Tensor& x, IntArrayRef dims, const std::optional<Scalar>& correction,
           bool keepdim = false);
/// Standard deviation, the square root of var (its gradient is NaN where the deviation is 0, as
/// PyTorch's).   std(x), std(x, {0}), std(x, {2, 3}, /*unbiased=*/false, /*keepdim=*/true)
Tensor std(const Tensor& x, IntArrayRef dims, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x);
template <class Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
Tensor std(const Tensor& x, Bool unbiased) {
  return std(x, std::vector<int64_t>{}, unbiased, false);
}
Tensor std(const Tensor& x, IntArrayRef dims, const std::optional<Scalar>& correction,
           bool keepdim = false);

/// Product of all elements (0-d); bool and integral inputs give int64, as PyTorch's. The gradient
/// is the product of the other elements, exact where x has zeros.   prod(x), prod(x, 1, true)
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);

/// True where some element (over `dim`, or all) is nonzero (NaN counts as nonzero); a bool tensor
/// for any input dtype, false over nothing.   any(mask), any(x > 0, 1)
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
/// True where every element is nonzero; true over nothing.   all(x == y), all(mask, 0, true)
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);

/// The largest element (0-d); NaN if there is one. The gradient is split evenly among the elements
/// equal to it, as PyTorch's max().   max(x), min(x)
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
/// The largest value over `dims` (all when empty), the gradient split evenly among ties.
///   amax(x, {1}), amin(x, {0, 2}, /*keepdim=*/true)
Tensor amax(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);

/// The p-norm over every element, or over `dims` (all when empty): p = 2 (Frobenius for a matrix),
/// 1, 0 (the count of nonzeros), +-infinity (largest / smallest |x|), or any other real p, as
/// (sum |x|^p)^(1/p). Floating inputs. The gradient is 0 where the norm is 0 (p = 2 at the origin,
/// as PyTorch's); for infinities it is split evenly among the elements reaching the norm.
///   norm(x), norm(x, 1), norm(x, INFINITY, {1}, /*keepdim=*/true)
Tensor norm(const Tensor& x, const Scalar& p = 2);
Tensor norm(const Tensor& x, const Scalar& p, IntArrayRef dims, bool keepdim = false);
/// torch.linalg.vector_norm: norm over `dim` (every element when absent).
///   linalg_vector_norm(x, 2, std::vector<int64_t>{1})
Tensor linalg_vector_norm(const Tensor& x, const Scalar& ord = 2,
                          const std::optional<std::vector<int64_t>>& dim = std::nullopt, bool keepdim = false);

/// log(sum(exp(x))) over `dims`, computed stably (the maximum subtracted first; infinities kept);
/// integral inputs compute in the default float dtype. Gradient: softmax over `dims`.
///   logsumexp(logits, {1})
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// var and mean over the same dims in one call, as torch.var_mean; std_mean likewise.
///   auto [v, m] = var_mean(x, {1}, Scalar(0), /*keepdim=*/true);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims = {}, bool unbiased = true,
                                    bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims,
                                    const std::optional<Scalar>& correction, bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, IntArrayRef dims = {}, bool unbiased = true,
                                    bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, IntArrayRef dims,
                                    const std::optional<Scalar>& correction, bool keepdim = false);
/// Over every element, as libtorch's var_mean(x, bool unbiased).   auto [v, m] = var_mean(x, false);
template <class Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, Bool unbiased) {
  return var_mean(x, std::vector<int64_t>{}, unbiased, false);
}
template <class Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, Bool unbiased) {
  return std_mean(x, std::vector<int64_t>{}, unbiased, false);
}
/// The smallest and largest value over `dim` (every element when absent), as torch.aminmax.
///   auto [lo, hi] = aminmax(x);
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// Reductions that skip elements (ops/reduce_skipping.cpp).

/// sum treating NaN as 0; integral x as sum.   nansum(losses), nansum(x, {1})
Tensor nansum(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
/// The mean of the elements that are not NaN (NaN where all are).   nanmean(x, {0})
Tensor nanmean(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
/// The int64 count of nonzero elements over `dims` (all when empty).   count_nonzero(mask, {1})
Tensor count_nonzero(const Tensor& x, IntArrayRef dims = {});

/// Sums `x` down to `shape` (the inverse of broadcasting): the backward of broadcasting ops.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

}  // namespace minidl
