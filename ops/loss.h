#pragma once
// Losses. The classification losses average over the batch; mse_loss takes a reduction.
#include "core/tensor.h"

namespace minidl {

/// How a loss folds its per-element values: their mean, their sum, or none (the same shape as the input).
enum class Reduction { Mean, Sum, None };

/// Negative log-likelihood of int64 `target` [N] under `log_probs` [N, C], averaged over N.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target);
/// nll_loss(log_softmax(logits, 1), target), fused into one kernel each way.
Tensor cross_entropy(const Tensor& logits, const Tensor& target);
/// (input - target)^2, reduced; input and target of one shape and dtype.   mse_loss(reconstruction, image)
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace minidl
