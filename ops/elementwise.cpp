// Elementwise ops. Shapes: a and b broadcast NumPy-style to the output's shape; gradients are
// summed back over the broadcast axes (sum_to_shape). Unary ops keep the input's shape.
#include "ops/elementwise.h"
#include "ops/inplace.h"

#include <cmath>

#include "core/autograd.h"
#include "core/half.h"
#include "core/type_promotion.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

// Both operands in `dtype`, each converted by a recorded cast where it differs, so that autograd
// hands every operand its gradient in its own dtype.
std::pair<Tensor, Tensor> cast_operands(const char* name, const Tensor& a, const Tensor& b, DType dtype) {
  check_same_device(name, {a, b});
  return {a.to(dtype), b.to(dtype)};
}

// The operands of arithmetic, promoted to their result type (core/type_promotion.h).
std::pair<Tensor, Tensor> arithmetic_operands(const char* name, const Tensor& a, const Tensor& b) {
  MINIDL_CHECK(a.defined() && b.defined(), name, ": expected two defined tensors");
  const DType dtype = result_type({a, b});
  MINIDL_CHECK(dtype != kBool, name, ": bool tensors take no arithmetic; convert with .to(kFloat32) first, or "
                                    "select with where()");
  return cast_operands(name, a, b, dtype);
}

// A number that scalar_operand kept in float32 beside a bfloat16 or float16 operand.
bool holds_float32_number(const Tensor& a, const Tensor& b) {
  const auto kept = [](const Tensor& t) { return t.defined() && t.is_wrapped_number() && t.dtype() == kFloat32; };
  return (kept(a) || kept(b)) && is_reduced_floating(result_type({a, b}));
}

// op(a, b) in float32, rounded once to the 16-bit result type (its casts recorded, so the gradient
// takes the same way back); undefined where no operand is such a number.
Tensor in_float32_for_scalar(Tensor (*op)(const Tensor&, const Tensor&), const Tensor& a, const Tensor& b) {
  if (!holds_float32_number(a, b)) return {};
  const DType dtype = result_type({a, b});
  return op(a.to(kFloat32), b.to(kFloat32)).to(dtype);
}

Tensor binary_forward(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  check_same_device(name, {a, b});
  MINIDL_CHECK(a.dtype() == b.dtype(), name, ": expected both tensors to have one dtype, got ", a.dtype(), " and ",
               b.dtype());
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  NoGradGuard no_grad;  // expand() views are plumbing here, not part of the graph
  kernels_for(a.device()).binary(op, expand(a, shape), expand(b, shape), out);
  return out;
}

Tensor unary_forward(UnaryOp op, const char* name, const Tensor& x, double scalar = 0) {
  if (op != UnaryOp::Neg) {
    MINIDL_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor, got ", x.dtype());
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  kernels_for(x.device()).unary(op, x, out, scalar);
  return out;
}

// exp, log, sqrt, sigmoid and tanh of an integral or bool tensor: PyTorch computes them in the
// default float dtype (int-to-float promotion) rather than refusing.
Tensor floating(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(kDefaultFloat); }

Tensor binary_backward_op(BinaryOp op, const Tensor& grad, const Tensor& saved) {
  return binary_forward(op, "backward", grad, saved);
}

}  // namespace

Tensor scalar_like(double value, const Tensor& like) { return full({}, value, like.dtype(), like.device()); }

namespace {

// Whether `value` converts to `dtype` and back unchanged (a bfloat16 or float16 one only: every
// operand a C++ number meets in another floating dtype is already computed at that precision).
bool fits_16bit(double value, DType dtype) {
  const float f = static_cast<float>(value);
  if (static_cast<double>(f) != value && !std::isnan(value)) return false;
  const float back = dtype == kBFloat16 ? static_cast<float>(BFloat16(f)) : static_cast<float>(Half(f));
  return back == f || (std::isnan(back) && std::isnan(f));
}

}  // namespace

// A number that the 16-bit result type cannot hold is kept in float32 (a wrapped number promotes by
// its category, so the result type stays the tensor's); the arithmetic ops then compute in float32
// and round once (in_float32_for_scalar), as PyTorch's kernels read a scalar at their float32
// compute precision. Rounding it first made a bfloat16 x / 257 divide by 256, and a float16
// x / 100000 divide by infinity.
Tensor scalar_operand(const Scalar& value, const Tensor& other) {
  const DType dtype = result_type(other, value);
  if (is_reduced_floating(dtype) && !fits_16bit(value.to_double(), dtype))
    return scalar_tensor(value, kFloat32, other.device());
  return scalar_tensor(value, dtype, other.device());
}

// a = a op b in place, b broadcast to a's shape. Not recorded, so a must not need a gradient. The
// result type must fit a's dtype (PyTorch refuses int64 += 0.5 rather than truncating); b is then
// converted to a's dtype. A strided destination (a view) is computed into a buffer and copied into
// exactly its elements, since kernels write contiguous outputs.
Tensor& binary_inplace(BinaryOp op, const char* name, Tensor& a, const Tensor& b) {
  check_inplace_allowed(name, a);
  check_same_device(name, {a, b});
  DType dtype = result_type({a, b});
  MINIDL_CHECK(dtype != kBool, name, ": bool tensors take no arithmetic; convert with .to(kFloat32) first");
  if (op == BinaryOp::Div && !is_floating(dtype)) dtype = kDefaultFloat;  // true division
  check_inplace_cast(name, dtype, a.dtype());
  MINIDL_CHECK(broadcast_shapes(a.shape(), b.shape(), name) == a.shape(), name, ": shape ", b.shape(),
               " does not broadcast to the destination's shape ", a.shape());
  NoGradGuard no_grad;
  Kernels& k = kernels_for(a.device());
  if (holds_float32_number(a, b)) {  // a number a's 16-bit dtype cannot hold: in float32, rounded once
    Tensor wide = Tensor::empty(a.shape(), kFloat32, a.device());
    k.copy(a, wide);
    k.binary(op, wide, expand(b, a.shape()), wide);
    k.copy(wide, a);
    a.bump_version();
    return a;
  }
  const Tensor source = expand(b.to(a.dtype()), a.shape());
  if (a.is_contiguous()) {
    k.binary(op, a, source, a);
  } else {
    Tensor buffer = Tensor::empty(a.shape(), a.dtype(), a.device());
    k.binary(op, a, source, buffer);
    k.copy(buffer, a);
  }
  a.bump_version();
  return a;
}

namespace {

// other * alpha for the alpha forms of add and sub; libtorch refuses a floating alpha for integral
// tensors rather than promote them.
Tensor scaled(const char* name, const Tensor& other, const Scalar& alpha) {
  if (!alpha.is_floating_point() && alpha.to<int64_t>() == 1) return other;
  MINIDL_CHECK(is_floating(other.dtype()) || !alpha.is_floating_point(), name,
               ": for integral input tensors, argument alpha must not be a floating point number (got ", alpha, ")");
  return mul(other, scalar_operand(alpha, other));
}

}  // namespace

Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha) {
  return binary_inplace(BinaryOp::Add, "add_", a, scaled("add_", b, alpha));
}
Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha) {
  return binary_inplace(BinaryOp::Sub, "sub_", a, scaled("sub_", b, alpha));
}
Tensor& mul_(Tensor& a, const Tensor& b) { return binary_inplace(BinaryOp::Mul, "mul_", a, b); }
Tensor& div_(Tensor& a, const Tensor& b) { return binary_inplace(BinaryOp::Div, "div_", a, b); }
Tensor& add_(Tensor& a, const Scalar& b, const Scalar& alpha) {
  return add_(a, scalar_operand(b, a), alpha);
}
Tensor& sub_(Tensor& a, const Scalar& b, const Scalar& alpha) {
  return sub_(a, scalar_operand(b, a), alpha);
}
Tensor& mul_(Tensor& a, const Scalar& b) { return mul_(a, scalar_operand(b, a)); }
Tensor& div_(Tensor& a, const Scalar& b) { return div_(a, scalar_operand(b, a)); }

Tensor& zero_(Tensor& t) {
  check_inplace_allowed("zero_", t);
  if (t.is_contiguous()) {
    kernels_for(t.device()).fill(t, 0);
  } else {  // a strided view: copy a broadcast zero into exactly its elements
    NoGradGuard no_grad;
    kernels_for(t.device()).copy(expand(zeros({}, t.dtype(), t.device()), t.shape()), t);
  }
  t.bump_version();
  return t;
}


namespace {

// float32 + a 16-bit tensor of the same shape (a residual stream plus a branch computed under
// autocast), where the device adds them in one pass: the result and gradients of promotion (the
// 16-bit operand widened, then added; its gradient narrowed back), without the widened copy.
Tensor add_widening(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape() || a.dim() == 0 || a.device() != b.device()) return {};
  const bool a_wide = a.dtype() == kFloat32 && is_reduced_floating(b.dtype());
  if (!a_wide && !(b.dtype() == kFloat32 && is_reduced_floating(a.dtype()))) return {};
  Tensor out = kernels_for(a.device()).add_widening(a_wide ? a : b, a_wide ? b : a);
  if (!out.defined()) return {};
  if (autograd::needs_recording({a, b})) {
    autograd::record("add", out, {a, b}, [da = a.dtype(), db = b.dtype()](const Tensor& g, const std::vector<bool>& needs) {
      return std::vector<Tensor>{needs[0] ? g.to(da) : Tensor(), needs[1] ? g.to(db) : Tensor()};
    }, true);
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  if (Tensor out = in_float32_for_scalar(add, a_in, b_in); out.defined()) return out;
  if (Tensor out = add_widening(a_in, b_in); out.defined()) return out;
  auto [a, b] = arithmetic_operands("add", a_in, b_in);
  Tensor out = binary_forward(BinaryOp::Add, "add", a, b);
  if (autograd::needs_recording({a, b})) {
    autograd::record("add", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const std::vector<bool>& needs) {
      return std::vector<Tensor>{needs[0] ? sum_to_shape(g, sa) : Tensor(), needs[1] ? sum_to_shape(g, sb) : Tensor()};
    }, true);
  }
  return out;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  if (Tensor out = in_float32_for_scalar(sub, a_in, b_in); out.defined()) return out;
  auto [a, b] = arithmetic_operands("sub", a_in, b_in);
  Tensor out = binary_forward(BinaryOp::Sub, "sub", a, b);
  if (autograd::needs_recording({a, b})) {
    autograd::record("sub", out, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const std::vector<bool>& needs) {
      return std::vector<Tensor>{needs[0] ? sum_to_shape(g, sa) : Tensor(), needs[1] ? sum_to_shape(neg(g), sb) : Tensor()};
    }, true);
  }
  return out;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  if (Tensor out = in_float32_for_scalar(mul, a_in, b_in); out.defined()) return out;
  auto [a, b] = arithmetic_operands("mul", a_in, b_in);
  Tensor out = binary_forward(BinaryOp::Mul, "mul", a, b);
  if (autograd::needs_recording({a, b})) {
    // Save an operand only when the other one's gradient needs it; as given, so that a create_graph
    // backward differentiates through it.
    Tensor saved_a = b.requires_grad() ? a : Tensor();
    Tensor saved_b = a.requires_grad() ? b : Tensor();
    autograd::record("mul", out, {a, b}, {saved_a, saved_b}, [saved_a, saved_b, sa = a.shape(), sb = b.shape()](
                                             const Tensor& g, const std::vector<bool>& needs) {
      return std::vector<Tensor>{needs[0] ? sum_to_shape(mul(g, saved_b), sa) : Tensor(),
                                 needs[1] ? sum_to_shape(mul(g, saved_a), sb) : Tensor()};
    }, true);
  }
  return out;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  if (Tensor out = in_float32_for_scalar(div, a_in, b_in); out.defined()) return out;
  MINIDL_CHECK(a_in.defined() && b_in.defined(), "div: expected two defined tensors");
  DType dtype = result_type({a_in, b_in});
  if (!is_floating(dtype)) dtype = kDefaultFloat;  // true division, as Python's /
  auto [a, b] = cast_operands("div", a_in, b_in, dtype);
  Tensor out = binary_forward(BinaryOp::Div, "div", a, b);
  if (autograd::needs_recording({a, b})) {
    Tensor saved_b = b;
    Tensor saved_out = b.requires_grad() ? out.detach() : Tensor();
    autograd::record("div", out, {a, b}, {saved_b, saved_out}, [saved_b, saved_out, sa = a.shape(), sb = b.shape()](
                                             const Tensor& g, const std::vector<bool>& needs) {
      Tensor ga = div(g, saved_b);  // d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b
      return std::vector<Tensor>{needs[0] ? sum_to_shape(ga, sa) : Tensor(),
                                 needs[1] ? sum_to_shape(neg(mul(ga, autograd::saved_output(saved_out))), sb) : Tensor()};
    }, true);
  }
  return out;
}

Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  MINIDL_AUTOCAST(pow, pow, a_in, b_in);
  if (Tensor out = in_float32_for_scalar(pow, a_in, b_in); out.defined()) return out;
  auto [a, b] = arithmetic_operands("pow", a_in, b_in);
  Tensor out = binary_forward(BinaryOp::Pow, "pow", a, b);
  if (autograd::needs_recording({a, b})) {
    autograd::record("pow", out, {a, b}, {a, b, out}, [sa_t = a, sb_t = b, so = out.detach()](
                                             const Tensor& g, const std::vector<bool>& needs) {
      Tensor ga, gb;
      if (needs[0]) ga = sum_to_shape(mul(g, mul(sb_t, pow(sa_t, sub(sb_t, scalar_like(1, sb_t))))), sa_t.shape());
      if (needs[1]) gb = sum_to_shape(mul(g, mul(autograd::saved_output(so), log(sa_t))), sb_t.shape());
      return std::vector<Tensor>{ga, gb};
    }, true);
  }
  return out;
}

Tensor pow(const Tensor& a, const Scalar& exponent) {
  MINIDL_AUTOCAST(pow, pow, a, exponent);
  // 2 ** -1 has no integral value: PyTorch refuses it rather than truncating to 0.
  MINIDL_CHECK(is_floating(result_type(a, exponent)) || exponent.to_double() >= 0,
               "pow: integers to negative integer powers are not allowed (", a.dtype(), " ** ", exponent,
               "); use a floating base, e.g. x.to(kFloat32)");
  return pow(a, scalar_operand(exponent, a));
}

namespace {

// An integral floor_divide or remainder by zero traps on the CPU (SIGFPE) and gives garbage on a
// GPU: refuse it, as PyTorch does. Costs a look at the divisor (a synchronization on CUDA), for
// integral divisors only.
void check_integral_divisor(const char* name, const Tensor& b) {
  if (is_floating(b.dtype())) return;
  NoGradGuard no_grad;
  MINIDL_CHECK(eq(b, 0).sum().item<int64_t>() == 0, name, ": integer division by zero (the ", b.dtype(),
               " divisor of shape ", b.shape(), " holds a 0)");
}

}  // namespace

Tensor floor_divide(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = arithmetic_operands("floor_divide", a_in, b_in);
  check_integral_divisor("floor_divide", b);
  NoGradGuard no_grad;  // no gradient, as in PyTorch (it is zero almost everywhere)
  return binary_forward(BinaryOp::FloorDivide, "floor_divide", a.detach(), b.detach());
}

Tensor remainder(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = arithmetic_operands("remainder", a_in, b_in);
  check_integral_divisor("remainder", b);
  Tensor out = binary_forward(BinaryOp::Remainder, "remainder", a, b);
  if (autograd::needs_recording({a, b})) {
    Tensor sa_t = a.detach(), sb_t = b.detach();
    autograd::record("remainder", out, {a, b}, {sa_t, sb_t}, [sa_t, sb_t](const Tensor& g, const std::vector<bool>& needs) {
      Tensor ga, gb;  // a % b = a - floor(a / b) * b
      if (needs[0]) ga = sum_to_shape(g, sa_t.shape());
      if (needs[1]) gb = sum_to_shape(neg(mul(g, floor_divide(sa_t, sb_t))), sb_t.shape());
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

Tensor neg(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::Neg, "neg", x);
  if (autograd::needs_recording({x})) {
    autograd::record("neg", out, {x}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{neg(g)}; },
                     true);
  }
  return out;
}

Tensor exp(const Tensor& x_in) {
  MINIDL_AUTOCAST(exp, exp, x_in);
  Tensor x = floating(x_in);
  Tensor out = unary_forward(UnaryOp::Exp, "exp", x);
  if (autograd::needs_recording({x})) {
    autograd::record("exp", out, {x}, {out}, [y = out.detach()](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{mul(g, autograd::saved_output(y))};
    }, true);
  }
  return out;
}

Tensor log(const Tensor& x_in) {
  MINIDL_AUTOCAST(log, log, x_in);
  Tensor x = floating(x_in);
  Tensor out = unary_forward(UnaryOp::Log, "log", x);
  if (autograd::needs_recording({x})) {
    autograd::record("log", out, {x}, {x}, [xs = x](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{div(g, xs)};
    }, true);
  }
  return out;
}

Tensor sqrt(const Tensor& x_in) {
  Tensor x = floating(x_in);
  Tensor out = unary_forward(UnaryOp::Sqrt, "sqrt", x);
  if (autograd::needs_recording({x})) {
    autograd::record("sqrt", out, {x}, {out}, [y = out.detach()](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{div(g, mul(autograd::saved_output(y), scalar_like(2, y)))};
    }, true);
  }
  return out;
}

Tensor relu(const Tensor& x) {
  Tensor out = unary_forward(UnaryOp::Relu, "relu", x);
  if (autograd::needs_recording({x})) {
    // The output is as good as the input for the mask (out > 0 exactly where x > 0), and it is the
    // tensor the next layer keeps alive anyway.
    autograd::record("relu", out, {x}, {out}, [y = out.detach()](const Tensor& g, const std::vector<bool>&) {
      // Under create_graph the mask multiplies the recorded gradient (relu'' is 0: y needs no history).
      if (grad_mode_enabled()) return std::vector<Tensor>{mul(g, gt(y, 0).to(g.dtype()))};
      return std::vector<Tensor>{binary_backward_op(BinaryOp::ReluBackward, g, y)};
    }, true);
  }
  return out;
}

Tensor sigmoid(const Tensor& x_in) {
  Tensor x = floating(x_in);
  Tensor out = unary_forward(UnaryOp::Sigmoid, "sigmoid", x);
  if (autograd::needs_recording({x})) {
    autograd::record("sigmoid", out, {x}, {out}, [y = out.detach()](const Tensor& g, const std::vector<bool>&) {
      if (grad_mode_enabled()) {  // create_graph: g * y * (1 - y) from recorded ops
        Tensor yh = autograd::saved_output(y);
        return std::vector<Tensor>{mul(g, mul(yh, sub(scalar_like(1, yh), yh)))};
      }
      return std::vector<Tensor>{binary_backward_op(BinaryOp::SigmoidBackward, g, y)};
    }, true);
  }
  return out;
}

Tensor tanh(const Tensor& x_in) {
  Tensor x = floating(x_in);
  Tensor out = unary_forward(UnaryOp::Tanh, "tanh", x);
  if (autograd::needs_recording({x})) {
    autograd::record("tanh", out, {x}, {out}, [y = out.detach()](const Tensor& g, const std::vector<bool>&) {
      if (grad_mode_enabled()) {  // create_graph: g * (1 - y^2) from recorded ops
        Tensor yh = autograd::saved_output(y);
        return std::vector<Tensor>{mul(g, sub(scalar_like(1, yh), mul(yh, yh)))};
      }
      return std::vector<Tensor>{binary_backward_op(BinaryOp::TanhBackward, g, y)};
    }, true);
  }
  return out;
}

Tensor abs(const Tensor& x) {
  if (is_floating(x.dtype())) return add(relu(x), relu(neg(x)));  // gradient sign(x), 0 at 0
  MINIDL_CHECK(x.dtype() != kBool, "abs: expected a floating or integral tensor, got bool");
  return where(lt(x, 0), neg(x), x);  // integral: no gradient to give
}

namespace {

// grad * f'(input) for the activations whose derivative is a function of the input (BinaryOp
// *Backward with b = input); grad and input have one shape, any strides.
Tensor activation_backward(BinaryOp op, const Tensor& grad, const Tensor& input, double scalar = 0) {
  check_same_device("backward", {grad, input});
  Tensor out = Tensor::empty(grad.shape(), grad.dtype(), grad.device());
  kernels_for(grad.device()).binary(op, grad, input, out, scalar);
  return out;
}

// One activation: the forward kernel, and a backward from the saved input.
Tensor activation(UnaryOp op, BinaryOp backward_op, const char* name, const Tensor& x, double scalar = 0) {
  Tensor out = unary_forward(op, name, x, scalar);
  if (autograd::needs_recording({x})) {
    autograd::record(name, out, {x}, {x}, [xs = x.detach(), backward_op, scalar](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{activation_backward(backward_op, g, xs, scalar)};
    });
  }
  return out;
}

}  // namespace

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  // The input, not the output, decides the branch in the backward: with a negative slope the
  // output's sign says nothing.
  return activation(UnaryOp::LeakyRelu, BinaryOp::LeakyReluBackward, "leaky_relu", x, negative_slope);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  MINIDL_CHECK(approximate == "none" || approximate == "tanh",
               "gelu: expected approximate to be \"none\" or \"tanh\", got \"", approximate, "\"");
  if (approximate == "tanh") return activation(UnaryOp::GeluTanh, BinaryOp::GeluTanhBackward, "gelu", x);
  return activation(UnaryOp::Gelu, BinaryOp::GeluBackward, "gelu", x);
}

Tensor silu(const Tensor& x) { return activation(UnaryOp::Silu, BinaryOp::SiluBackward, "silu", x); }

}  // namespace minidl
