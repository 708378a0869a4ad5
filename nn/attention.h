#pragma once
#include <optional>
#include <tuple>

#include "nn/linear.h"
#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads) : embed_dim_(embed_dim), num_heads_(num_heads) {}
  MINIDL_ARG(int64_t, embed_dim);
  MINIDL_ARG(int64_t, num_heads);
  /// Dropout on the attention weights while training.
  MINIDL_ARG(double, dropout) = 0.0;
  /// Biases of the input and output projections.
  MINIDL_ARG(bool, bias) = true;
  /// Inputs and output [N, L, E] instead of [L, N, E].
  MINIDL_ARG(bool, batch_first) = false;
  /// Features of key and value (embed_dim when unset): other sizes get separate q, k, v projections.
  MINIDL_ARG(std::optional<int64_t>, kdim);
  MINIDL_ARG(std::optional<int64_t>, vdim);
  /// Learned bias_k and bias_v [1, 1, E], appended to the projected keys and values as one more key.
  MINIDL_ARG(bool, add_bias_kv) = false;
  /// A key and value of zeros appended to every head (after add_bias_kv's).
  MINIDL_ARG(bool, add_zero_attn) = false;
};

/// torch.nn.MultiheadAttention: heads of scaled dot-product attention between projections of
/// query [L, N, E], key [S, N, kdim] and value [S, N, vdim] ([N, L, E] ... with batch_first; [L, E]
/// ... unbatched), then an output projection. Returns (output like query, weights) with weights
/// [N, L, S] averaged over the heads, [N, H, L, S] per head, or undefined without need_weights (the
/// fused attention path, where the device has one). key_padding_mask [N, S]: true (or -inf) = a key
/// to ignore; attn_mask [L, S] or [N*H, L, S]: true = may NOT attend (the opposite of
/// scaled_dot_product_attention's bool mask, as PyTorch), or floating, added to the scores.
/// is_causal is PyTorch's hint that attn_mask is the causal mask (it must be given). With
/// add_bias_kv or add_zero_attn the keys gain one position each, and the masks a column that
/// attends (the weights are [.., L, S + 1 or 2]), as PyTorch pads them.
///   nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(64, 4).batch_first(true));
///   auto [y, w] = mha->forward(x, x, x);
class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(MultiheadAttentionImpl)
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                     bool is_causal = false);
  std::string name() const override { return "MultiheadAttention"; }
  /// xavier_uniform_ projection weights, zero biases (the output projection's weight keeps Linear's init),
  /// xavier_normal_ bias_k and bias_v.
  void reset_parameters();

  MultiheadAttentionOptions options;
  /// [3E, E] when kdim == vdim == embed_dim; else q_proj_weight [E, E], k_proj_weight [E, kdim],
  /// v_proj_weight [E, vdim].
  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight;
  Tensor in_proj_bias;  // [3E] with bias
  Tensor bias_k, bias_v;  // [1, 1, E] with add_bias_kv
  Linear out_proj{nullptr};

 private:
  int64_t kdim() const { return options.kdim().value_or(options.embed_dim()); }
  int64_t vdim() const { return options.vdim().value_or(options.embed_dim()); }
};
MINIDL_MODULE(MultiheadAttention);

}  // namespace minidl::nn
