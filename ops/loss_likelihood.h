#pragma once
// Negative log-likelihood losses of the Poisson and Gaussian distributions, as torch.nn.functional
// has them: compositions of differentiable ops, with PyTorch's arguments, defaults and reductions.
#include "core/tensor.h"
#include "ops/loss.h"

namespace minidl {

/// Poisson negative log-likelihood of `target` counts: exp(input) - target * input when log_input
/// (the input is the log of the rate), else input - target * log(input + eps). With `full`, adds
/// Stirling's approximation of log(target!), target * log(target) - target + 0.5 * log(2 pi target),
/// where target > 1 (0 elsewhere). input and target of one shape and dtype.
///   poisson_nll_loss(log_rate, counts), poisson_nll_loss(rate, counts, /*log_input=*/false, /*full=*/true)
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true, bool full = false,
                        double eps = 1e-8, Reduction reduction = Reduction::Mean);

/// Gaussian negative log-likelihood of `target` under means `input` and variances `var`:
/// 0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)), plus 0.5 * log(2 pi) with `full`.
/// As PyTorch's: target broadcasts to the input; var has the input's shape, or one dim fewer (the
/// last one dropped: one variance per sample), or a last dim of 1; the clamp at eps passes var's
/// gradient through unchanged. A negative var is an error (read on the host: a device sync on CUDA).
///   gaussian_nll_loss(mean, y, variance), gaussian_nll_loss(mean, y, variance, /*full=*/true, 1e-6, Reduction::Sum)
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full = false,
                         double eps = 1e-6, Reduction reduction = Reduction::Mean);

}  // namespace minidl
