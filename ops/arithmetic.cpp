#include "ops/arithmetic.h"

#include <cmath>
#include <optional>

#include "core/type_promotion.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/logical.h"
#include "ops/math.h"

namespace minidl {

namespace {

// PyTorch's fused kernels for add with an alpha, addcmul, addcdiv and lerp compute a bfloat16 or
// float16 result in float32 and round it once. The compositions below would round every
// intermediate product to 16 bits, so for those dtypes they run on float32 copies (the casts are
// recorded: a gradient takes the same way back). The 16-bit dtype to round to, if the result has one.
std::optional<DType> rounds_once_to(std::initializer_list<Tensor> operands) {
  const DType dtype = result_type(operands);
  if (is_reduced_floating(dtype)) return dtype;
  return std::nullopt;
}
Tensor float32(const Tensor& t) { return t.to(kFloat32); }
bool is_one(const Scalar& s) { return !s.is_boolean() && s.to_double() == 1.0; }

// alpha * b; an integral tensor takes no floating alpha (libtorch refuses it rather than promote).
Tensor scaled(const char* name, const Tensor& b, const Scalar& alpha) {
  if (!alpha.is_floating_point() && alpha.to<int64_t>() == 1) return b;
  MINIDL_CHECK(is_floating(b.dtype()) || !alpha.is_floating_point(), name,
               ": for integral input tensors, argument alpha must not be a floating point number (got ", alpha, ")");
  return mul(b, scalar_operand(alpha, b));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (const auto dtype = rounds_once_to({a, b}); dtype && !is_one(alpha))
    return add(float32(a), float32(b), alpha).to(*dtype);
  return add(a, scaled("add", b, alpha));
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (const auto dtype = rounds_once_to({a, b}); dtype && !is_one(alpha))
    return sub(float32(a), float32(b), alpha).to(*dtype);
  return sub(a, scaled("sub", b, alpha));
}
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
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode) {
  if (!rounding_mode) return div(a, b);
  const bool floors = *rounding_mode == "floor";
  MINIDL_CHECK(floors || *rounding_mode == "trunc",
               "div: expected rounding_mode to be none, \"trunc\" or \"floor\", got \"", std::string(*rounding_mode), "\"");
  if (const auto dtype = rounds_once_to({a, b}); dtype) return div(float32(a), float32(b), rounding_mode).to(*dtype);
  if (floors) return floor_divide(a, b);
  if (is_floating(result_type({a, b}))) return trunc(div(a, b));
  // Integers toward zero: the floor quotient, one up where the division was inexact and the signs differ.
  const Tensor quotient = floor_divide(a, b);
  return where(ne(remainder(a, b), 0) & ne(lt(a, 0), lt(b, 0)), quotient + 1, quotient);
}
Tensor div(const Tensor& a, const Scalar& b, std::optional<std::string_view> rounding_mode) {
  return div(a, scalar_operand(b, a), rounding_mode);
}
Tensor floor_divide(const Tensor& a, const Scalar& b) { return floor_divide(a, scalar_operand(b, a)); }
Tensor remainder(const Tensor& a, const Scalar& b) { return remainder(a, scalar_operand(b, a)); }

Tensor addcmul(const Tensor& input, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  MINIDL_AUTOCAST(addcmul, addcmul, input, t1, t2, value);
  if (const auto dtype = rounds_once_to({input, t1, t2}); dtype)
    return addcmul(float32(input), float32(t1), float32(t2), value).to(*dtype);
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
  if (const auto dtype = rounds_once_to({input, t1, t2}); dtype)
    return addcdiv(float32(input), float32(t1), float32(t2), value).to(*dtype);
  return add(input, div(t1, t2), value);
}

namespace {
void check_lerp(const Tensor& input, const Tensor& end) {
  MINIDL_CHECK(is_floating(input.dtype()), "lerp: expected floating tensors, got ", input.dtype());
  MINIDL_CHECK(input.dtype() == end.dtype(), "lerp: expected input and end of one dtype, got ", input.dtype(),
               " and ", end.dtype());
}
}  // namespace

// From the nearer end, as PyTorch's kernels step: weight 0 gives input and weight 1 gives end
// exactly, where input + 1 * (end - input) need not give end.
Tensor lerp(const Tensor& input, const Tensor& end, const Scalar& weight) {
  check_lerp(input, end);
  if (const auto dtype = rounds_once_to({input, end}); dtype)
    return lerp(float32(input), float32(end), weight).to(*dtype);
  const double w = weight.to_double();
  const Tensor step = sub(end, input);
  return std::fabs(w) < 0.5 ? add(input, step, weight) : sub(end, step, 1.0 - w);
}

Tensor lerp(const Tensor& input, const Tensor& end, const Tensor& weight) {
  check_lerp(input, end);
  MINIDL_CHECK(weight.dtype() == input.dtype(), "lerp: expected a weight of the input's dtype ", input.dtype(),
               ", got ", weight.dtype());
  if (const auto dtype = rounds_once_to({input, end}); dtype)
    return lerp(float32(input), float32(end), float32(weight)).to(*dtype);
  const Tensor step = sub(end, input);
  return where(lt(abs(weight), 0.5), add(input, mul(weight, step)), sub(end, mul(step, 1.0 - weight)));
}

}  // namespace minidl
