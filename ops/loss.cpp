// Losses. Shapes:
//   nll_loss:      log_probs [N, C], target int64 [N] -> 0-d (mean over N)
//   cross_entropy: logits    [N, C], target int64 [N] -> 0-d (mean over N)
//   mse_loss:      input, target of one shape -> 0-d, or that shape with Reduction::None
// cross_entropy runs log-softmax and the NLL in one kernel and keeps the log-probs, from which its
// backward, (softmax - one_hot(target)) * grad / N, is a single pass. Target values are range-checked
// by the kernels, which are the ones reading them.
#include "ops/loss.h"

#include "core/autograd.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/reduce.h"

namespace minidl {

namespace {

void check_inputs(const char* op, const char* input_name, const Tensor& input, const Tensor& target) {
  check_same_device(op, {input, target});
  MINIDL_CHECK(input.dim() == 2, op, ": expected ", input_name, " of shape [N, C], got shape ", input.shape());
  MINIDL_CHECK(is_floating(input.dtype()), op, ": expected floating ", input_name, ", got ", input.dtype());
  MINIDL_CHECK(target.dtype() == kInt64, op, ": expected an int64 target of class indices, got ", target.dtype(),
               " of shape ", target.shape());
  MINIDL_CHECK(target.dim() == 1 && target.size(0) == input.size(0), op, ": expected a target of shape [",
               input.size(0), "] for ", input_name, " of shape ", input.shape(), ", got target of shape ",
               target.shape());
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target) {
  check_inputs("nll_loss", "log_probs", log_probs, target);
  Tensor lp, t;
  {
    NoGradGuard no_grad;
    lp = log_probs.contiguous();
    t = target.contiguous();
  }
  Tensor loss = Tensor::empty({}, log_probs.dtype(), log_probs.device());
  kernels_for(log_probs.device()).nll_loss(lp, t, loss);
  if (autograd::needs_recording({log_probs})) {
    autograd::record("nll_loss", loss, {log_probs},
                     [t, shape = log_probs.shape(), dtype = log_probs.dtype()](const Tensor& g, const std::vector<bool>&) {
                       Tensor grad = Tensor::empty(shape, dtype, t.device());
                       kernels_for(t.device()).nll_loss_backward(g, t, grad);
                       return std::vector<Tensor>{grad};
                     });
  }
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  check_inputs("cross_entropy", "logits", logits, target);
  Tensor x, t;
  {
    NoGradGuard no_grad;
    x = logits.contiguous();
    t = target.contiguous();
  }
  Tensor loss = Tensor::empty({}, logits.dtype(), logits.device());
  Tensor log_probs = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  kernels_for(logits.device()).cross_entropy(x, t, loss, log_probs);
  if (autograd::needs_recording({logits})) {
    autograd::record("cross_entropy", loss, {logits}, [log_probs, t](const Tensor& g, const std::vector<bool>&) {
      Tensor grad = Tensor::empty(log_probs.shape(), log_probs.dtype(), log_probs.device());
      kernels_for(log_probs.device()).cross_entropy_backward(g, log_probs, t, grad);
      return std::vector<Tensor>{grad};
    });
  }
  return loss;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  MINIDL_CHECK(input.defined() && target.defined(), "mse_loss: input and target must be defined");
  MINIDL_CHECK(input.shape() == target.shape(), "mse_loss: input of shape ", input.shape(),
               " and target of shape ", target.shape(), " differ (expected the same shape)");
  MINIDL_CHECK(is_floating(input.dtype()) && input.dtype() == target.dtype(),
               "mse_loss: expected floating input and target of one dtype, got ", input.dtype(), " and ",
               target.dtype());
  // Composed: d/dinput = 2 (input - target) comes from the ops' own backwards.
  Tensor diff = sub(input, target);
  Tensor squared = mul(diff, diff);
  switch (reduction) {
    case Reduction::Sum: return sum(squared);
    case Reduction::None: return squared;
    default: return mean(squared);
  }
}

}  // namespace minidl
