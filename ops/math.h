#pragma once
// Elementwise math beyond arithmetic: trigonometric, rounding, logarithmic and special functions,
// atan2, maximum / minimum, fmod, and the floating-point class tests. libtorch's names, arguments
// and results; the gradient of each differentiable op is built from these ops themselves, so it
// can be differentiated again.
#include <cstdint>
#include <optional>
#include <tuple>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

// The transcendental functions of an integral or bool tensor compute in the default float dtype
// (float32), as PyTorch's: sin(arange(3)) is float32.
/// sin(x).   Tensor y = sin(x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
/// asin, acos: NaN outside [-1, 1].
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
/// 1 / sqrt(x).   rsqrt(var + eps)
Tensor rsqrt(const Tensor& x);
/// 1 / x.
Tensor reciprocal(const Tensor& x);
/// log(1 + x), accurate for small x.   log1p(x)
Tensor log1p(const Tensor& x);
/// exp(x) - 1, accurate for small x.
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
/// The error function, 2/sqrt(pi) * integral of exp(-t^2) from 0 to x.
Tensor erf(const Tensor& x);
/// The inverse hyperbolic functions; acosh is NaN below 1, atanh outside [-1, 1] (+-inf at +-1).
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
/// NumPy's names for them (torch.arcsinh, ...).
inline Tensor arcsinh(const Tensor& x) { return asinh(x); }
inline Tensor arccosh(const Tensor& x) { return acosh(x); }
inline Tensor arctanh(const Tensor& x) { return atanh(x); }

// Special functions (scalar formulas in ops/special_functions.h, on Eigen's).
/// 1 - erf(x), without the cancellation for large x.
Tensor erfc(const Tensor& x);
/// The inverse of erf on [-1, 1]: +-inf at +-1, NaN outside.   sqrt(2) * erfinv(2 * p - 1) is the
/// standard normal's quantile.
Tensor erfinv(const Tensor& x);
/// log|gamma(x)|: +inf at 0 and the negative integers.
Tensor lgamma(const Tensor& x);
/// d/dx lgamma(x): -inf at +0 and +inf at -0, NaN at the negative integers, as PyTorch's.
Tensor digamma(const Tensor& x);
/// The n-th derivative of digamma (n >= 0; polygamma(0, x) is digamma).   polygamma(1, x) (trigamma)
Tensor polygamma(int64_t n, const Tensor& x);
/// The log of the multivariate gamma function of dimension p: the sum over i < p of
/// lgamma(x - i / 2) plus p (p - 1) / 4 log(pi). Every element must exceed (p - 1) / 2 (checked on
/// the host: a sync on CUDA).   mvlgamma(x, 2)
Tensor mvlgamma(const Tensor& x, int64_t p);
/// The standard normal's quantile, the inverse of its CDF on [0, 1] (+-inf at the ends).
Tensor ndtri(const Tensor& x);
/// The modified Bessel function of the first kind of order 0 (torch.i0); the other orders and the
/// scaled forms are in namespace special (ops/special.h).
Tensor i0(const Tensor& x);
namespace special {
Tensor i0e(const Tensor& x);
Tensor i1(const Tensor& x);
Tensor i1e(const Tensor& x);
}  // namespace special

// Rounding: an integral tensor comes back unchanged (a copy) and a bool tensor is refused; the
// gradient is zero everywhere, as PyTorch's.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
/// Toward zero.
Tensor trunc(const Tensor& x);
/// To the nearest integer, halves to even: round(2.5) == 2, round(-0.5) == -0.0, round(1.5) == 2.
Tensor round(const Tensor& x);
/// To `decimals` decimal places (negative: to tens, hundreds, ...), halves to even, as
/// torch.round(x, decimals=d).   round(x, 2)
Tensor round(const Tensor& x, int64_t decimals);
/// -1, 0 or 1 in x's dtype (0 for NaN and -0.0); integral x too, bool x unchanged. Zero gradient.
Tensor sign(const Tensor& x);

/// atan2(a, b): the angle of the point (b, a), in (-pi, pi]; operands broadcast and promote as add.
Tensor atan2(const Tensor& a, const Tensor& b);
/// The larger of a and b elementwise, NaN where either is NaN; the gradient goes to the larger, half
/// to each where they are equal, as PyTorch's.   maximum(x, zeros_like(x))
Tensor maximum(const Tensor& a, const Tensor& b);
/// The smaller of a and b, as maximum.
Tensor minimum(const Tensor& a, const Tensor& b);
/// C's fmod: a - trunc(a / b) * b, with a's sign (fmod(-7, 2) == -1, where remainder gives 1);
/// integral operands stay integral and an integral division by zero is an error. The gradient is
/// 1 for a and -trunc(a / b) for b.
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Scalar& b);
/// sqrt(a^2 + b^2) without overflow or underflow; operands broadcast and promote to floating. The
/// gradient is (a, b) / hypot(a, b).
Tensor hypot(const Tensor& a, const Tensor& b);
/// |a| with the sign bit of b (b = -0.0 or a NaN with its sign bit set counts as negative); integral
/// operands give floating. The gradient reaches a only (0 where a == 0), as PyTorch's.
Tensor copysign(const Tensor& a, const Tensor& b);
Tensor copysign(const Tensor& a, const Scalar& b);
/// Bool: where x's sign bit is set, so -0.0 and negative NaN too. Integral x: x < 0.
Tensor signbit(const Tensor& x);
/// The next representable value after a in the direction of b (b itself when equal); floating
/// operands, not differentiable.
Tensor nextafter(const Tensor& a, const Tensor& b);
/// The greatest common divisor and the least common multiple, >= 0, of integral operands
/// (gcd(0, 0) == 0, lcm(x, 0) == 0).
Tensor gcd(const Tensor& a, const Tensor& b);
Tensor lcm(const Tensor& a, const Tensor& b);
/// x * 2^exponent.
Tensor ldexp(const Tensor& x, const Tensor& exponent);
/// (mantissa, exponent): x == mantissa * 2^exponent with 0.5 <= |mantissa| < 1 and an int32 exponent,
/// as C's frexp (0, infinities and NaN come back with exponent 0). Floating x; not differentiable.
std::tuple<Tensor, Tensor> frexp(const Tensor& x);

/// Bool tensors: where x is NaN; +-infinity; neither. Integral and bool x: all false (isfinite: true).
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
/// x with NaN replaced by `nan` (0 by default), +inf by `posinf` and -inf by `neginf` (by default the
/// largest and lowest finite values of x's dtype). The gradient passes where x is finite, 0 elsewhere.
/// Integral x comes back unchanged.   nan_to_num(x, 0.0, 1e4, -1e4)
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt, std::optional<double> neginf = std::nullopt);

// Composed of the ops above (ops/math_composed.cpp): each differentiable where PyTorch's is.

/// log(exp(a) + exp(b)) without overflow: a softmax's normalizer of two terms.   logaddexp(a, b)
Tensor logaddexp(const Tensor& a, const Tensor& b);
/// log2(2^a + 2^b).
Tensor logaddexp2(const Tensor& a, const Tensor& b);
/// x * log(y), 0 where x == 0 (unless y is NaN): entropy terms without 0 * log 0.   xlogy(p, p)
Tensor xlogy(const Tensor& x, const Tensor& y);
/// x * log1p(y), 0 where x == 0 (unless y is NaN), as torch.special.xlog1py.
Tensor xlog1py(const Tensor& x, const Tensor& y);
/// The entropy term -x log(x): 0 at 0, -inf for x < 0, as torch.special.entr.
Tensor entr(const Tensor& x);
/// sin(pi x) / (pi x), 1 at 0.
Tensor sinc(const Tensor& x);
/// The step function: 0 for x < 0, 1 for x > 0, `values` where x == 0. Not differentiable.
Tensor heaviside(const Tensor& x, const Tensor& values);
/// Degrees to radians and back; integer x becomes floating.
Tensor deg2rad(const Tensor& x);
Tensor rad2deg(const Tensor& x);
/// x - trunc(x): the fractional part, with x's sign.
Tensor frac(const Tensor& x);
/// pow computed in float64 (both operands widened), as torch.float_power.
Tensor float_power(const Tensor& a, const Tensor& b);
Tensor float_power(const Tensor& a, const Scalar& exponent);
/// div, by its other name.
Tensor true_divide(const Tensor& a, const Tensor& b);
/// x * x, as torch.square (a bool tensor gives int64).
Tensor square(const Tensor& x);
/// 2^x; integral x becomes floating.
Tensor exp2(const Tensor& x);
/// The larger of a and b where NaN counts as missing: the other one, NaN only where both are, as
/// torch.fmax; the gradient goes to a where a >= b or b is NaN, else to b.   fmax(x, y)
Tensor fmax(const Tensor& a, const Tensor& b);
/// The smaller of a and b, NaN as missing, as fmax.
Tensor fmin(const Tensor& a, const Tensor& b);
/// Bool tensors: where x is +infinity; -infinity.
Tensor isposinf(const Tensor& x);
Tensor isneginf(const Tensor& x);

}  // namespace minidl
