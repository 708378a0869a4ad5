#pragma once
// Sorting along one dim: sort, argsort, topk.
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>

#include "core/tensor.h"

namespace minidl {

/// Sorts along `dim`: (values, indices), indices int64 positions along `dim`. The sort is always
/// stable (equal elements keep their order), on the CPU and on CUDA alike, so both give the same
/// indices; NaN sorts as the largest value, as PyTorch's. The gradient goes back to each value's
/// position.   auto [values, indices] = sort(x, 1, /*descending=*/true);   std::tie(v, i) = sort(x);
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// libtorch's form with `stable` first; every sort is stable here, so it changes nothing.
///   auto [v, i] = sort(x, /*stable=*/true, 0);
std::tuple<Tensor, Tensor> sort(const Tensor& x, std::optional<bool> stable, int64_t dim = -1,
                                bool descending = false);
/// x sorted along its first dim, as torch.msort.
Tensor msort(const Tensor& x);
/// The indices of sort(x, dim, descending).   argsort(scores, 1, /*descending=*/true)
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// libtorch's form with `stable` first (a bool: argsort(x, 1) is the dim form).
template <class Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
Tensor argsort(const Tensor& x, Bool /*stable*/, int64_t dim = -1, bool descending = false) {
  return argsort(x, dim, descending);
}
/// The k largest (or smallest) elements along `dim` and their int64 positions, in sorted order (also
/// when `sorted` is false, which PyTorch leaves unspecified); ties keep their original order. An
/// error unless 0 <= k <= x.size(dim).   auto [top, where] = topk(logits, 5);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

}  // namespace minidl
