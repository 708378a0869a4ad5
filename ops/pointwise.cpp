#include "ops/pointwise.h"

#include "core/autograd.h"
#include "core/shape.h"
#include "core/type_promotion.h"
#include "ops/compare.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl::pointwise {

Tensor unary(UnaryOp op, const Tensor& x, double scalar) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels_for(x.device()).unary(op, x, out, scalar);
  return out;
}

Tensor binary(BinaryOp op, const char* name, const Tensor& a, const Tensor& b, double scalar) {
  check_same_device(name, {a, b});
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  NoGradGuard no_grad;  // the expanded views are plumbing, not graph nodes
  kernels_for(a.device()).binary(op, expand(a, shape), expand(b, shape), out, scalar);
  return out;
}

Tensor floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(kDefaultFloat); }

std::pair<Tensor, Tensor> promoted(const char* name, const Tensor& a, const Tensor& b, bool to_float) {
  MINIDL_CHECK(a.defined() && b.defined(), name, ": expected two defined tensors");
  check_same_device(name, {a, b});
  DType dtype = result_type({a, b});
  if (to_float && !is_floating(dtype)) dtype = kDefaultFloat;
  return {a.to(dtype), b.to(dtype)};
}

void check_integral_divisor(const char* name, const Tensor& b) {
  if (is_floating(b.dtype())) return;
  NoGradGuard no_grad;
  MINIDL_CHECK(eq(b, 0).sum().item<int64_t>() == 0, name, ": integer division by zero (the ", b.dtype(),
               " divisor of shape ", b.shape(), " holds a 0)");
}

}  // namespace minidl::pointwise
