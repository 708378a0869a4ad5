#pragma once
// Embedding lookups: rows of a weight table picked by integer ids (torch.nn.functional.embedding).
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// The rows of weight [V, D] picked by `indices` (int64 or int32, any shape): [..., D], as ATen's
/// embedding (weight first; nn::functional::embedding takes PyTorch's (input, weight) order). An id
/// outside [0, V) is an error naming it. The gradient of weight sums the gradient rows of each id;
/// the row of `padding_idx` (negative counts from V) gets none, and `scale_grad_by_freq` divides
/// each row by its id's count in `indices`. On CUDA the backward gives the same bits on every run.
///   Tensor x = embedding(token_table, tokens);   // tokens [B, T] -> x [B, T, D]
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt,
                 bool scale_grad_by_freq = false, bool sparse = false);

/// embedding(weight, indices) + embedding(other_weight, other_indices), other_indices broadcast
/// against indices as the addition broadcasts them: a transformer's token and position embeddings.
/// On CUDA, where the second ids repeat along the leading dims of the first, one kernel looks up
/// both rows and adds them (the same bits as the composition); elsewhere it is that composition.
///   Tensor x = embedding_sum(wte, tokens, wpe, arange(T, kInt64, device));   // [B, T] and [T] -> [B, T, D]
Tensor embedding_sum(const Tensor& weight, const Tensor& indices, const Tensor& other_weight,
                     const Tensor& other_indices);

class Kernels;

namespace detail {
/// embedding_sum's lookups where one kernel takes both (the second ids tiling the first), shared
/// with the ops that fuse them further (embedding_dropout_layer_norm): the flat int64 ids, the sizes,
/// and the two tables' gradients from the sum's.
struct EmbeddingSumRows {
  Tensor ids, other_ids, plan, other_plan;  // plans: Kernels::embedding_backward_plan's, where made
  int64_t n = 0, m = 0, width = 0, rows = 0, other_rows = 0;
  Shape out_shape;  // the ids' broadcast shape and the width
  void make_plans(Kernels& kernels, bool weight, bool other_weight);
  /// {weight's, other_weight's} gradient from the sum's g_rows [n, width] (undefined where !needs[i]).
  std::vector<Tensor> backward(const Tensor& g_rows, const std::vector<bool>& needs) const;
};
/// The checks of embedding_sum (named `op` in errors); nothing where the second ids do not tile the first.
std::optional<EmbeddingSumRows> embedding_sum_rows(const char* op, const Tensor& weight, const Tensor& indices,
                                                   const Tensor& other_weight, const Tensor& other_indices);
}  // namespace detail

/// Rescales in place, without recording, each row of weight [V, D] named in `indices` whose
/// `norm_type`-norm exceeds max_norm to norm max_norm (by max_norm / (norm + 1e-7)), as
/// torch.embedding_renorm_; what Embedding's max_norm runs before each lookup.
///   embedding_renorm_(table, tokens, 1.0, 2.0);
Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm, double norm_type = 2.0);

}  // namespace minidl
