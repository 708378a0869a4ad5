// Activations: a UnaryOp kernel forward and a BinaryOp *Backward kernel from the saved input (the
// kernels hold PyTorch's formulas), except where a composition of recorded ops is as fast and
// clearer (hardtanh's mask, prelu's per-channel weight).
#include "ops/activation.h"

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/logical.h"
#include "ops/pointwise.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace {

void check_floating(const char* name, const Tensor& x) {
  MINIDL_CHECK(x.defined(), name, ": expected a defined tensor");
  MINIDL_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor, got ", x.dtype());
}

// The forward kernel, and a backward kernel reading the saved input.
Tensor activation(UnaryOp op, BinaryOp backward_op, const char* name, const Tensor& x, double scalar = 0) {
  check_floating(name, x);
  Tensor out = pointwise::unary(op, x, scalar);
  if (autograd::needs_recording({x})) {
    Tensor xs = x.detach();
    autograd::record(name, out, {x}, {xs}, [xs, backward_op, scalar](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{pointwise::binary(backward_op, "backward", g, xs, scalar)};
    });
  }
  return out;
}

}  // namespace

Tensor softplus(const Tensor& x, double beta, double threshold) {
  check_floating("softplus", x);
  MINIDL_CHECK(beta != 0, "softplus: expected a nonzero beta, got 0");
  // The kernel is softplus with beta 1 on y = beta * x; the scaling around it is recorded, so the
  // chain rule supplies the beta / beta of the gradient.
  if (beta == 1) return activation(UnaryOp::Softplus, BinaryOp::SoftplusBackward, "softplus", x, threshold);
  return activation(UnaryOp::Softplus, BinaryOp::SoftplusBackward, "softplus", x * beta, threshold) / beta;
}

Tensor elu(const Tensor& x, double alpha) { return activation(UnaryOp::Elu, BinaryOp::EluBackward, "elu", x, alpha); }
Tensor selu(const Tensor& x) { return activation(UnaryOp::Selu, BinaryOp::SeluBackward, "selu", x); }
Tensor mish(const Tensor& x) { return activation(UnaryOp::Mish, BinaryOp::MishBackward, "mish", x); }
Tensor hardsigmoid(const Tensor& x) {
  return activation(UnaryOp::Hardsigmoid, BinaryOp::HardsigmoidBackward, "hardsigmoid", x);
}
Tensor hardswish(const Tensor& x) {
  return activation(UnaryOp::Hardswish, BinaryOp::HardswishBackward, "hardswish", x);
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  check_floating("hardtanh", x);
  MINIDL_CHECK(min_val <= max_val, "hardtanh: expected min_val <= max_val, got min_val ", min_val, " and max_val ",
               max_val);
  Tensor out;
  {
    NoGradGuard no_grad;  // clamp's gradient keeps the bounds; PyTorch's hardtanh does not
    out = clamp(x.detach(), min_val, max_val);
  }
  if (autograd::needs_recording({x})) {
    Tensor xs = x.detach();
    autograd::record("hardtanh", out, {x}, {xs}, [xs, min_val, max_val](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{where(logical_and(gt(xs, min_val), lt(xs, max_val)), g, 0.0)};
    }, true);  // a mask times the gradient: differentiable again
  }
  return out;
}

Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }

// The shrinks, softsign, tanhshrink, celu and logit compose elementwise ops: their gradients are
// those ops', which match PyTorch's formulas (0 at the shrinks' thresholds, as PyTorch's).
Tensor softsign(const Tensor& x) {
  check_floating("softsign", x);
  return div(x, add(abs(x), 1));
}

Tensor tanhshrink(const Tensor& x) {
  check_floating("tanhshrink", x);
  return sub(x, tanh(x));
}

Tensor hardshrink(const Tensor& x, double lambd) {
  check_floating("hardshrink", x);
  return where(gt(abs(x), lambd), x, 0.0);
}

Tensor softshrink(const Tensor& x, double lambd) {
  check_floating("softshrink", x);
  MINIDL_CHECK(lambd >= 0, "softshrink: lambd must be greater or equal to 0, got ", lambd);
  return where(gt(x, lambd), sub(x, lambd), where(lt(x, -lambd), add(x, lambd), 0.0));
}

Tensor celu(const Tensor& x, double alpha) {
  check_floating("celu", x);
  MINIDL_CHECK(alpha > 0, "celu: expected alpha > 0, got ", alpha);
  return alpha == 1 ? elu(x, 1.0) : mul(elu(div(x, alpha), 1.0), alpha);
}

Tensor logit(const Tensor& x, std::optional<double> eps) {
  check_floating("logit", x);
  const Tensor z = eps ? clamp(x, *eps, 1.0 - *eps) : x;
  return log(div(z, 1.0 - z));
}

Tensor glu(const Tensor& x, int64_t dim) {
  check_floating("glu", x);
  MINIDL_CHECK(x.dim() > 0, "glu: expected a tensor of at least one dim, got a scalar");
  const int64_t d = wrap_dim(dim, x.dim(), "glu");
  const int64_t half = x.size(d) / 2;
  MINIDL_CHECK(x.size(d) % 2 == 0, "glu: the halved dim must be even, but dim ", d, " of shape ", x.shape(),
               " has size ", x.size(d));
  return mul(narrow(x, d, 0, half), sigmoid(narrow(x, d, half, half)));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  check_floating("prelu", x);
  MINIDL_CHECK(weight.defined(), "prelu: expected a defined weight");
  check_same_device("prelu", {x, weight});
  MINIDL_CHECK(weight.dtype() == x.dtype(), "prelu: expected the weight in the input's dtype ", x.dtype(), ", got ",
               weight.dtype());
  const int64_t n = weight.numel();
  MINIDL_CHECK(weight.dim() <= 1, "prelu: expected a weight of 1 dimension ([1] or [C]), got shape ", weight.shape());
  // 16-bit x is computed in float32 and rounded once, as PyTorch's kernel does: the composition's
  // weight gradient would round every product before summing them.
  if (is_reduced_floating(x.dtype())) return prelu(x.to(kFloat32), weight.to(kFloat32)).to(x.dtype());
  Tensor w = weight.reshape({n});
  if (n != 1) {
    MINIDL_CHECK(x.dim() >= 2 && x.size(1) == n, "prelu: a weight of ", n, " values needs an input with ", n,
                 " channels along dim 1, got shape ", x.shape());
    Shape shape(static_cast<size_t>(x.dim()), 1);
    shape[1] = n;
    w = w.reshape(shape);  // one slope per channel, broadcast over batch and space
  } else {
    w = w.reshape(Shape(static_cast<size_t>(x.dim()), 1));
  }
  return where(gt(x, 0.0), x, w * x);
}

}  // namespace minidl
