#pragma once
// Losses, with PyTorch's names, defaults and reductions.
#include "core/tensor.h"

namespace minidl {

/// How a loss folds its per-element values: their mean, their sum, or none (the same shape as the
/// input). BatchMean, kl_div's alone, is the sum divided by the batch size (the input's first dim).
enum class Reduction { Mean, Sum, None, BatchMean };

/// Negative log-likelihood of int64 class indices `target` [N] under `input` [N, C] (log-probabilities),
/// or over spatial dims, target [N, d1, ...] under input [N, C, d1, ...], as torch::nll_loss: each
/// element's loss is -weight[t] * input[i, t, ...] (weight [C] optional, ones by default); elements
/// whose target is ignore_index count for nothing. Mean divides by the sum of weight[t] over the
/// elements not ignored (NaN when every one is ignored); None gives target's shape.
///   nll_loss(log_softmax(logits, 1), target), nll_loss(lp, target, {}, Reduction::Sum, /*ignore_index=*/0)
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);
/// nll_loss(log_softmax(input, 1), target, ...), over [N, C] or [N, C, d1, ...] as nll_loss, with
/// label smoothing as PyTorch's: with eps = label_smoothing, each element's loss is
/// (1 - eps) * nll + eps * mean over classes of -log p (both weighted by `weight` when given, 0 where
/// ignored), reduced as nll_loss. The defaults on [N, C] run one fused kernel each way.
///   cross_entropy(logits, target), cross_entropy(logits, target, {}, Reduction::Mean, -100, 0.1)
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     Reduction reduction = Reduction::Mean, int64_t ignore_index = -100, double label_smoothing = 0.0);
/// (input - target)^2, reduced; input and target of one shape and dtype.   mse_loss(reconstruction, image)
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
/// |input - target|, reduced; input and target of one shape and dtype.   l1_loss(prediction, target)
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
/// Binary cross-entropy of `target` probabilities under logits `input` (one shape), computed stably
/// as PyTorch does: (1 - t) * x - w_pos * log_sigmoid(x) with w_pos = 1 + (pos_weight - 1) * t, so
/// no |x| overflows. weight rescales each element's loss; pos_weight (one per class, [C]) the
/// positive targets'; both broadcast to the input.
///   binary_cross_entropy_with_logits(logits, labels, {}, pos_weight)
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const Tensor& pos_weight = {}, Reduction reduction = Reduction::Mean);
/// Binary cross-entropy of `target` under probabilities `input` in [0, 1] (one shape), as
/// torch::binary_cross_entropy: -weight * (t * log(x) + (1 - t) * log(1 - x)), each log clamped to
/// >= -100 as PyTorch's, so x = 0 or 1 gives a finite loss. weight broadcasts to the input.
///   binary_cross_entropy(sigmoid(logits), labels)
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            Reduction reduction = Reduction::Mean);
/// Kullback-Leibler divergence of `input` (log-probabilities) from `target`, pointwise
/// target * (log(target) - input) (0 where target is 0), or exp(target) * (target - input) when
/// log_target; as torch::kl_div. Reduction::BatchMean gives the mathematical KL divergence per
/// sample (sum / input.size(0)); Mean divides by every element, as PyTorch's.
///   kl_div(log_softmax(student, 1), softmax(teacher, 1), Reduction::BatchMean)
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
              bool log_target = false);
/// Smooth L1: 0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta, with d = input - target;
/// beta = 0 is l1_loss. As torch::smooth_l1_loss.   smooth_l1_loss(boxes, target_boxes)
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
/// Huber: 0.5 * d^2 where |d| <= delta, else delta * (|d| - 0.5 * delta), d = input - target;
/// smooth_l1_loss times delta (beta = delta). As torch::huber_loss.   huber_loss(prediction, target, Reduction::Mean, 2.0)
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1.0);
/// log(sigmoid(x)), stable for any x (the building block of the BCE above).   log_sigmoid(x)
Tensor log_sigmoid(const Tensor& x);

}  // namespace minidl
