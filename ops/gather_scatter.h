#pragma once
// Gather and scatter along one dim (torch.gather, scatter, scatter_add and their in-place forms)
// and index_add. Differentiable as PyTorch's: gather, scatter's src and x, scatter_add, index_add.
// Indices are int64, checked to lie in [0, size) (one host read of their minimum and maximum: a
// device sync on CUDA), and an index out of range is an error naming the value, the dim and the size.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/autograd.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// out[i][j][k] = x[index[i][j][k]][j][k] for dim 0 (and so on): out has index's shape; index has
/// x's number of dims and index.size(d) <= x.size(d) for d != dim. The gradient adds back into x.
///   Tensor picked = gather(logits, 1, target.unsqueeze(1));  // [N, 1]
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, bool sparse_grad = false);
/// x with src[i][j][k] written at [index[i][j][k]][j][k] (dim 0): index.size(d) <= src.size(d) for
/// every d and <= x.size(d) for d != dim. Repeated targets: one write wins (the last in index order
/// on the CPU). Gradients: x's where nothing was written, src's gathered back.
///   Tensor one_hot = scatter(zeros({4, 3}), 1, labels.unsqueeze(1), 1.0);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// The same with one value everywhere index points.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
/// In place: writes into x (any layout, a view included) and bumps its version. Recorded when x or
/// src requires grad (on x's own history: a tensor that x is a view of does not see the write in its
/// gradient); a leaf that requires grad is refused, as other in-place ops refuse it.
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
/// As scatter, but repeated targets add up: x[index[i][j][k]][j][k] += src[i][j][k] (dim 0).
///   Tensor counts = scatter_add(zeros({10}, kInt64), 0, labels, ones_like(labels));
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// x with every src[i][j][k] combined into x[index[i][j][k]][j][k] (dim 0) by `reduce`: "sum",
/// "prod", "mean" (integers: floor of the mean), "amax" or "amin" (a NaN wins), with x's own value
/// taking part where include_self, else only src's at the targeted positions (the others keep x), as
/// torch.scatter_reduce (ops/scatter_reduce.cpp). Every run gives the same bits but for sum and mean
/// on CUDA outside deterministic mode (atomics, as scatter_add). Differentiable in x and src.
///   Tensor best = scatter_reduce(full({3}, -1e9), 0, segment, scores, "amax", false);
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self = true);
/// In place: x.copy_ of the result (recorded as a copy).
Tensor& scatter_reduce_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                        bool include_self = true);
/// x with alpha * source's slice k added at slice index[k] along dim: index is 1-D, source has x's
/// shape with index.numel() at dim; repeats add up. Floating dtypes.
///   Tensor sums = index_add(zeros({3, 4}), 0, rows, values);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);

// Composed of the ops above (ops/gather_scatter_composed.cpp).

/// gather after broadcasting x and indices against each other in every dim but `dim`, as
/// torch.take_along_dim; without dim, over both flattened.   take_along_dim(x, argsort(x, 1), 1)
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);
/// x read as 1-D at `index` (any shape, negative values counting from the end), shaped as index,
/// as torch.take.   take(x, tensor({0, -1}, kInt64))
Tensor take(const Tensor& x, const Tensor& index);
/// x with the slices at `index` (1-D) along dim set to `value`.   index_fill(x, 1, cols, 0.0)
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
/// The same with a 0-d tensor's value, whose gradient is the sum over the filled elements.
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value);
/// x with source's slice k written at slice index[k] along dim (source: x's shape with index.numel()
/// at dim). Repeated indices: one write wins.   index_copy(cache, 1, positions, new_keys)
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);

/// x with the positions where mask (broadcast to x) is true filled, in order, from source's elements
/// (source has at least as many; the count is read on the host, a sync on CUDA).
///   masked_scatter(x, mask, replacements)
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);

namespace detail {
/// `index` as int64 on `device` (int32, int8 and uint8 converted), with negative values wrapped
/// when `wrap_negative`; throws, naming `op`, the value, `dim` and `size`, for one out of range.
/// Reads the minimum and maximum on the host (a device sync on CUDA).
Tensor checked_index(const Tensor& index, int64_t size, Device device, const char* op, int64_t dim,
                     bool wrap_negative);
/// Records an in-place change of `x` already made: the new entry takes x's previous history and
/// `others` as inputs (the backward returns their gradients in that order), and x takes the entry.
/// A leaf that requires grad is refused; call before writing.
/// Checks a gather / scatter index against x (and src): int64, x's rank, no dim larger than x's but
/// `dim` (wrapped in place) nor than src's, values in range. Returns the index on x's device.
Tensor checked_scatter_geometry(const char* op, const Tensor& x, int64_t& dim, const Tensor& index, const Tensor* src);
void check_inplace_recordable(const char* op, const Tensor& x);
void record_inplace(const char* op, Tensor& x, const std::vector<Tensor>& others, const std::vector<Tensor>& saved,
                    autograd::BackwardFn backward);
}  // namespace detail

}  // namespace minidl
