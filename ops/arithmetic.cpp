#include "ops/arithmetic.h"

#include "ops/autocast_policy.h"
#include "ops/elementwise.h"

namespace minidl {

namespace {

// alpha * b; an integral tensor takes no floating alpha (libtorch refuses it rather than promote).
Tensor scaled(const char* name, const Tensor& b, const Scalar& alpha) {
  if (!alpha.is_floating_point() && alpha.to<int64_t>() == 1) return b;
  MINIDL_CHECK(is_floating(b.dtype()) || !alpha.is_floating_point(), name,
               ": for integral input tensors, argument alpha must not be a floating point number (got ", alpha, ")");
  return mul(b, scalar_operand(alpha, b));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return add(a, scaled("add", b, alpha)); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return sub(a, scaled("sub", b, alpha)); }
// alpha * b as one number, so that it still promotes as a C++ scalar would.
static Scalar scaled(const char* name, const Tensor& a, const Scalar& b, const Scalar& alpha) {
  MINIDL_CHECK(is_floating(a.dtype()) || !alpha.is_floating_point(), name,
               ": for integral input tensors, argument alpha must not be a floating point number (got ", alpha, ")");
  if (b.is_floating_point() || alpha.is_floating_point()) return b.to_double() * alpha.to_double();
  if (b.is_boolean() && alpha.to<int64_t>() == 1) return b;
  return b.to<int64_t>() * alpha.to<int64_t>();
}

Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return add(a, scalar_operand(scaled("add", a, b, alpha), a));
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return sub(a, scalar_operand(scaled("sub", a, b, alpha), a));
}
Tensor mul(const Tensor& a, const Scalar& b) { return mul(a, scalar_operand(b, a)); }
Tensor div(const Tensor& a, const Scalar& b) { return div(a, scalar_operand(b, a)); }
Tensor floor_divide(const Tensor& a, const Scalar& b) { return floor_divide(a, scalar_operand(b, a)); }
Tensor remainder(const Tensor& a, const Scalar& b) { return remainder(a, scalar_operand(b, a)); }

Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  MINIDL_AUTOCAST(addcmul, addcmul, input, t1, t2, value);
  const Tensor product = mul(t1, t2);
  MINIDL_CHECK(is_floating(product.dtype()) || !value.is_floating_point(),
               "addcmul: for integral tensors, value must not be a floating point number (got ", value, ")");
  return add(input, product, value);
}

Tensor addcdiv(const Tensor& input, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  MINIDL_AUTOCAST(addcdiv, addcdiv, input, t1, t2, value);
  MINIDL_CHECK(is_floating(t1.dtype()) || is_floating(t2.dtype()),
               "addcdiv: integer division of tensors is not supported (", t1.dtype(), " / ", t2.dtype(),
               "); convert them to a floating dtype first");
  return add(input, div(t1, t2), value);
}

namespace {
void check_lerp(const Tensor& input, const Tensor& end) {
  MINIDL_CHECK(is_floating(input.dtype()), "lerp: expected floating tensors, got ", input.dtype());
  MINIDL_CHECK(input.dtype() == end.dtype(), "lerp: expected input and end of one dtype, got ", input.dtype(),
               " and ", end.dtype());
}
}  // namespace

Tensor lerp(const Tensor& input, const Tensor& end, const Scalar& weight) {
  check_lerp(input, end);
  return add(input, sub(end, input), weight);
}

Tensor lerp(const Tensor& input, const Tensor& end, const Tensor& weight) {
  check_lerp(input, end);
  return add(input, mul(weight, sub(end, input)));
}

}  // namespace minidl
