#pragma once
// Comparisons, selection and clamping. Comparisons broadcast NumPy-style and return bool tensors
// (not differentiable); where, masked_fill and clamp pass gradients to the values they select.
#include <optional>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// Elementwise a == b (and !=, <, <=, >, >=), broadcast, compared in result_type(a, b); a bool
/// tensor.
///   int64_t correct = eq(argmax(logits, 1), target).sum().item<int64_t>();
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
/// Against a scalar, promoted as PyTorch promotes: an int64 tensor against 0.5 compares in float32,
/// against 2 in int64.
///   Tensor positive = gt(x, 0.0);  // or x > 0
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);

/// a where cond is true, else b: cond bool, a and b promoted to result_type(a, b), all three
/// broadcast together.
/// Gradients go to a where cond holds and to b elsewhere.   Tensor y = where(x > 0, x, 0.1 * x);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);

/// x with `value` wherever the bool mask (broadcast to x's shape) is true; the gradient reaches x
/// where the mask is false.   Tensor scores = masked_fill(logits, padding, -1e9);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// The same with a 0-d tensor value, which receives the gradient of the filled elements.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);

/// min(max(x, min), max) with either bound optional (not both absent), as torch.clamp: the
/// gradient is 1 where min <= x <= max (bounds included) and 0 outside; when min > max every
/// element becomes max; NaN stays NaN. The result has result_type(x, min, max): an int64 tensor
/// clamped to 2.5 becomes float32.   clamp(x, 0.0, 6.0), clamp(x, std::nullopt, 1.0)
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
/// clamp, by its NumPy name.   clip(x, -1, 1)
inline Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) {
  return clamp(x, min, max);
}

/// Where |a - b| <= atol + |rtol * b| elementwise (a bool tensor, broadcast), as torch.isclose:
/// equal values (infinities too) are close, a NaN is close to a NaN only with equal_nan. a and b
/// must have one dtype; integers compare in float32.   isclose(a, b, 1e-5, 1e-8)
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-05, double atol = 1e-08, bool equal_nan = false);
/// True when every element of isclose(a, b, ...) is: a host bool, so it waits for the device.
///   EXPECT_TRUE(allclose(out_cuda.cpu(), out_cpu));
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-05, double atol = 1e-08, bool equal_nan = false);
/// True when a and b have the same shape and equal elements (compared in result_type(a, b); NaN
/// equals nothing), as torch.equal; waits for the device.   equal(x, x.clone()) == true
bool equal(const Tensor& a, const Tensor& b);

inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
// A scalar on the left flips the comparison: 0.5 < x is x > 0.5.
inline Tensor operator==(const Scalar& a, const Tensor& b) { return eq(b, a); }
inline Tensor operator!=(const Scalar& a, const Tensor& b) { return ne(b, a); }
inline Tensor operator<(const Scalar& a, const Tensor& b) { return gt(b, a); }
inline Tensor operator<=(const Scalar& a, const Tensor& b) { return ge(b, a); }
inline Tensor operator>(const Scalar& a, const Tensor& b) { return lt(b, a); }
inline Tensor operator>=(const Scalar& a, const Tensor& b) { return le(b, a); }

}  // namespace minidl
