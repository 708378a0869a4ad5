#pragma once
// Losses, with PyTorch's names, defaults and reductions.
#include "core/tensor.h"

namespace minidl {

/// How a loss folds its per-element values: their mean, their sum, or none (the same shape as the input).
enum class Reduction { Mean, Sum, None };

/// Negative log-likelihood of int64 class indices `target` [N] under `log_probs` [N, C], as
/// torch.nn.functional.nll_loss: each row's loss is -weight[t] * log_probs[i, t] (weight [C] optional,
/// ones by default); rows whose target is ignore_index count for nothing. Mean divides by the sum of
/// weight[t] over the rows not ignored (NaN when every row is ignored); None gives [N].
///   nll_loss(log_softmax(logits, 1), target), nll_loss(lp, target, Reduction::Sum, /*ignore_index=*/0)
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100, const Tensor& weight = Tensor());
/// nll_loss(log_softmax(logits, 1), target, ...), with label smoothing as PyTorch's: with eps =
/// label_smoothing, each row's loss is (1 - eps) * nll + eps * mean over classes of -log p (both
/// weighted by `weight` when given, 0 on ignored rows), reduced as nll_loss. The defaults run one
/// fused kernel each way.   cross_entropy(logits, target), cross_entropy(logits, target, Reduction::Mean, -100, 0.1)
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     int64_t ignore_index = -100, double label_smoothing = 0.0, const Tensor& weight = Tensor());
/// (input - target)^2, reduced; input and target of one shape and dtype.   mse_loss(reconstruction, image)
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
/// |input - target|, reduced; input and target of one shape and dtype.   l1_loss(prediction, target)
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
/// Binary cross-entropy of `target` probabilities under logits `input` (one shape), computed stably
/// as PyTorch does: (1 - t) * x - w_pos * log_sigmoid(x) with w_pos = 1 + (pos_weight - 1) * t, so
/// no |x| overflows. pos_weight broadcasts to the input (one per class, [C]); weight rescales each
/// element's loss.   binary_cross_entropy_with_logits(logits, labels, Reduction::Mean, pos_weight)
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::Mean, const Tensor& pos_weight = Tensor(),
                                        const Tensor& weight = Tensor());
/// log(sigmoid(x)), stable for any x (the building block of the BCE above).   log_sigmoid(x)
Tensor log_sigmoid(const Tensor& x);

}  // namespace minidl
