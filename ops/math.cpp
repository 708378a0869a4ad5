// Elementwise math: one UnaryOp / BinaryOp kernel forward, and a backward written with the ops
// themselves (so it is differentiable again). Rounding and sign have a zero gradient, as PyTorch's.
#include "ops/math.h"

#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/type_promotion.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/logical.h"
#include "ops/pointwise.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

enum class Saves { Input, Output };
using UnaryGrad = Tensor (*)(const Tensor& grad, const Tensor& saved);

// A transcendental function: integral and bool x computed in float32; the backward reads the input
// or the output, whichever its formula needs.
Tensor transcendental(UnaryOp op, const char* name, const Tensor& x_in, Saves saves, UnaryGrad grad) {
  MINIDL_CHECK(x_in.defined(), name, ": expected a defined tensor");
  Tensor x = pointwise::floating(x_in);
  Tensor out = pointwise::unary(op, x);
  if (autograd::needs_recording({x})) {
    // The input as given and the output detached (autograd::saved_output), so that a create_graph
    // backward differentiates through the formula.
    Tensor saved = saves == Saves::Input ? x : out.detach();
    autograd::record(name, out, {x}, {saved}, [saved, saves, grad](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{grad(g, saves == Saves::Input ? saved : autograd::saved_output(saved))};
    }, true);
  }
  return out;
}

// floor, ceil, trunc, round, sign: integers are already whole (a copy comes back); the gradient is
// zero wherever it exists.
Tensor rounding(UnaryOp op, const char* name, const Tensor& x, double scalar = 0) {
  MINIDL_CHECK(x.defined(), name, ": expected a defined tensor");
  MINIDL_CHECK(x.dtype() != kBool || op == UnaryOp::Sign, name, ": expected a floating or integral tensor, got bool");
  if (x.dtype() == kBool || (!is_floating(x.dtype()) && op != UnaryOp::Sign)) return x.clone();
  Tensor out = pointwise::unary(op, x, scalar);
  if (autograd::needs_recording({x})) {
    autograd::record(name, out, {x}, [](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{zeros_like(g)};
    }, true);
  }
  return out;
}

}  // namespace

Tensor sin(const Tensor& x) {
  return transcendental(UnaryOp::Sin, "sin", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return g * cos(xs); });
}
Tensor cos(const Tensor& x) {
  return transcendental(UnaryOp::Cos, "cos", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return -(g * sin(xs)); });
}
Tensor tan(const Tensor& x) {  // d tan = 1 + tan^2
  return transcendental(UnaryOp::Tan, "tan", x, Saves::Output, [](const Tensor& g, const Tensor& y) { return g * (y * y + 1); });
}
Tensor asin(const Tensor& x) {
  return transcendental(UnaryOp::Asin, "asin", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g * rsqrt(1 - xs * xs); });
}
Tensor acos(const Tensor& x) {
  return transcendental(UnaryOp::Acos, "acos", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return -(g * rsqrt(1 - xs * xs)); });
}
Tensor atan(const Tensor& x) {
  return transcendental(UnaryOp::Atan, "atan", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return g / (xs * xs + 1); });
}
Tensor sinh(const Tensor& x) {
  return transcendental(UnaryOp::Sinh, "sinh", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return g * cosh(xs); });
}
Tensor cosh(const Tensor& x) {
  return transcendental(UnaryOp::Cosh, "cosh", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return g * sinh(xs); });
}
Tensor rsqrt(const Tensor& x) {  // d x^-1/2 = -1/2 y^3
  return transcendental(UnaryOp::Rsqrt, "rsqrt", x, Saves::Output,
                        [](const Tensor& g, const Tensor& y) { return g * (y * y * y) * -0.5; });
}
Tensor reciprocal(const Tensor& x) {  // d 1/x = -y^2
  return transcendental(UnaryOp::Reciprocal, "reciprocal", x, Saves::Output,
                        [](const Tensor& g, const Tensor& y) { return -(g * (y * y)); });
}
Tensor log1p(const Tensor& x) {
  return transcendental(UnaryOp::Log1p, "log1p", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return g / (xs + 1); });
}
Tensor expm1(const Tensor& x) {
  return transcendental(UnaryOp::Expm1, "expm1", x, Saves::Output, [](const Tensor& g, const Tensor& y) { return g * (y + 1); });
}
Tensor log2(const Tensor& x) {
  return transcendental(UnaryOp::Log2, "log2", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g / (xs * M_LN2); });
}
Tensor log10(const Tensor& x) {
  return transcendental(UnaryOp::Log10, "log10", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g / (xs * M_LN10); });
}
Tensor erf(const Tensor& x) {  // d erf = 2/sqrt(pi) exp(-x^2)
  return transcendental(UnaryOp::Erf, "erf", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g * exp(-(xs * xs)) * M_2_SQRTPI; });
}

Tensor asinh(const Tensor& x) {
  return transcendental(UnaryOp::Asinh, "asinh", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g * rsqrt(xs * xs + 1); });
}
Tensor acosh(const Tensor& x) {
  return transcendental(UnaryOp::Acosh, "acosh", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g * rsqrt(xs * xs - 1); });
}
Tensor atanh(const Tensor& x) {
  return transcendental(UnaryOp::Atanh, "atanh", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return g / (1 - xs * xs); });
}

Tensor erfc(const Tensor& x) {  // d erfc = -2/sqrt(pi) exp(-x^2)
  return transcendental(UnaryOp::Erfc, "erfc", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g * exp(-(xs * xs)) * -M_2_SQRTPI; });
}
Tensor erfinv(const Tensor& x) {  // d erfinv = sqrt(pi)/2 exp(y^2)
  return transcendental(UnaryOp::Erfinv, "erfinv", x, Saves::Output,
                        [](const Tensor& g, const Tensor& y) { return g * exp(y * y) * (0.5 * std::sqrt(M_PI)); });
}
Tensor lgamma(const Tensor& x) {
  return transcendental(UnaryOp::Lgamma, "lgamma", x, Saves::Input, [](const Tensor& g, const Tensor& xs) { return g * digamma(xs); });
}
Tensor digamma(const Tensor& x) {
  return transcendental(UnaryOp::Digamma, "digamma", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g * polygamma(1, xs); });
}

Tensor polygamma(int64_t n, const Tensor& x_in) {
  MINIDL_CHECK(x_in.defined(), "polygamma: expected a defined tensor");
  MINIDL_CHECK(n >= 0, "polygamma: expected an order n >= 0, got ", n);
  if (n == 0) return digamma(x_in);
  Tensor x = pointwise::floating(x_in);
  Tensor out = pointwise::unary(UnaryOp::Polygamma, x, static_cast<double>(n));
  if (autograd::needs_recording({x})) {
    autograd::record("polygamma", out, {x}, {x}, [x, n](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{g * polygamma(n + 1, x)};
    }, true);
  }
  return out;
}

Tensor mvlgamma(const Tensor& x_in, int64_t p) {
  MINIDL_CHECK(x_in.defined(), "mvlgamma: expected a defined tensor");
  MINIDL_CHECK(p >= 1, "mvlgamma: expected p >= 1, got ", p);
  Tensor x = pointwise::floating(x_in);
  const double bound = 0.5 * static_cast<double>(p - 1);
  if (x.numel() > 0) {
    const double smallest = amin(x.detach()).item<double>();  // a sync on CUDA, as PyTorch's check
    MINIDL_CHECK(smallest > bound, "mvlgamma: expected every element > (p - 1) / 2 = ", bound, ", got ", smallest);
  }
  // sum over i < p of lgamma(x - i / 2), plus p (p - 1) / 4 log(pi)
  const Tensor halves = arange(-bound, 0.25, 0.5, TensorOptions().dtype(x.dtype()).device(x.device()));
  return sum(lgamma(unsqueeze(x, -1) + halves), {-1}) + static_cast<double>(p * (p - 1)) / 4 * std::log(M_PI);
}

Tensor ndtri(const Tensor& x) {  // d ndtri = sqrt(2 pi) exp(y^2 / 2)
  return transcendental(UnaryOp::Ndtri, "ndtri", x, Saves::Output,
                        [](const Tensor& g, const Tensor& y) { return g * exp(y * y * 0.5) * std::sqrt(2 * M_PI); });
}

// The modified Bessel functions of the first kind: i0' = i1, i1' = i0 - i1 / x (1/2 at 0), and the
// scaled ones (times exp(-|x|)) lose sign(x) times themselves.
Tensor i0(const Tensor& x) {
  return transcendental(UnaryOp::I0, "i0", x, Saves::Input,
                        [](const Tensor& g, const Tensor& xs) { return g * special::i1(xs); });
}

namespace special {

Tensor i0e(const Tensor& x) {
  return transcendental(UnaryOp::I0e, "i0e", x, Saves::Input, [](const Tensor& g, const Tensor& xs) {
    return g * (i1e(xs) - sign(xs) * i0e(xs));
  });
}
Tensor i1(const Tensor& x) {
  return transcendental(UnaryOp::I1, "i1", x, Saves::Input, [](const Tensor& g, const Tensor& xs) {
    return g * where(eq(xs, 0), 0.5, i0(xs) - i1(xs) / xs);
  });
}
Tensor i1e(const Tensor& x) {
  return transcendental(UnaryOp::I1e, "i1e", x, Saves::Input, [](const Tensor& g, const Tensor& xs) {
    return g * where(eq(xs, 0), 0.5, i0e(xs) - i1e(xs) * (sign(xs) + reciprocal(xs)));
  });
}

}  // namespace special

Tensor floor(const Tensor& x) { return rounding(UnaryOp::Floor, "floor", x); }
Tensor ceil(const Tensor& x) { return rounding(UnaryOp::Ceil, "ceil", x); }
Tensor trunc(const Tensor& x) { return rounding(UnaryOp::Trunc, "trunc", x); }
Tensor round(const Tensor& x) { return rounding(UnaryOp::Round, "round", x); }
Tensor round(const Tensor& x, int64_t decimals) {
  return rounding(UnaryOp::Round, "round", x, static_cast<double>(decimals));
}
Tensor sign(const Tensor& x) { return rounding(UnaryOp::Sign, "sign", x); }

Tensor atan2(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = pointwise::promoted("atan2", a_in, b_in, /*to_float=*/true);
  Tensor out = pointwise::binary(BinaryOp::Atan2, "atan2", a, b);
  if (autograd::needs_recording({a, b})) {
    Tensor sa = a, sb = b;
    autograd::record("atan2", out, {a, b}, {sa, sb}, [sa, sb](const Tensor& g, const std::vector<bool>& needs) {
      Tensor scaled = g / (sa * sa + sb * sb);  // d atan2(a, b) = (b da - a db) / (a^2 + b^2)
      return std::vector<Tensor>{needs[0] ? sum_to_shape(scaled * sb, sa.shape()) : Tensor(),
                                 needs[1] ? sum_to_shape(-(scaled * sa), sb.shape()) : Tensor()};
    }, true);
  }
  return out;
}

namespace {

// maximum (is_max) or minimum: the winner takes the gradient, ties split it in halves, and where a
// NaN decides both get it, as PyTorch's.
Tensor extremum(bool is_max, const Tensor& a_in, const Tensor& b_in) {
  const char* name = is_max ? "maximum" : "minimum";
  auto [a, b] = pointwise::promoted(name, a_in, b_in);
  if (a.dtype() == kBool) return is_max ? logical_or(a, b) : logical_and(a, b);
  Tensor out = pointwise::binary(is_max ? BinaryOp::Maximum : BinaryOp::Minimum, name, a, b);
  if (autograd::needs_recording({a, b})) {
    Tensor sa = a, sb = b;
    autograd::record(name, out, {a, b}, {sa, sb}, [sa, sb, is_max](const Tensor& g, const std::vector<bool>& needs) {
      Tensor shared = where(eq(sa, sb), g * 0.5, g);
      Tensor ga, gb;
      if (needs[0]) ga = sum_to_shape(masked_fill(shared, is_max ? lt(sa, sb) : gt(sa, sb), 0.0), sa.shape());
      if (needs[1]) gb = sum_to_shape(masked_fill(shared, is_max ? gt(sa, sb) : lt(sa, sb), 0.0), sb.shape());
      return std::vector<Tensor>{ga, gb};
    }, true);
  }
  return out;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(true, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(false, a, b); }

Tensor fmod(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = pointwise::promoted("fmod", a_in, b_in);
  MINIDL_CHECK(a.dtype() != kBool, "fmod: expected floating or integral tensors, got bool");
  pointwise::check_integral_divisor("fmod", b);
  Tensor out = pointwise::binary(BinaryOp::Fmod, "fmod", a, b);
  if (autograd::needs_recording({a, b})) {
    Tensor sa = a, sb = b;
    autograd::record("fmod", out, {a, b}, {sa, sb}, [sa, sb](const Tensor& g, const std::vector<bool>& needs) {
      Tensor ga, gb;  // fmod(a, b) = a - trunc(a / b) * b
      if (needs[0]) ga = sum_to_shape(g, sa.shape());
      if (needs[1]) gb = sum_to_shape(-(g * trunc(sa / sb)), sb.shape());
      return std::vector<Tensor>{ga, gb};
    }, true);
  }
  return out;
}

Tensor fmod(const Tensor& a, const Scalar& b) { return fmod(a, scalar_operand(b, a)); }

Tensor hypot(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = pointwise::promoted("hypot", a_in, b_in, /*to_float=*/true);
  Tensor out = pointwise::binary(BinaryOp::Hypot, "hypot", a, b);
  if (autograd::needs_recording({a, b})) {
    const Tensor so = out.detach();
    autograd::record("hypot", out, {a, b}, {a, b, so}, [sa = a, sb = b, so](const Tensor& g,
                                                                         const std::vector<bool>& needs) {
      const Tensor scaled = g / autograd::saved_output(so);  // d hypot(a, b) = (a da + b db) / hypot(a, b)
      return std::vector<Tensor>{needs[0] ? sum_to_shape(scaled * sa, sa.shape()) : Tensor(),
                                 needs[1] ? sum_to_shape(scaled * sb, sb.shape()) : Tensor()};
    }, true);
  }
  return out;
}

Tensor copysign(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = pointwise::promoted("copysign", a_in, b_in, /*to_float=*/true);
  Tensor out = pointwise::binary(BinaryOp::Copysign, "copysign", a, b);
  if (autograd::needs_recording({a, b})) {
    // d/da = out / a (the sign it was given), 0 where a is 0, as PyTorch's; b only lends its sign.
    const Tensor so = out.detach();
    autograd::record("copysign", out, {a, b}, {a, so}, [sa = a, sb = b, so](const Tensor& g,
                                                                          const std::vector<bool>& needs) {
      Tensor ga, gb;
      if (needs[0]) ga = sum_to_shape(g * where(eq(sa, 0), 0.0, autograd::saved_output(so) / sa), sa.shape());
      if (needs[1]) gb = zeros_like(sb);
      return std::vector<Tensor>{ga, gb};
    }, true);
  }
  return out;
}

Tensor copysign(const Tensor& a, const Scalar& b) { return copysign(a, scalar_operand(b, a)); }

Tensor nextafter(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = pointwise::promoted("nextafter", a_in, b_in);
  MINIDL_CHECK(is_floating(a.dtype()), "nextafter: expected floating tensors, got ", a.dtype());
  NoGradGuard no_grad;  // a step of one ulp: not differentiable, as PyTorch's
  return pointwise::binary(BinaryOp::Nextafter, "nextafter", a, b);
}

Tensor gcd(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = pointwise::promoted("gcd", a_in, b_in);
  MINIDL_CHECK(!is_floating(a.dtype()) && a.dtype() != kBool, "gcd: expected integral tensors, got ", a.dtype());
  return pointwise::binary(BinaryOp::Gcd, "gcd", a, b);
}

Tensor lcm(const Tensor& a, const Tensor& b) {
  const Tensor divisor = gcd(a, b);
  // |a / gcd * b|, 0 where the gcd is (a == b == 0); dividing first keeps the product in range.
  return abs(floor_divide(a, where(eq(divisor, 0), 1, divisor)) * b);
}

Tensor ldexp(const Tensor& x, const Tensor& exponent) {
  const DType dtype = result_type({x, exponent});
  const DType out = is_floating(dtype) ? dtype : kFloat32;  // 2^e in the result's dtype: float64 reaches 2^1023
  return x.to(out) * exp2(exponent.to(out));
}

std::tuple<Tensor, Tensor> frexp(const Tensor& x) {
  MINIDL_CHECK(x.defined() && is_floating(x.dtype()), "frexp: expected a floating tensor, got ",
               x.defined() ? dtype_name(x.dtype()) : "an undefined tensor");
  NoGradGuard no_grad;
  // In float64 the exponent of every float32 and 16-bit value is floor(log2|x|) + 1 exactly; a float64
  // x near a power of two may land one off, which the two corrections below take back. The scaling is
  // by powers of two in two halves, so it is exact and never overflows.
  const Tensor wide = x.to(kFloat64);
  const Tensor finite = logical_and(isfinite(wide), ne(wide, 0));
  Tensor e = where(finite, floor(log2(abs(wide))) + 1, 0.0);
  auto scaled = [&](const Tensor& by) {
    const Tensor half = trunc(by / 2);
    return wide * exp2(-half) * exp2(half - by);
  };
  Tensor m = scaled(e);
  e = where(logical_and(ge(abs(m), 1), finite), e + 1, where(logical_and(lt(abs(m), 0.5), finite), e - 1, e));
  m = where(finite, scaled(e), wide);
  return {m.to(x.dtype()), e.to(kInt32)};
}

Tensor signbit(const Tensor& x) {
  MINIDL_CHECK(x.defined(), "signbit: expected a defined tensor");
  NoGradGuard no_grad;
  if (x.dtype() == kBool) return zeros(x.shape(), kBool, x.device());
  if (!is_floating(x.dtype())) return lt(x, 0);
  return lt(copysign(ones_like(x), x), 0);  // -0 and a NaN with its sign bit set count
}

Tensor isnan(const Tensor& x) {
  MINIDL_CHECK(x.defined(), "isnan: expected a defined tensor");
  if (!is_floating(x.dtype())) return zeros(x.shape(), kBool, x.device());
  return ne(x, x);  // NaN alone differs from itself
}

Tensor isinf(const Tensor& x) {
  MINIDL_CHECK(x.defined(), "isinf: expected a defined tensor");
  if (!is_floating(x.dtype())) return zeros(x.shape(), kBool, x.device());
  const double inf = std::numeric_limits<double>::infinity();
  return logical_or(eq(x, inf), eq(x, -inf));
}

Tensor isfinite(const Tensor& x) {
  MINIDL_CHECK(x.defined(), "isfinite: expected a defined tensor");
  if (!is_floating(x.dtype())) return ones(x.shape(), kBool, x.device());
  NoGradGuard no_grad;
  return eq(sub(x, x), 0);  // x - x is 0 for finite x and NaN for infinities and NaN
}

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  MINIDL_CHECK(x.defined(), "nan_to_num: expected a defined tensor");
  if (!is_floating(x.dtype())) return x.clone();
  const double largest = dispatch_floating_and_half(x.dtype(), "nan_to_num", [](auto tag) {
    return static_cast<double>(std::numeric_limits<decltype(tag)>::max());  // the dtype's own largest
  });
  const double inf = std::numeric_limits<double>::infinity();
  Tensor out = where(eq(x, inf), Scalar(posinf.value_or(largest)), x);
  out = where(eq(x, -inf), Scalar(neginf.value_or(-largest)), out);
  return where(ne(x, x), Scalar(nan.value_or(0.0)), out);
}

}  // namespace minidl
