#pragma once
// Comparisons, selection and clamping. Comparisons broadcast NumPy-style and return bool tensors
// (not differentiable); where, masked_fill and clamp pass gradients to the values they select.
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// Elementwise a == b (and !=, <, <=, >, >=) of one dtype, broadcast; a bool tensor.
///   int64_t correct = eq(argmax(logits, 1), target).sum().item<int64_t>();
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
/// Against a scalar: in the tensor's dtype for floating tensors and for integral scalars on int64
/// ones; otherwise (an int64 or bool tensor against 0.5, say) in float64, as PyTorch promotes.
///   Tensor positive = gt(x, 0.0);  // or x > 0
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

/// a where cond is true, else b: cond bool, a and b of one dtype, all three broadcast together.
/// Gradients go to a where cond holds and to b elsewhere.   Tensor y = where(x > 0, x, 0.1 * x);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);

/// x with `value` wherever the bool mask (broadcast to x's shape) is true; the gradient reaches x
/// where the mask is false.   Tensor scores = masked_fill(logits, padding, -1e9);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// The same with a 0-d tensor value, which receives the gradient of the filled elements.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);

/// min(max(x, min), max) with either bound optional (not both absent), as torch.clamp: the
/// gradient is 1 where min <= x <= max (bounds included) and 0 outside; when min > max every
/// element becomes max; NaN stays NaN.   clamp(x, 0.0, 6.0), clamp(x, std::nullopt, 1.0)
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max = std::nullopt);

inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }
// A scalar on the left flips the comparison: 0.5 < x is x > 0.5.
inline Tensor operator==(double a, const Tensor& b) { return eq(b, a); }
inline Tensor operator!=(double a, const Tensor& b) { return ne(b, a); }
inline Tensor operator<(double a, const Tensor& b) { return gt(b, a); }
inline Tensor operator<=(double a, const Tensor& b) { return ge(b, a); }
inline Tensor operator>(double a, const Tensor& b) { return lt(b, a); }
inline Tensor operator>=(double a, const Tensor& b) { return le(b, a); }

}  // namespace minidl
