// The math functions made of other ops (declared in ops/math.h): their gradients come from the
// parts. Where a part would divide by zero in a branch that `where` discards, that branch gets a
// harmless stand-in input, so the discarded branch's gradient is 0 rather than NaN.
#include <limits>
#include <numbers>

#include "core/type_promotion.h"
#include "ops/activation.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/logical.h"
#include "ops/math.h"

namespace minidl {

namespace {

void check_floating(const Tensor& x, const char* op) {
  MINIDL_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got ", x.dtype());
}

}  // namespace

Tensor logaddexp(const Tensor& a, const Tensor& b) {
  const DType dtype = result_type({a, b});
  MINIDL_CHECK(is_floating(dtype), "logaddexp: expected floating tensors, got ", a.dtype(), " and ", b.dtype());
  const Tensor x = a.to(dtype), y = b.to(dtype);
  // max + log(1 + exp(-|x - y|)): the exponent is never positive, and an infinite gap gives 0. Equal
  // infinities would make x - y NaN: they are their own result. At x == y maximum's gradient is
  // half to each, the exact derivative there.
  const Tensor same_infinity = logical_and(isinf(x), eq(x, y));
  const Tensor gap = abs(where(same_infinity, zeros_like(x), x - y));
  return where(same_infinity, x, maximum(x, y) + softplus(-gap));
}

Tensor logaddexp2(const Tensor& a, const Tensor& b) {
  const double ln2 = std::numbers::ln2;
  return logaddexp(a * ln2, b * ln2) / ln2;
}

Tensor xlogy(const Tensor& x, const Tensor& y) {
  const DType dtype = result_type({x, y});
  const DType out = is_floating(dtype) ? dtype : kFloat32;
  const Tensor a = x.to(out), b = y.to(out);
  const Tensor zero_x = eq(a, 0.0);
  const Tensor safe_y = where(zero_x, ones_like(b), b);
  // A NaN y stays NaN even where x is 0, as in PyTorch.
  return where(isnan(b), b, a * log(safe_y));
}

Tensor xlog1py(const Tensor& x, const Tensor& y) {
  const DType dtype = result_type({x, y});
  const DType out = is_floating(dtype) ? dtype : kFloat32;
  const Tensor a = x.to(out), b = y.to(out);
  const Tensor safe_y = where(eq(a, 0.0), zeros_like(b), b);
  return where(isnan(b), b, a * log1p(safe_y));
}

Tensor entr(const Tensor& x_in) {
  const Tensor x = x_in.is_floating_point() ? x_in : x_in.to(kFloat32);
  const Tensor positive = gt(x, 0.0);
  const Tensor safe = where(positive, x, ones_like(x));  // log is taken only where x > 0
  const Tensor negative_part = where(lt(x, 0.0), Scalar(-std::numeric_limits<double>::infinity()), zeros_like(x));
  return where(positive, -(safe * log(safe)), where(isnan(x), x, negative_part));
}

Tensor sinc(const Tensor& x) {
  check_floating(x, "sinc");
  // 16-bit x is computed in float32 and rounded once: between 16-bit kernels the gradient's
  // cos(pi x) / x - sin(pi x) / (pi x^2) loses most of its bits to cancellation.
  if (x.dtype() == kBFloat16 || x.dtype() == kFloat16) return sinc(x.to(kFloat32)).to(x.dtype());
  const Tensor zero = eq(x, 0.0);
  const Tensor px = where(zero, ones_like(x), x) * std::numbers::pi;
  return where(zero, ones_like(x), sin(px) / px);
}

Tensor heaviside(const Tensor& x, const Tensor& values) {
  MINIDL_CHECK(x.dtype() == values.dtype(), "heaviside: expected x and values of one dtype, got ", x.dtype(), " and ",
               values.dtype());
  const Tensor step = gt(x, 0.0).to(x.dtype());
  return where(eq(x, 0.0), values.detach(), step).detach();
}

Tensor deg2rad(const Tensor& x) {
  const Tensor f = is_floating(x.dtype()) ? x : x.to(kFloat32);
  return f * (std::numbers::pi / 180);
}

Tensor rad2deg(const Tensor& x) {
  const Tensor f = is_floating(x.dtype()) ? x : x.to(kFloat32);
  return f * (180 / std::numbers::pi);
}

Tensor frac(const Tensor& x) {
  check_floating(x, "frac");
  return x - trunc(x);
}

Tensor float_power(const Tensor& a, const Tensor& b) { return pow(a.to(kFloat64), b.to(kFloat64)); }

Tensor float_power(const Tensor& a, const Scalar& exponent) { return pow(a.to(kFloat64), exponent); }

Tensor true_divide(const Tensor& a, const Tensor& b) { return div(a, b); }

Tensor square(const Tensor& x) {
  const Tensor v = x.dtype() == kBool ? x.to(kInt64) : x;
  return v * v;
}

Tensor exp2(const Tensor& x) { return pow(scalar_operand(2.0, x), x); }

Tensor fmax(const Tensor& a, const Tensor& b) { return where(logical_or(ge(a, b), isnan(b)), a, b); }

Tensor fmin(const Tensor& a, const Tensor& b) { return where(logical_or(le(a, b), isnan(b)), a, b); }

Tensor isposinf(const Tensor& x) { return logical_and(isinf(x), gt(x, 0.0)); }

Tensor isneginf(const Tensor& x) { return logical_and(isinf(x), lt(x, 0.0)); }

}  // namespace minidl
