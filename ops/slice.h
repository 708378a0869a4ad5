#pragma once
// Slicing and joining along one dimension: narrow/slice/split/chunk are views (no copy); cat and
// stack copy into one new tensor. Each is differentiable.
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// The view of `length` elements from `start` along `dim`, as x.narrow(dim, start, length).
///   narrow(x, 1, 2, 3)  // x[:, 2:5]
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
/// The view of every `step`-th element of [start, end) along `dim`, as x[:, start:end:step] in
/// Python and x.slice(dim, start, end, step) in PyTorch's C++: start and end may be negative (from
/// the end), are clamped to the size and default to the whole dimension; step > 0.
///   slice(x, 1, 1, std::nullopt, 2)  // x[:, 1::2]
Tensor slice(const Tensor& x, int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
/// Joins tensors that agree in every dimension but `dim`, along it.   cat({a, b}, 1)
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Joins tensors of one shape along a new dimension `dim`.   stack({a, b})  // [2, ...a.shape]
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Views of `split_size` elements along `dim`; the last may be shorter.   split(x, 2, 1)
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// Views of the given sizes along `dim`, which must add up to its size (libtorch's split_with_sizes).
///   auto parts = split(x, std::vector<int64_t>{2, 3, 1}, 1)
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
/// `sections` views along `dim` as even as can be (the first size % sections one longer), as
/// torch.tensor_split; or the views between the given indices (x[:i0], x[i0:i1], ..., x[ik:]),
/// each a Python slice (clamped; empty where an index is below the one before).
///   tensor_split(x, 3), tensor_split(x, {1, 4}, 1)
std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices, int64_t dim = 0);
/// `chunks` views along `dim`, each ceil(size / chunks) long but the last, as torch.chunk (which
/// may give fewer).   auto [q, k, v] = chunk(qkv, 3, -1)
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

}  // namespace minidl
