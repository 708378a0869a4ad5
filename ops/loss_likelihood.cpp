// poisson_nll_loss and gaussian_nll_loss. Shapes:
//   poisson_nll_loss:  input, target of one shape -> 0-d, or that shape with None
//   gaussian_nll_loss: input [*, D], target broadcast to it, var [*, D], [*] or [*, 1] -> 0-d, or
//                      the broadcast shape with None
// Both are PyTorch's definitions (aten/src/ATen/native/Loss.cpp, torch/nn/functional.py) written
// with recorded ops, whose backwards give every gradient.
#include "ops/loss_likelihood.h"

#include <cmath>
#include <numbers>

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/loss_reduce.h"
#include "ops/view.h"

namespace minidl {

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full, double eps,
                        Reduction reduction) {
  MINIDL_AUTOCAST(poisson_nll_loss, poisson_nll_loss, input, target, log_input, full, eps, reduction);
  const char* op = "poisson_nll_loss";
  detail::check_floating_inputs(op, {{"input", input}, {"target", target}});
  MINIDL_CHECK(input.shape() == target.shape(), op, ": expected a target of the input's shape ", input.shape(),
               ", got target of shape ", target.shape());
  Tensor loss = log_input ? sub(exp(input), mul(target, input)) : sub(input, mul(target, log(input + eps)));
  if (full) {
    // Stirling's term where target > 1. Its log reads 1 elsewhere, so that the masked-out entries
    // give 0 * finite, not 0 * log(0) = NaN, to a target that requires grad.
    Tensor counted = gt(target, Scalar(1.0));
    Tensor t = where(counted, target, Scalar(1.0));
    Tensor stirling = add(sub(mul(t, log(t)), t), mul(log(t * (2 * std::numbers::pi)), Scalar(0.5)));
    loss = add(loss, where(counted, stirling, Scalar(0.0)));
  }
  return detail::reduce_loss(op, loss, reduction);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full, double eps,
                         Reduction reduction) {
  const char* op = "gaussian_nll_loss";
  detail::check_floating_inputs(op, {{"input", input}, {"target", target}, {"var", var}});
  MINIDL_CHECK(broadcasts_to(target.shape(), input.shape()), op, ": expected a target that broadcasts to the input's shape ",
               input.shape(), ", got target of shape ", target.shape());
  MINIDL_CHECK(eps >= 0, op, ": expected eps >= 0, got ", eps);
  // PyTorch's rule: var of the input's shape (one variance per element), of its shape without the
  // last dim (one per sample: a last dim of 1 is added, to broadcast), or with a last dim of 1.
  Tensor v = var;
  if (var.shape() != input.shape()) {
    const Shape& in = input.shape();
    const Shape leading(in.begin(), in.end() - (in.empty() ? 0 : 1));
    if (!in.empty() && var.shape() == leading) {
      v = unsqueeze(var, -1);
    } else {
      const bool last_is_one = var.dim() == input.dim() && var.dim() >= 1 && var.size(-1) == 1 &&
                               Shape(var.shape().begin(), var.shape().end() - 1) == leading;
      MINIDL_CHECK(last_is_one, op, ": var of shape ", var.shape(), " does not fit input of shape ", input.shape(),
                   ": expected ", input.shape(), ", ", leading, " or the input's shape with a last dim of 1");
    }
  }
  // The one host read: whether any variance is negative (a device sync on CUDA), as PyTorch checks.
  MINIDL_CHECK(!any(lt(var.detach(), Scalar(0.0))).item<bool>(), op, ": var has negative entries");
  // Clamped at eps as PyTorch does it, in place under no_grad: the values are clamped, the gradient
  // passes to var unchanged.
  Tensor shift;
  {
    NoGradGuard no_grad;
    Tensor detached = v.detach();
    shift = sub(clamp(detached, Scalar(eps)), detached);
  }
  v = add(v, shift);
  Tensor diff = sub(input, target);
  Tensor loss = mul(add(log(v), div(mul(diff, diff), v)), Scalar(0.5));
  if (full) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return detail::reduce_loss(op, loss, reduction);
}

}  // namespace minidl
