#pragma once
// Classification losses, mean over the batch.
#include "core/tensor.h"

namespace minidl {

/// Negative log-likelihood of int64 `target` [N] under `log_probs` [N, C], averaged over N.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target);
/// nll_loss(log_softmax(logits, 1), target), fused into one kernel each way.
Tensor cross_entropy(const Tensor& logits, const Tensor& target);

}  // namespace minidl
