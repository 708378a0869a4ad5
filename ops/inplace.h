#pragma once
// In-place forms of out-of-place ops, libtorch's trailing-underscore functions: each computes the
// op and writes the result into x (any view), bumping its version counter. Like add_, they are not
// recorded by autograd: while grad mode is on, an x that requires grad is refused with the reason.
// The result must cast to x's dtype (int64's sqrt_ is refused, as PyTorch refuses it).
// (add_, sub_, mul_, div_ and zero_ write in one kernel pass: ops/elementwise.h.)
#include <optional>
#include <string_view>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// Refuses an in-place write to `x` that autograd would have to record (x requires grad in grad
/// mode), with PyTorch's message for a leaf.
void check_inplace_allowed(const char* name, const Tensor& x);

Tensor& relu_(Tensor& x);
Tensor& sigmoid_(Tensor& x);
Tensor& tanh_(Tensor& x);
Tensor& exp_(Tensor& x);
Tensor& log_(Tensor& x);
Tensor& sqrt_(Tensor& x);
Tensor& neg_(Tensor& x);
Tensor& abs_(Tensor& x);
Tensor& pow_(Tensor& x, const Scalar& exponent);
/// clamp in place; either bound may be absent.   clamp_(w, -1.0, 1.0)
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor& clamp_min_(Tensor& x, const Scalar& min);
Tensor& clamp_max_(Tensor& x, const Scalar& max);
/// value where mask (broadcast to x) is true.   masked_fill_(scores, padding, -INFINITY)
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);
/// x += value * t1 * t2.   addcmul_(v, g, g, 1 - beta2)
Tensor& addcmul_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
/// x += value * t1 / t2.
Tensor& addcdiv_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
/// x = div(x, b, rounding_mode) (ops/arithmetic.h).   div_(counts, 2, "floor")
Tensor& div_(Tensor& x, const Tensor& b, std::optional<std::string_view> rounding_mode);
Tensor& div_(Tensor& x, const Scalar& b, std::optional<std::string_view> rounding_mode);
/// x += weight * (end - x).   lerp_(m, g, 1 - beta1)
Tensor& lerp_(Tensor& x, const Tensor& end, const Scalar& weight);
/// index_fill and index_copy in place.   index_fill_(mask, 1, padded_columns, 0)
Tensor& index_fill_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor& index_copy_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
Tensor& tril_(Tensor& x, int64_t diagonal = 0);
Tensor& triu_(Tensor& x, int64_t diagonal = 0);
/// The main diagonal set to value: a 2-D x, or one whose dims are all equal. With `wrap`, a tall
/// matrix's diagonal starts again every columns + 1 rows, as NumPy's.   fill_diagonal_(m, 0)
Tensor& fill_diagonal_(Tensor& x, const Scalar& fill_value, bool wrap = false);

}  // namespace minidl
