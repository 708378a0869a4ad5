#include "ops/inplace.h"

#include "core/autograd.h"
#include "core/type_promotion.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"

namespace minidl {

void check_inplace_allowed(const char* name, const Tensor& x) {
  if (!grad_mode_enabled() || !x.requires_grad()) return;
  MINIDL_CHECK(!x.is_leaf(), name, ": a leaf Variable that requires grad is being used in an in-place operation; "
                                   "do it under NoGradGuard (as torch.no_grad()), or use the out-of-place op");
  MINIDL_FAIL(name, ": an in-place change of a tensor that requires grad is not recorded by autograd; use the "
                    "out-of-place op (x = x + y), or NoGradGuard");
}

namespace {

// x = op(x): the checks, then the out-of-place op's result written into x (a second pass, which
// keeps each op's semantics in its one place).
template <class Op>
Tensor& write(const char* name, Tensor& x, Op op) {
  check_inplace_allowed(name, x);
  Tensor result;
  {
    NoGradGuard no_grad;
    result = op(x);
  }
  check_inplace_cast(name, result.dtype(), x.dtype());
  MINIDL_CHECK(result.shape() == x.shape(), name, ": the result's shape ", result.shape(),
               " is not the destination's ", x.shape(), " (an operand broadcasts beyond it)");
  return copy_(x, result);
}

}  // namespace

Tensor& relu_(Tensor& x) { return write("relu_", x, [](const Tensor& t) { return relu(t); }); }
Tensor& sigmoid_(Tensor& x) { return write("sigmoid_", x, [](const Tensor& t) { return sigmoid(t); }); }
Tensor& tanh_(Tensor& x) { return write("tanh_", x, [](const Tensor& t) { return tanh(t); }); }
Tensor& exp_(Tensor& x) { return write("exp_", x, [](const Tensor& t) { return exp(t); }); }
Tensor& log_(Tensor& x) { return write("log_", x, [](const Tensor& t) { return log(t); }); }
Tensor& sqrt_(Tensor& x) { return write("sqrt_", x, [](const Tensor& t) { return sqrt(t); }); }
Tensor& neg_(Tensor& x) { return write("neg_", x, [](const Tensor& t) { return neg(t); }); }
Tensor& abs_(Tensor& x) { return write("abs_", x, [](const Tensor& t) { return abs(t); }); }
Tensor& pow_(Tensor& x, const Scalar& exponent) {
  return write("pow_", x, [&](const Tensor& t) { return pow(t, exponent); });
}
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return write("clamp_", x, [&](const Tensor& t) { return clamp(t, min, max); });
}
Tensor& clamp_min_(Tensor& x, const Scalar& min) { return clamp_(x, min); }
Tensor& clamp_max_(Tensor& x, const Scalar& max) { return clamp_(x, std::nullopt, max); }
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) {
  return write("masked_fill_", x, [&](const Tensor& t) { return masked_fill(t, mask, value.to_double()); });
}
Tensor& addcmul_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return write("addcmul_", x, [&](const Tensor& t) { return addcmul(t, t1, t2, value); });
}
Tensor& addcdiv_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return write("addcdiv_", x, [&](const Tensor& t) { return addcdiv(t, t1, t2, value); });
}
Tensor& lerp_(Tensor& x, const Tensor& end, const Scalar& weight) {
  return write("lerp_", x, [&](const Tensor& t) { return lerp(t, end, weight); });
}
Tensor& index_fill_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return write("index_fill_", x, [&](const Tensor& t) { return index_fill(t, dim, index, value); });
}
Tensor& index_copy_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  return write("index_copy_", x, [&](const Tensor& t) { return index_copy(t, dim, index, source); });
}

}  // namespace minidl
