#pragma once
// Order statistics: median, nanmedian, kthvalue, mode, quantile and nanquantile, as PyTorch's. Each is a
// stable sort (ops/sort.h) followed by gathers at computed positions, so the gradient goes back
// through the gathered sorted values to the elements picked (and, for quantile, split between the
// two interpolated neighbours); they run on every device the sort runs on. Which index is returned
// on ties (PyTorch does not promise one): the stable sort's, i.e. among equal values the one that
// sits at the chosen rank when equal elements keep their original order.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "core/tensor.h"

namespace minidl {

/// The lower median of all elements (the element of rank (n - 1) / 2 in sorted order), a 0-d
/// tensor; NaN if any element is NaN (an empty floating tensor gives NaN too).   Tensor m = median(x);
Tensor median(const Tensor& x);
/// The lower median along `dim` and its int64 position there: (values, indices). A row holding
/// NaN gives NaN and the position of its first NaN. An error for an empty `dim`.
///   auto [m, where] = median(x, 1, /*keepdim=*/true);
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
/// median ignoring NaN: the lower median of the elements that are not NaN (NaN where all are).
///   nanmedian(x), auto [m, i] = nanmedian(x, 0);
Tensor nanmedian(const Tensor& x);
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
/// The k-th smallest element along `dim` (k counts from 1) and its int64 position; NaN sorts as the
/// largest value. An error unless 1 <= k <= x.size(dim).   auto [v, i] = kthvalue(x, 2, 0);
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);

/// The most frequent value along `dim` (the smallest of those tied) and the int64 position of its
/// last occurrence, as torch.mode. Each NaN counts apart, as NaN != NaN (PyTorch does not say how
/// it counts them).   auto [label, at] = mode(votes, 1);
std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);

/// The q-th quantiles of x (float32 or float64) along `dim`, or of all its elements when dim is
/// absent (keepdim then keeps every dim with size 1). q: a double or a 0-d / 1-D tensor of x's dtype
/// with values in [0, 1] (a tensor q is read on the host to check it: a device sync on CUDA); a 1-D
/// q puts its own dim first in the result. With n values the rank of q is q * (n - 1), between two
/// sorted values a (below) and b (above): "linear" a + (b - a) * frac(rank), "lower" a, "higher" b,
/// "nearest" the one at round(rank) (halves to even), "midpoint" (a + b) / 2. A NaN in the
/// reduced elements gives NaN. Differentiable in x (q is treated as a constant).
///   quantile(x, 0.9), quantile(x, Tensor::from_vector<float>({0.25, 0.75}), 1, false, "nearest")
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                const std::string& interpolation = "linear");
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                const std::string& interpolation = "linear");
/// quantile over the elements that are not NaN (n counts those only; NaN where all are NaN).
///   nanquantile(x, 0.5, 0)
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                   const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                   const std::string& interpolation = "linear");

}  // namespace minidl
