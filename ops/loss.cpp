// Losses. Shapes:
//   nll_loss:      input [N, C] (log-probabilities), target int64 [N], weight [C] (optional) -> 0-d,
//                  or [N] with None; also input [N, C, d1, ...] with target [N, d1, ...] (the class dim
//                  is moved last and the rest flattened, so the [N, C] kernels serve: the mean over
//                  every element is the same either way), and input [C] with a 0-d target
//   cross_entropy: input [N, C] (logits), as nll_loss
//   mse_loss, l1_loss, binary_cross_entropy_with_logits: input, target of one shape -> 0-d, or that
//     shape with None (pos_weight and weight broadcast to it)
// nll_loss has its own kernels: per-row losses plus the total weight of the rows not ignored (the
// divisor of the mean), so ignore_index, class weights and every reduction come from one kernel
// pair; the reduction is then ordinary sum / div, whose backwards give the rows' gradient.
// cross_entropy with its defaults (mean, no weight, no smoothing; ignore_index handled in the
// kernel) runs log-softmax and the NLL in one kernel which, while recording, also writes
// (softmax - one_hot(target)) / count, the gradient for a loss gradient of one: the backward of
// loss.backward() is then that tensor, with no kernel, and any other multiplies it by the loss's
// gradient. That is the training path, and it makes no host sync. The other options compose
// log_softmax, nll_loss and sums, as PyTorch itself does: those paths are rarer and the composition
// is exactly the definition.
// Target values are range-checked by the kernels, which are the ones reading them.
#include "ops/loss.h"

#include "core/autograd.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/loss_reduce.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/view.h"
#include "ops/widen_16bit.h"

namespace minidl {

using detail::check_not_batchmean;
using detail::reduce;

namespace {

void check_inputs(const char* op, const char* input_name, const Tensor& input, const Tensor& target) {
  MINIDL_CHECK(input.defined() && target.defined(), op, ": input and target must be defined");
  check_same_device(op, {input, target});
  MINIDL_CHECK(input.dim() == 2, op, ": expected ", input_name, " of shape [N, C], got shape ", input.shape());
  MINIDL_CHECK(is_floating(input.dtype()), op, ": expected floating ", input_name, ", got ", input.dtype());
  MINIDL_CHECK(target.dtype() == kInt64, op, ": expected an int64 target of class indices, got ", target.dtype(),
               " of shape ", target.shape());
  MINIDL_CHECK(target.dim() == 1 && target.size(0) == input.size(0), op, ": expected a target of shape [",
               input.size(0), "] for ", input_name, " of shape ", input.shape(), ", got target of shape ",
               target.shape());
}

// [C] with a 0-d target, or [N, C, d1, ...] with [N, d1, ...], as [rows, C] with [rows]: the class
// dim moved last (a copy) and the others flattened.
struct ClassRows {
  Tensor input, target;
};
ClassRows class_rows(const char* op, const char* input_name, const Tensor& input, const Tensor& target) {
  MINIDL_CHECK(input.defined() && target.defined(), op, ": input and target must be defined");
  MINIDL_CHECK(input.dim() >= 1, op, ": expected ", input_name, " of shape [N, C] or [N, C, d1, ...], got a 0-d tensor");
  MINIDL_CHECK(target.dtype() == kInt64, op, ": expected an int64 target of class indices, got ", target.dtype(),
               " of shape ", target.shape());
  if (input.dim() == 2) return {input, target};
  Shape expected = input.shape();
  expected.erase(expected.begin() + (input.dim() == 1 ? 0 : 1));
  MINIDL_CHECK(target.shape() == expected, op, ": expected a target of shape ", expected, " for ", input_name,
               " of shape ", input.shape(), " (", input_name, " [N, C] takes a target [N], [N, C, d1, ...] takes",
               " [N, d1, ...] and [C] a 0-d target), got target of shape ", target.shape());
  if (input.dim() == 1) return {unsqueeze(input, 0), reshape(target, {1})};
  std::vector<int64_t> class_last{0};
  for (int64_t d = 2; d < input.dim(); ++d) class_last.push_back(d);
  class_last.push_back(1);
  return {reshape(permute(input, class_last), {-1, input.size(1)}), reshape(target, {-1})};
}

void check_class_weight(const char* op, const Tensor& weight, const Tensor& input) {
  if (!weight.defined()) return;
  check_same_device(op, {input, weight});
  MINIDL_CHECK(weight.dim() == 1 && weight.size(0) == input.size(1), op, ": expected a class weight of shape [",
               input.size(1), "] for input of shape ", input.shape(), ", got shape ", weight.shape());
  MINIDL_CHECK(weight.dtype() == input.dtype(), op, ": expected a class weight of the input's dtype ", input.dtype(),
               ", got ", weight.dtype());
}

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  MINIDL_CHECK(input.defined() && target.defined(), op, ": input and target must be defined");
  check_same_device(op, {input, target});
  MINIDL_CHECK(input.shape() == target.shape(), op, ": input of shape ", input.shape(), " and target of shape ",
               target.shape(), " differ (expected the same shape)");
  MINIDL_CHECK(is_floating(input.dtype()) && input.dtype() == target.dtype(), op,
               ": expected floating input and target of one dtype, got ", input.dtype(), " and ", target.dtype());
}

// The recorded per-row NLL [N] (its gradient flows to log_probs only); total_weight receives the
// sum of the weights of the rows not ignored.
Tensor nll_rows(const Tensor& log_probs, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                Tensor& total_weight) {
  Tensor lp, t, w;
  {
    NoGradGuard no_grad;
    lp = log_probs.contiguous();
    t = target.contiguous();
    if (weight.defined()) w = weight.detach().contiguous();
  }
  Tensor rows = Tensor::empty({log_probs.size(0)}, log_probs.dtype(), log_probs.device());
  // The divisor of the mean stays float32 for 16-bit rows (reduce_rows): 70,000 rows' weight is
  // infinite in float16.
  const DType total_dtype = is_reduced_floating(log_probs.dtype()) ? kFloat32 : log_probs.dtype();
  total_weight = Tensor::empty({}, total_dtype, log_probs.device());
  {
    Widened wide(kernels_for(log_probs.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor rows32 = wide.output(rows), total32 = wide.output(total_weight);
    OptionalWide w32 = widen_input(wide, w.defined() ? &w : nullptr);
    wide.kernels().nll_loss(wide.input(lp), t, w32.get(), ignore_index, rows32, total32);
    wide.finish();
  }
  if (autograd::needs_recording({log_probs})) {
    autograd::record("nll_loss", rows, {log_probs}, {t, w}, [t, w, ignore_index, shape = log_probs.shape()](
                                                        const Tensor& g, const std::vector<bool>&) {
      Tensor grad = Tensor::empty(shape, g.dtype(), g.device());
      Widened wide(kernels_for(g.device()));
      Tensor grad32 = wide.output(grad);
      OptionalWide w32 = widen_input(wide, w.defined() ? &w : nullptr);
      wide.kernels().nll_loss_backward(wide.input(g.contiguous()), t, w32.get(), ignore_index, grad32);
      wide.finish();
      return std::vector<Tensor>{grad};
    });
  }
  return rows;
}

// Sum, none, or the weighted mean: the sum over the total weight of the rows not ignored.
Tensor reduce_rows(const Tensor& rows, const Tensor& total_weight, Reduction reduction) {
  switch (reduction) {
    case Reduction::Sum: return sum(rows);
    case Reduction::None: return rows;
    default:
      // In total_weight's dtype: float32 for 16-bit rows, rounded once at the end (ops/reduce.h's rule).
      return div(sum(rows, total_weight.dtype()), total_weight).to(rows.dtype());
  }
}

// Whether cross_entropy takes the fused path: its defaults (mean, no class weights, no smoothing).
bool fused_defaults(const Tensor& weight, Reduction reduction, double label_smoothing) {
  return reduction == Reduction::Mean && label_smoothing == 0 && !weight.defined();
}

// The defaults' path: one kernel, ignore_index handled inside. While recording, the forward also
// writes the gradient for a loss gradient of one: a backward that starts at this loss (the usual
// loss.backward()) takes it as it is, with no kernel of its own, and any other scales it.
// `loss_dtype` is float32 for 16-bit logits under autocast: the kernel reads them as float32 and
// rounds their unit gradient to their dtype once, the values a cast before it would give.
Tensor fused_cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, DType loss_dtype) {
  Tensor x, t;
  {
    NoGradGuard no_grad;
    x = logits.contiguous();
    t = target.contiguous();
  }
  const bool recording = autograd::needs_recording({logits});
  Tensor loss = Tensor::empty({}, loss_dtype, logits.device());
  Tensor count = Tensor::empty({}, loss_dtype, logits.device());
  Tensor grad_unit = recording ? Tensor::empty(logits.shape(), logits.dtype(), logits.device()) : Tensor();
  Kernels& k = kernels_for(logits.device());
  k.cross_entropy(x, t, ignore_index, loss, count, recording ? &grad_unit : nullptr);
  if (recording) {
    const bool widened = loss_dtype != logits.dtype();
    autograd::record("cross_entropy", loss, {logits}, {widened ? x : Tensor()},
                     [grad_unit, x = widened ? x : Tensor(), t, ignore_index, loss_dtype](
                         const Tensor& g, const std::vector<bool>&) {
      if (autograd::is_unit_seed(g)) return std::vector<Tensor>{grad_unit};
      if (!x.defined()) return std::vector<Tensor>{mul(grad_unit, g)};
      // Scaling the rounded unit gradient would round twice, and a float16 one can lose the small
      // values a GradScaler's scale is there to keep: the float32 one again, scaled, rounded once.
      Tensor unit = Tensor::empty(x.shape(), loss_dtype, x.device());
      Tensor l = Tensor::empty({}, loss_dtype, x.device()), c = Tensor::empty({}, loss_dtype, x.device());
      kernels_for(x.device()).cross_entropy(x, t, ignore_index, l, c, &unit);
      return std::vector<Tensor>{mul(unit, g).to(x.dtype())};
    });
  }
  return loss;
}

// Under autocast the loss runs in float32 (the policy table); for 16-bit logits on the fused path,
// its kernel widens them itself (fused_cross_entropy), and no cast runs either way.
bool autocast_reads_16bit(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                          double label_smoothing) {
  if (!autocast::is_active() || !input.defined() || input.dim() != 2 || !is_reduced_floating(input.dtype()) ||
      !fused_defaults(weight, reduction, label_smoothing))
    return false;
  const autocast::Target plan = autocast::plan(autocast::Op::cross_entropy, input, target, weight);
  if (!plan.cast || plan.dtype != kFloat32) return false;
  autocast::note_dispatch(plan);
  return true;
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                int64_t ignore_index) {
  MINIDL_AUTOCAST(nll_loss, nll_loss, input, target, weight, reduction, ignore_index);
  check_not_batchmean("nll_loss", reduction);
  if (input.dim() != 2) {
    ClassRows flat = class_rows("nll_loss", "input", input, target);
    Tensor loss = nll_loss(flat.input, flat.target, weight, reduction, ignore_index);
    return reduction == Reduction::None ? reshape(loss, target.shape()) : loss;
  }
  check_inputs("nll_loss", "input", input, target);
  check_class_weight("nll_loss", weight, input);
  Tensor total_weight;
  Tensor rows = nll_rows(input, target, weight, ignore_index, total_weight);
  return reduce_rows(rows, total_weight, reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  if (autocast_reads_16bit(input, target, weight, reduction, label_smoothing)) {
    autocast::ExcludeGuard exclude;
    check_inputs("cross_entropy", "input", input, target);
    return fused_cross_entropy(input, target, ignore_index, kFloat32);
  }
  MINIDL_AUTOCAST(cross_entropy, cross_entropy, input, target, weight, reduction, ignore_index, label_smoothing);
  check_not_batchmean("cross_entropy", reduction);
  if (input.dim() != 2) {
    ClassRows flat = class_rows("cross_entropy", "input", input, target);
    Tensor loss = cross_entropy(flat.input, flat.target, weight, reduction, ignore_index, label_smoothing);
    return reduction == Reduction::None ? reshape(loss, target.shape()) : loss;
  }
  const Tensor& logits = input;
  check_inputs("cross_entropy", "input", logits, target);
  check_class_weight("cross_entropy", weight, logits);
  MINIDL_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
               "cross_entropy: expected label_smoothing in [0, 1], got ", label_smoothing);
  if (fused_defaults(weight, reduction, label_smoothing))
    return fused_cross_entropy(logits, target, ignore_index, logits.dtype());
  // Composed, as PyTorch's cross_entropy_loss_label_smoothing: the NLL part and a smoothing part,
  // -sum_c w_c log p_c per row (0 on ignored rows), reduced with the same divisor.
  Tensor log_probs = log_softmax(logits, 1);
  Tensor total_weight;
  Tensor nll = reduce_rows(nll_rows(log_probs, target, weight, ignore_index, total_weight), total_weight, reduction);
  if (label_smoothing == 0) return nll;
  Tensor smooth = neg(sum(weight.defined() ? mul(log_probs, weight) : log_probs, {1}));
  smooth = masked_fill(smooth, eq(target, static_cast<double>(ignore_index)), 0.0);
  const double classes = static_cast<double>(logits.size(1));
  return nll * (1 - label_smoothing) + reduce_rows(smooth, total_weight, reduction) * (label_smoothing / classes);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  MINIDL_AUTOCAST(mse_loss, mse_loss, input, target, reduction);
  check_not_batchmean("mse_loss", reduction);
  check_same_shape("mse_loss", input, target);
  // Composed: d/dinput = 2 (input - target) comes from the ops' own backwards.
  Tensor diff = sub(input, target);
  return reduce(mul(diff, diff), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  MINIDL_AUTOCAST(l1_loss, l1_loss, input, target, reduction);
  check_not_batchmean("l1_loss", reduction);
  check_same_shape("l1_loss", input, target);
  // Composed: abs's gradient is sign(input - target), 0 where they are equal, as PyTorch's.
  return reduce(abs(sub(input, target)), reduction);
}

Tensor log_sigmoid(const Tensor& x) {
  MINIDL_CHECK(is_floating(x.dtype()), "log_sigmoid: expected a floating tensor, got ", x.dtype());
  Tensor src;
  {
    NoGradGuard no_grad;
    src = x.contiguous();
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  {
    Widened wide(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = wide.output(out);
    wide.kernels().log_sigmoid(wide.input(src), out32);
    wide.finish();
  }
  if (autograd::needs_recording({x})) {
    autograd::record("log_sigmoid", out, {x}, {src}, [src = src.detach()](const Tensor& g, const std::vector<bool>&) {
      Tensor grad = Tensor::empty(src.shape(), src.dtype(), src.device());
      Widened wide(kernels_for(src.device()));
      Tensor grad32 = wide.output(grad);
      wide.kernels().log_sigmoid_backward(wide.input(g.contiguous()), wide.input(src), grad32);
      wide.finish();
      return std::vector<Tensor>{grad};
    });
  }
  return out;
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  MINIDL_AUTOCAST(binary_cross_entropy_with_logits, binary_cross_entropy_with_logits, input, target, weight,
                  pos_weight, reduction);
  const char* op = "binary_cross_entropy_with_logits";
  check_not_batchmean(op, reduction);
  check_same_shape(op, input, target);
  for (const Tensor* w : {&pos_weight, &weight}) {
    if (!w->defined()) continue;
    const char* name = w == &weight ? "weight" : "pos_weight";
    check_same_device(op, {input, *w});
    MINIDL_CHECK(w->dtype() == input.dtype(), op, ": expected ", name, " of the input's dtype ", input.dtype(),
                 ", got ", w->dtype());
    MINIDL_CHECK(broadcasts_to(w->shape(), input.shape()), op, ": ", name, " of shape ", w->shape(),
                 " does not broadcast to the input's shape ", input.shape());
  }
  // PyTorch's form: log_sigmoid never overflows, and (1 - t) * x is linear; every gradient (input,
  // target, pos_weight, weight) comes from the ops' own backwards.
  Tensor log_sig = log_sigmoid(input);
  if (pos_weight.defined()) log_sig = mul(log_sig, add(mul(sub(pos_weight, scalar_like(1, pos_weight)), target),
                                                       scalar_like(1, target)));
  Tensor loss = sub(mul(sub(scalar_like(1, target), target), input), log_sig);
  if (weight.defined()) loss = mul(loss, weight);
  return reduce(loss, reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction) {
  MINIDL_AUTOCAST(binary_cross_entropy, binary_cross_entropy, input, target, weight, reduction);
  const char* op = "binary_cross_entropy";
  check_not_batchmean(op, reduction);
  check_same_shape(op, input, target);
  if (weight.defined()) {
    check_same_device(op, {input, weight});
    MINIDL_CHECK(weight.dtype() == input.dtype(), op, ": expected weight of the input's dtype ", input.dtype(), ", got ",
                 weight.dtype());
    MINIDL_CHECK(broadcasts_to(weight.shape(), input.shape()), op, ": weight of shape ", weight.shape(),
                 " does not broadcast to the input's shape ", input.shape());
  }
  // PyTorch clamps each log to >= -100, so a probability of exactly 0 or 1 gives a finite loss. A
  // composition would send 0 * inf = NaN back through the clamped log at such a point, so the
  // elementwise loss is one recorded op with PyTorch's gradients: w (x - t) / max(x (1 - x), 1e-12)
  // for the input, w (log(1 - x) - log(x)) (clamped logs) for the target. weight gets none, as in PyTorch.
  auto clamped_logs = [](const Tensor& x) {
    return std::pair{clamp(log(x), Scalar(-100.0)), clamp(log(sub(scalar_like(1, x), x)), Scalar(-100.0))};
  };
  Tensor loss;
  Tensor x, t, w;
  {
    NoGradGuard no_grad;
    x = input.detach();
    t = target.detach();
    if (weight.defined()) w = weight.detach();
    auto [log_x, log_1mx] = clamped_logs(x);
    loss = neg(add(mul(t, log_x), mul(sub(scalar_like(1, t), t), log_1mx)));
    if (w.defined()) loss = mul(loss, w);
  }
  if (autograd::needs_recording({input, target})) {
    autograd::record("binary_cross_entropy", loss, {input, target}, {x, t, w},
                     [x, t, w, clamped_logs](const Tensor& g, const std::vector<bool>& needs) {
                       NoGradGuard no_grad;
                       Tensor gw = w.defined() ? mul(g, w) : g;
                       Tensor grad_x, grad_t;
                       if (needs[0])
                         grad_x = div(mul(gw, sub(x, t)),
                                      clamp(mul(x, sub(scalar_like(1, x), x)), Scalar(1e-12)));
                       if (needs[1]) {
                         auto [log_x, log_1mx] = clamped_logs(x);
                         grad_t = mul(gw, sub(log_1mx, log_x));
                       }
                       return std::vector<Tensor>{grad_x, grad_t};
                     });
  }
  return reduce(loss, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  MINIDL_AUTOCAST(kl_div, kl_div, input, target, reduction, log_target);
  check_same_shape("kl_div", input, target);
  // Composed, with xlogy's convention 0 * log(0) = 0: log reads 1 where the target is 0.
  Tensor pointwise = log_target ? mul(exp(target), sub(target, input))
                                : mul(target, sub(log(where(eq(target, 0.0), Scalar(1.0), target)), input));
  return reduce(pointwise, reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  MINIDL_AUTOCAST(smooth_l1_loss, smooth_l1_loss, input, target, reduction, beta);
  check_not_batchmean("smooth_l1_loss", reduction);
  check_same_shape("smooth_l1_loss", input, target);
  MINIDL_CHECK(beta >= 0, "smooth_l1_loss: expected beta >= 0, got ", beta);
  if (beta == 0) return l1_loss(input, target, reduction);  // the quadratic part is empty, as PyTorch
  Tensor d = sub(input, target), ad = abs(d);
  return reduce(where(lt(ad, Scalar(beta)), mul(d, d) * (0.5 / beta), ad - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  MINIDL_AUTOCAST(huber_loss, huber_loss, input, target, reduction, delta);
  check_not_batchmean("huber_loss", reduction);
  check_same_shape("huber_loss", input, target);
  MINIDL_CHECK(delta > 0, "huber_loss: expected delta > 0, got ", delta);
  Tensor d = sub(input, target), ad = abs(d);
  return reduce(where(lt(ad, Scalar(delta)), mul(d, d) * 0.5, (ad - 0.5 * delta) * delta), reduction);
}

}  // namespace minidl
