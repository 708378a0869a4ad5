// Comparisons, where, masked_fill and clamp. Shapes: every operand broadcasts NumPy-style to the
// output's shape (masked_fill keeps x's shape). Comparisons write bool and record nothing: they
// have no gradient. where's backward routes g by the saved condition: where(cond, g, 0) to a and
// where(cond, 0, g) to b, each summed back over its broadcast axes. masked_fill and clamp are
// compositions of where and the comparisons (their gradients are exactly where's routing), so they
// need no kernels of their own.
#include "ops/compare.h"

#include "core/autograd.h"
#include "core/type_promotion.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

Tensor compare_tensors(CompareOp op, const char* name, const Tensor& a_in, const Tensor& b_in) {
  check_same_device(name, {a_in, b_in});
  NoGradGuard no_grad;  // comparisons have no gradient; expand() views and casts are plumbing here
  const DType dtype = result_type({a_in, b_in});
  Tensor a = a_in.to(dtype), b = b_in.to(dtype);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, kBool, a.device());
  kernels_for(a.device()).compare(op, expand(a, shape), expand(b, shape), out);
  return out;
}

Tensor compare_scalar(CompareOp op, const char* name, const Tensor& a, const Scalar& b) {
  return compare_tensors(op, name, a, scalar_tensor(b, result_type(a, b), a.device()));
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare_tensors(CompareOp::Eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_tensors(CompareOp::Ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_tensors(CompareOp::Lt, "lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_tensors(CompareOp::Le, "le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_tensors(CompareOp::Gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_tensors(CompareOp::Ge, "ge", a, b); }
Tensor eq(const Tensor& a, const Scalar& b) { return compare_scalar(CompareOp::Eq, "eq", a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return compare_scalar(CompareOp::Ne, "ne", a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return compare_scalar(CompareOp::Lt, "lt", a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return compare_scalar(CompareOp::Le, "le", a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return compare_scalar(CompareOp::Gt, "gt", a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return compare_scalar(CompareOp::Ge, "ge", a, b); }

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  check_same_device("where", {cond, a_in, b_in});
  MINIDL_CHECK(cond.dtype() == kBool, "where: expected a bool condition, got ", cond.dtype(),
               " (make one with a comparison, e.g. x > 0)");
  const DType dtype = result_type({a_in, b_in});
  Tensor a = a_in.to(dtype), b = b_in.to(dtype);  // recorded casts: each gradient returns in its own dtype
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = Tensor::empty(shape, dtype, a.device());
  {
    NoGradGuard no_grad;
    kernels_for(a.device()).where(expand(cond, shape), expand(a, shape), expand(b, shape), out);
  }
  if (autograd::needs_recording({a, b})) {
    Tensor c = cond.detach();
    autograd::record("where", out, {a, b}, {c}, [c, sa = a.shape(), sb = b.shape()](
                                               const Tensor& g, const std::vector<bool>& needs) {
      Tensor zero = zeros({}, g.dtype(), g.device());
      return std::vector<Tensor>{needs[0] ? sum_to_shape(where(c, g, zero), sa) : Tensor(),
                                 needs[1] ? sum_to_shape(where(c, zero, g), sb) : Tensor()};
    }, true);
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return where(cond, a, scalar_tensor(b, result_type(a, b), a.device()));
}

Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  return where(cond, scalar_tensor(a, result_type(b, a), b.device()), b);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  MINIDL_CHECK(mask.dtype() == kBool, "masked_fill: expected a bool mask, got ", mask.dtype());
  MINIDL_CHECK(value.dim() == 0, "masked_fill: expected a 0-d value tensor, got shape ", value.shape());
  MINIDL_CHECK(broadcasts_to(mask.shape(), x.shape()), "masked_fill: a mask of shape ", mask.shape(),
               " does not broadcast to x's shape ", x.shape());
  return where(mask, value.to(x.dtype()), x);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return masked_fill(x, mask, full({}, value, x.dtype(), x.device()));
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  MINIDL_CHECK(min.has_value() || max.has_value(), "clamp: at least one of min and max must be given");
  MINIDL_CHECK(x.dtype() != kBool, "clamp: expected a floating or integral tensor, got bool");
  DType dtype = x.dtype();
  if (min) dtype = promote_types(dtype, result_type(x, *min));
  if (max) dtype = promote_types(dtype, result_type(x, *max));
  // Strict comparisons keep x at the bounds themselves, so the gradient there is 1, as PyTorch's.
  Tensor y = x.to(dtype);
  if (min) y = where(lt(y, *min), *min, y);
  if (max) y = where(gt(y, *max), *max, y);
  return y;
}

namespace {

// Elementwise or / and of bool tensors, by where (no logical kernels needed).
Tensor either(const Tensor& a, const Tensor& b) { return where(a, a, b); }
Tensor both(const Tensor& a, const Tensor& b) { return where(a, b, a); }

}  // namespace

// PyTorch's formula: close where a == b (which covers equal infinities), or where the error is
// finite and within atol + |rtol * b|; integers compare in float32.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  MINIDL_CHECK(a.dtype() == b.dtype(), "isclose: expected both tensors to have the same dtype, got ", a.dtype(),
               " and ", b.dtype());
  MINIDL_CHECK(rtol >= 0, "isclose: rtol must be greater than or equal to zero, got ", rtol);
  MINIDL_CHECK(atol >= 0, "isclose: atol must be greater than or equal to zero, got ", atol);
  NoGradGuard no_grad;
  Tensor close = eq(a, b);
  if (a.dtype() == kBool) return close;
  if (equal_nan && is_floating(a.dtype())) close = either(close, both(ne(a, a), ne(b, b)));
  if (rtol == 0 && atol == 0) return close;
  Tensor fa = is_floating(a.dtype()) ? a : a.to(kFloat32), fb = is_floating(b.dtype()) ? b : b.to(kFloat32);
  Tensor allowed = abs(fb * rtol) + atol;
  Tensor actual = abs(fa - fb);
  Tensor finite = eq(actual - actual, 0);  // inf - inf and NaN - NaN are NaN
  return either(close, both(finite, le(actual, allowed)));
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}

bool equal(const Tensor& a, const Tensor& b) {
  check_same_device("equal", {a, b});
  if (a.shape() != b.shape()) return false;
  NoGradGuard no_grad;
  return all(eq(a, b)).item<bool>();
}

}  // namespace minidl
