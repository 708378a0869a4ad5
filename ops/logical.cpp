// Logical ops on the comparison and selection kernels (a bool tensor is its own truth value), and
// bitwise ops on the BinaryOp kernels for integers.
#include "ops/logical.h"

#include "core/type_promotion.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/pointwise.h"

namespace minidl {

namespace {

// x as a bool tensor: x != 0 (NaN is true), or x itself when bool.
Tensor truth(const Tensor& x) { return x.dtype() == kBool ? x : ne(x, 0); }

void check_operands(const char* name, const Tensor& a, const Tensor& b) {
  MINIDL_CHECK(a.defined() && b.defined(), name, ": expected two defined tensors");
  check_same_device(name, {a, b});
}

}  // namespace

Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_operands("logical_and", a, b);
  return where(truth(a), truth(b), Scalar(false));
}

Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_operands("logical_or", a, b);
  return where(truth(a), Scalar(true), truth(b));
}

Tensor logical_xor(const Tensor& a, const Tensor& b) {
  check_operands("logical_xor", a, b);
  return ne(truth(a), truth(b));
}

Tensor logical_not(const Tensor& x) {
  MINIDL_CHECK(x.defined(), "logical_not: expected a defined tensor");
  return x.dtype() == kBool ? eq(x, Scalar(false)) : eq(x, 0);
}

namespace {

Tensor bitwise(BinaryOp op, const char* name, const Tensor& a_in, const Tensor& b_in) {
  check_operands(name, a_in, b_in);
  const DType dtype = result_type({a_in, b_in});
  MINIDL_CHECK(!is_floating(dtype), name, ": expected integral or bool tensors, got ", a_in.dtype(), " and ",
               b_in.dtype(), " (use logical_and / logical_or / logical_xor for other dtypes)");
  if (dtype == kBool) {
    if (op == BinaryOp::BitwiseAnd) return logical_and(a_in, b_in);
    if (op == BinaryOp::BitwiseOr) return logical_or(a_in, b_in);
    return logical_xor(a_in, b_in);
  }
  return pointwise::binary(op, name, a_in.to(dtype), b_in.to(dtype));
}

// A scalar operand in the dtype PyTorch promotes the pair to (x & 1 on int64 stays int64; x & true
// on bool stays bool).
Tensor operand(const Scalar& value, const Tensor& other) {
  MINIDL_CHECK(!value.is_floating_point(), "bitwise ops: expected an integral or bool scalar, got ", value);
  return scalar_operand(value, other);
}

}  // namespace

Tensor bitwise_and(const Tensor& a, const Tensor& b) { return bitwise(BinaryOp::BitwiseAnd, "bitwise_and", a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return bitwise(BinaryOp::BitwiseOr, "bitwise_or", a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return bitwise(BinaryOp::BitwiseXor, "bitwise_xor", a, b); }
Tensor bitwise_and(const Tensor& a, const Scalar& b) { return bitwise_and(a, operand(b, a)); }
Tensor bitwise_or(const Tensor& a, const Scalar& b) { return bitwise_or(a, operand(b, a)); }
Tensor bitwise_xor(const Tensor& a, const Scalar& b) { return bitwise_xor(a, operand(b, a)); }

Tensor bitwise_not(const Tensor& x) {
  MINIDL_CHECK(x.defined(), "bitwise_not: expected a defined tensor");
  MINIDL_CHECK(!is_floating(x.dtype()), "bitwise_not: expected an integral or bool tensor, got ", x.dtype(),
               " (use logical_not for other dtypes)");
  if (x.dtype() == kBool) return logical_not(x);
  return pointwise::unary(UnaryOp::BitwiseNot, x);
}

}  // namespace minidl
