#pragma once
// Elementwise math with NumPy broadcasting. Backward reduces gradients over broadcast axes.
#include <string>

#include "core/tensor.h"
#include "ops/compare.h"  // eq and operator== live there with the other comparisons

namespace minidl {

Tensor add(const Tensor& a, const Tensor& b);
/// a += b in place (b broadcast to a's shape; a contiguous); not recorded, so a must not need a
/// gradient while grad mode is on (as in PyTorch, changing a leaf that requires grad in place is an
/// error; under NoGradGuard it is allowed).   add_(param.grad(), g);
Tensor& add_(Tensor& a, const Tensor& b);
/// a -= b in place, under the same rules as add_.
Tensor& sub_(Tensor& a, const Tensor& b);
/// a *= b in place, under the same rules as add_.   mul_(param.grad(), scale);
Tensor& mul_(Tensor& a, const Tensor& b);
/// Sets every element to 0 in place, any layout (a view zeroes its part of the base), under the
/// same rules as add_.   zero_(param.grad());  param.grad().zero_();
Tensor& zero_(Tensor& t);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
/// a ** b elementwise; the gradient for b needs a > 0 where it is used.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
/// |x|, composed as relu(x) + relu(-x): its gradient is sign(x), 0 at 0, as PyTorch's.
Tensor abs(const Tensor& x);
/// x where x > 0, else negative_slope * x.   leaky_relu(x, 0.2)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// x * Phi(x), Phi the standard normal CDF; approximate "tanh" uses PyTorch's tanh formula
/// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).   gelu(x), gelu(x, "tanh")
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
/// x * sigmoid(x) (also called swish).   silu(x)
Tensor silu(const Tensor& x);

/// A 0-d tensor holding `value`, in `like`'s dtype and device, for mixing scalars into ops.
Tensor scalar_like(double value, const Tensor& like);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, scalar_like(s, a)); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, scalar_like(s, a)); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, scalar_like(s, a)); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, scalar_like(s, a)); }
inline Tensor operator+(double s, const Tensor& a) { return add(scalar_like(s, a), a); }
inline Tensor operator-(double s, const Tensor& a) { return sub(scalar_like(s, a), a); }
inline Tensor operator*(double s, const Tensor& a) { return mul(scalar_like(s, a), a); }
inline Tensor operator/(double s, const Tensor& a) { return div(scalar_like(s, a), a); }
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
inline Tensor& operator+=(Tensor& a, double s) { return add_(a, scalar_like(s, a)); }
inline Tensor& operator-=(Tensor& a, double s) { return sub_(a, scalar_like(s, a)); }
inline Tensor& operator*=(Tensor& a, double s) { return mul_(a, scalar_like(s, a)); }

}  // namespace minidl
