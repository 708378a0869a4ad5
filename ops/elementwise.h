#pragma once
// Elementwise math with NumPy broadcasting. Backward reduces gradients over broadcast axes.
#include <string>

#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/compare.h"  // eq and operator== live there with the other comparisons

namespace minidl {

// Operands of different dtypes meet in the dtype core/type_promotion.h picks (torch.result_type),
// converted by recorded casts, so each gradient comes back in its operand's own dtype. A C++ scalar
// counts as a wrapped number: int64 * 2 stays int64, int64 * 2.5 is float32, float32 * 2.5 float32.

Tensor add(const Tensor& a, const Tensor& b);
/// a += alpha * b in place, b broadcast to a's shape; a may be any view (a strided destination is
/// written through). Not recorded, so a must not need a gradient while grad mode is on (as in
/// PyTorch, changing a leaf that requires grad in place is an error; under NoGradGuard it is
/// allowed). The result type of a and b must fit a's dtype, as torch.can_cast says: int64 += 0.5
/// is an error, not a truncation. Bumps a's version counter.   add_(param.grad(), g);  add_(x, y, -lr)
Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
/// a += alpha * b for a C++ number b.   add_(x, 1)
Tensor& add_(Tensor& a, const Scalar& b, const Scalar& alpha = 1);
/// a -= alpha * b in place, under the same rules as add_.
Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& a, const Scalar& b, const Scalar& alpha = 1);
/// a *= b in place, under the same rules as add_.   mul_(param.grad(), scale);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, const Scalar& b);
/// a /= b in place (true division: a must be floating), under the same rules as add_.
Tensor& div_(Tensor& a, const Tensor& b);
Tensor& div_(Tensor& a, const Scalar& b);
/// Sets every element to 0 in place, any layout (a view zeroes its part of the base), under the
/// same rules as add_.   zero_(param.grad());  param.grad().zero_();
Tensor& zero_(Tensor& t);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
/// True division, as Python's /: integral and bool operands give the default float dtype.
///   div(arange(3, kInt64), 2) == [0, 0.5, 1] (float32)
Tensor div(const Tensor& a, const Tensor& b);
/// floor(a / b), as Python's //: rounds toward negative infinity (-7 // 2 == -4); integral
/// operands stay integral, and an integral division by zero is an error. No gradient.
Tensor floor_divide(const Tensor& a, const Tensor& b);
/// a - floor_divide(a, b) * b, as Python's %: the result takes the divisor's sign (-7 % 2 == 1).
/// The gradient is 1 for a and -floor(a / b) for b.
Tensor remainder(const Tensor& a, const Tensor& b);
/// a ** b elementwise; the gradient for b needs a > 0 where it is used.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& exponent);

Tensor neg(const Tensor& x);
// exp, log, sqrt, sigmoid and tanh of an integral or bool tensor compute in the default float
// dtype, as PyTorch's; the other activations need a floating tensor.
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
/// |x|; for floating x its gradient is sign(x), 0 at 0, as PyTorch's. Integral x stays integral.
Tensor abs(const Tensor& x);
/// x where x > 0, else negative_slope * x.   leaky_relu(x, 0.2)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// x * Phi(x), Phi the standard normal CDF; approximate "tanh" uses PyTorch's tanh formula
/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).   gelu(x), gelu(x, "tanh")
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
/// x * sigmoid(x) (also called swish).   silu(x)
Tensor silu(const Tensor& x);

/// A 0-d tensor holding `value`, in `like`'s dtype and device, for mixing constants into an op's
/// own formulas (the value is converted to like's dtype: no promotion).
Tensor scalar_like(double value, const Tensor& like);
/// `value` as the operand of an op with `other`: a wrapped 0-d tensor on other's device, already
/// in result_type(other, value), so that `x * 0.5` makes one small tensor and promotes as PyTorch.
Tensor scalar_operand(const Scalar& value, const Tensor& other);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, const Scalar& s) { return add(a, scalar_operand(s, a)); }
inline Tensor operator-(const Tensor& a, const Scalar& s) { return sub(a, scalar_operand(s, a)); }
inline Tensor operator*(const Tensor& a, const Scalar& s) { return mul(a, scalar_operand(s, a)); }
inline Tensor operator/(const Tensor& a, const Scalar& s) { return div(a, scalar_operand(s, a)); }
inline Tensor operator%(const Tensor& a, const Scalar& s) { return remainder(a, scalar_operand(s, a)); }
inline Tensor operator+(const Scalar& s, const Tensor& a) { return add(scalar_operand(s, a), a); }
inline Tensor operator-(const Scalar& s, const Tensor& a) { return sub(scalar_operand(s, a), a); }
inline Tensor operator*(const Scalar& s, const Tensor& a) { return mul(scalar_operand(s, a), a); }
inline Tensor operator/(const Scalar& s, const Tensor& a) { return div(scalar_operand(s, a), a); }
inline Tensor operator%(const Scalar& s, const Tensor& a) { return remainder(scalar_operand(s, a), a); }
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
inline Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }
inline Tensor& operator+=(Tensor& a, const Scalar& s) { return add_(a, scalar_operand(s, a)); }
inline Tensor& operator-=(Tensor& a, const Scalar& s) { return sub_(a, scalar_operand(s, a)); }
inline Tensor& operator*=(Tensor& a, const Scalar& s) { return mul_(a, scalar_operand(s, a)); }
inline Tensor& operator/=(Tensor& a, const Scalar& s) { return div_(a, scalar_operand(s, a)); }

}  // namespace minidl
