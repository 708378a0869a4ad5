#pragma once
// Margin and embedding losses, as torch.nn.functional has them: compositions of differentiable ops
// (so they run on every device and get their gradients from those ops). Each takes PyTorch's
// arguments in PyTorch's order and a Reduction (Mean, Sum or None; BatchMean is kl_div's alone).
#include "core/tensor.h"
#include "ops/loss.h"

namespace minidl {

/// max(0, -target * (input1 - input2) + margin), target of 1 or -1 saying which input should rank
/// higher; input1, input2 and target have one number of dims and broadcast together.
///   margin_ranking_loss(scores_a, scores_b, ones({n}), 0.5)
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                           Reduction reduction = Reduction::Mean);

/// input where target is 1, max(0, margin - input) where target is -1 (a target of neither takes
/// both terms, as PyTorch's); target broadcasts to the input.   hinge_embedding_loss(distances, labels)
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            Reduction reduction = Reduction::Mean);

/// log(1 + exp(-target * input)), the two-class logistic loss for targets of 1 or -1, computed
/// stably; target broadcasts to the input.   soft_margin_loss(scores, labels)
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// 1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1 (0 otherwise), with
/// cos = sum(x1 * x2) / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12)) as PyTorch computes it: input1 and
/// input2 [N, D] with target [N], or [D] with a 0-d target. None gives [N] (or 0-d).
///   cosine_embedding_loss(a, b, labels, 0.2)
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                             Reduction reduction = Reduction::Mean);

/// max(0, margin + d(anchor, positive) - d(anchor, negative)) with d = pairwise_distance(., ., p,
/// eps); with `swap`, d(anchor, negative) is replaced by min(d(anchor, negative), d(positive,
/// negative)). anchor, positive and negative have one number of dims ([N, D] or [D]).
///   triplet_margin_loss(a, p, n), triplet_margin_loss(a, p, n, 1.0, 2.0, 1e-6, /*swap=*/true)
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin = 1.0,
                           double p = 2.0, double eps = 1e-6, bool swap = false, Reduction reduction = Reduction::Mean);

/// Multi-label one-vs-all logistic loss: -(t log sigmoid(x) + (1 - t) log sigmoid(-x)), times weight
/// (broadcast to the input, usually [C]) when given, averaged over the last (class) dim: input and
/// target of one shape [N, C] (or [C]); None gives [N].
///   multilabel_soft_margin_loss(logits, labels), multilabel_soft_margin_loss(logits, labels, class_weight)
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                   Reduction reduction = Reduction::Mean);

/// Multi-class hinge loss: for each sample, sum over the classes i != y of
/// weight[y] * max(0, margin - x[y] + x[i])^p, divided by C; input [N, C] (or [C]), target int64
/// class indices [N] (or 0-d / [1]), p 1 or 2, weight [C] optional. None gives [N]. Reads the
/// target's bounds on the host to check them (a device sync on CUDA).
///   multi_margin_loss(scores, labels), multi_margin_loss(scores, labels, 2, 0.5, class_weight)
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p = 1, double margin = 1.0,
                         const Tensor& weight = {}, Reduction reduction = Reduction::Mean);

/// Multi-class multi-label hinge loss: target int64 of the input's shape [N, C] (or [C]) lists each
/// sample's classes, ended by the first -1; each sample's loss is the sum over its classes j and
/// the classes i not among them of max(0, 1 - (x[j] - x[i])), divided by C. None gives [N] (0-d for
/// a [C] input). Reads the target's bounds on the host to check them (a device sync on CUDA).
///   multilabel_margin_loss(scores, Tensor::from_vector<int64_t>({3, 0, -1, 1}, {1, 4}))
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace minidl
