#pragma once
// Cumulative sums and products along one dim.
#include <cstdint>
#include <tuple>

#include "core/tensor.h"

namespace minidl {

/// out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...] along `dim`; bool and integral inputs
/// give int64, as PyTorch's. Gradient: the reversed cumulative sum of the output's gradient.
///   cumsum(x, 1)
Tensor cumsum(const Tensor& x, int64_t dim);
/// The cumulative product along `dim` (int64 for bool and integral inputs). Its gradient is exact
/// where x has zeros (computed without dividing by x), but is not itself differentiable.
///   cumprod(x, -1)
Tensor cumprod(const Tensor& x, int64_t dim);
/// log(exp(x[0]) + ... + exp(x[i])) along `dim`, without overflow (-inf elements add nothing);
/// integral inputs in the default float dtype. Its gradient is not itself differentiable (a
/// create_graph backward through it stops with an error naming the op).
///   logcumsumexp(log_probs, 1)
Tensor logcumsumexp(const Tensor& x, int64_t dim);
/// The running maximum along `dim` and the index (int64) where it was last reached: a later equal
/// element takes the index over, and from the first NaN on the values are NaN (each later NaN taking
/// the index), as torch.cummax. The gradient goes to the elements the values came from.
///   auto [best_so_far, at] = cummax(rewards, 0);
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);
/// The running minimum and where it was last reached, as cummax.
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);
/// The gradient of cumprod(x, dim) for the output gradient `grad` (x's shape and dtype): entry i is
/// the sum over j >= i of grad[j] times the product of x[0..j] without x[i]. prod's backward.
///   Tensor gx = cumprod_backward(g, x, 0);
Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim);

/// The n-th forward difference along dim, x[i + 1] - x[i] applied n times, after `prepend` and
/// `append` are concatenated along it, as torch.diff (a bool tensor: x[i + 1] != x[i]). Each
/// application shortens dim by one; n = 0 gives x.   diff(prices), diff(x, 2, 0)
Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = {}, const Tensor& append = {});

}  // namespace minidl
