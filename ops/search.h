#pragma once
// Searching and counting: searchsorted, bucketize, bincount, histc, as PyTorch's. None is
// differentiable (their results are indices and counts), and each is composed of comparisons,
// sums and scatter_add, so each runs wherever those run.
//
// Cost: searchsorted and bucketize compare every value with every element of its sequence (count of
// elements < value, or <= for right) instead of a binary search: O(N * M) work for N boundaries and M
// values. Memory stays bounded: the values are processed in chunks of at most 2^24 comparisons.
#include <cstdint>
#include <optional>
#include <string>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// For each value, the int64 index at which it would be inserted into the sorted last dim of
/// sorted_sequence to keep it sorted: the first such index, or the last one with right (or side
/// "right"). sorted_sequence is 1-D (values any shape) or N-D with values' leading dims equal to its
/// own (values [..., M] against [..., N]); the result has values' shape, int32 with out_int32. A NaN
/// value goes past every element, as PyTorch's; NaNs at a sequence's end count as larger than every
/// value (NumPy's rule; PyTorch's binary search leaves that case to its probes). `sorter`
/// (int64, the sequence's shape) gives the sequence's ascending order when it is not sorted itself.
///   searchsorted(edges, x), searchsorted(edges, x, false, /*right=*/true)
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false, bool right = false,
                    const std::optional<std::string>& side = std::nullopt,
                    const std::optional<Tensor>& sorter = std::nullopt);
/// One value: a 0-d result; sorted_sequence must be 1-D.   searchsorted(edges, 2.5)
Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& value, bool out_int32 = false, bool right = false,
                    const std::optional<std::string>& side = std::nullopt,
                    const std::optional<Tensor>& sorter = std::nullopt);
/// The bucket of each element of x among the 1-D ascending boundaries: searchsorted(boundaries, x,
/// out_int32, right) (right: boundaries[i - 1] <= x < boundaries[i]; else boundaries[i - 1] < x <= boundaries[i]).
///   bucketize(x, Tensor::from_vector<float>({0, 1, 2}))
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32 = false, bool right = false);
Tensor bucketize(const Scalar& x, const Tensor& boundaries, bool out_int32 = false, bool right = false);
/// How often each value 0, 1, ..., max(x) occurs in the 1-D non-negative integral x (at least
/// minlength bins): int64 counts, or with weights (1-D, x's length) the sums of the weights, float32
/// for float32 weights and float64 otherwise, as PyTorch's. x's minimum and maximum are read on the
/// host (a device sync on CUDA), as PyTorch does.   bincount(labels, {}, 10)
Tensor bincount(const Tensor& x, const std::optional<Tensor>& weights = std::nullopt, int64_t minlength = 0);
/// A histogram of floating x with `bins` equal bins over [min, max] (x's dtype): min == max means
/// x's own minimum and maximum (read on the host: a device sync on CUDA; widened by 1 on both sides
/// when equal). Elements outside [min, max] (and NaN) are ignored; max itself falls in the last bin.
///   histc(x, 10, 0, 1)
Tensor histc(const Tensor& x, int64_t bins = 100, const Scalar& min = 0, const Scalar& max = 0);

}  // namespace minidl
