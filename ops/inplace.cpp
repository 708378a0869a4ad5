#include "ops/inplace.h"

#include <algorithm>

#include "core/autograd.h"
#include "core/type_promotion.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/rearrange.h"

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
Tensor& div_(Tensor& x, const Tensor& b, std::optional<std::string_view> rounding_mode) {
  return write("div_", x, [&](const Tensor& t) { return div(t, b, rounding_mode); });
}
Tensor& div_(Tensor& x, const Scalar& b, std::optional<std::string_view> rounding_mode) {
  return write("div_", x, [&](const Tensor& t) { return div(t, b, rounding_mode); });
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

Tensor& tril_(Tensor& x, int64_t diagonal) {
  return write("tril_", x, [&](const Tensor& t) { return tril(t, diagonal); });
}
Tensor& triu_(Tensor& x, int64_t diagonal) {
  return write("triu_", x, [&](const Tensor& t) { return triu(t, diagonal); });
}

Tensor& fill_diagonal_(Tensor& x, const Scalar& fill_value, bool wrap) {
  MINIDL_CHECK(x.dim() >= 2, "fill_diagonal_: expected a tensor with at least 2 dims, got ", x.dim());
  if (x.dim() > 2)
    for (int64_t d = 1; d < x.dim(); ++d)
      MINIDL_CHECK(x.size(d) == x.size(0), "fill_diagonal_: expected all dims of one length for a tensor of more "
                   "than 2 dims, got shape ", x.shape());
  return write("fill_diagonal_", x, [&](const Tensor& t) {
    // A contiguous copy, whose diagonal is every (sum of strides)-th element of its flat storage.
    Tensor out = t.contiguous().clone();
    int64_t step = 0;
    for (int64_t d = 0; d < out.dim(); ++d) step += out.stride(d);
    const int64_t rows = out.size(0), cols = out.size(1);
    int64_t length = std::min(rows, cols);
    if (x.dim() == 2 && wrap && rows > cols) length = (out.numel() + step - 1) / step;
    if (x.dim() > 2) length = out.size(0);
    Tensor diagonal = Tensor::make_view(out, {length}, {step}, out.offset());
    fill_(diagonal, fill_value);
    return out;
  });
}

}  // namespace minidl
