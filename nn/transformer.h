#pragma once
#include <memory>
#include <string>

#include "nn/attention.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/options.h"

namespace minidl::nn {

struct TransformerEncoderLayerOptions {
  TransformerEncoderLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  MINIDL_ARG(int64_t, d_model);
  MINIDL_ARG(int64_t, nhead);
  MINIDL_ARG(int64_t, dim_feedforward) = 2048;
  MINIDL_ARG(double, dropout) = 0.1;
  /// "relu" or "gelu".
  MINIDL_ARG(std::string, activation) = "relu";
  MINIDL_ARG(double, layer_norm_eps) = 1e-5;
  /// Inputs [N, L, E] instead of [L, N, E].
  MINIDL_ARG(bool, batch_first) = false;
  /// Pre-norm (x + sa(norm1(x)), then x + ff(norm2(x))) instead of post-norm (norm1(x + sa(x)), ...).
  MINIDL_ARG(bool, norm_first) = false;
  /// Biases of the linear layers and the layer norms.
  MINIDL_ARG(bool, bias) = true;
};

/// torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block, each with dropout, a
/// residual connection and a LayerNorm (after, or before with norm_first).
///   nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(256));
///   Tensor y = layer->forward(x, nn::generate_square_subsequent_mask(x.size(0)));
class TransformerEncoderLayerImpl : public Module {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(TransformerEncoderLayerImpl)
  /// src [L, N, E] ([N, L, E] with batch_first, [L, E] unbatched); src_mask and src_key_padding_mask
  /// as MultiheadAttention's attn_mask and key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  std::string name() const override { return "TransformerEncoderLayer"; }

  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  Linear linear1{nullptr}, linear2{nullptr};
  Dropout dropout{nullptr}, dropout1{nullptr}, dropout2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr};

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& key_padding_mask, bool is_causal);
  Tensor feed_forward_block(const Tensor& x);
};
MINIDL_MODULE(TransformerEncoderLayer);

struct TransformerEncoderOptions {
  TransformerEncoderOptions(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : encoder_layer_(std::move(encoder_layer)), num_layers_(num_layers) {}
  /// The layer every layer of the stack is a deep copy of.
  MINIDL_ARG(TransformerEncoderLayer, encoder_layer);
  MINIDL_ARG(int64_t, num_layers);
  /// A module applied after the last layer (a LayerNorm), or none.
  MINIDL_ARG(std::shared_ptr<Module>, norm);

 public:
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  TransformerEncoderOptions& norm(const Holder& holder) {
    norm_ = holder.ptr();
    return *this;
  }
};

/// torch.nn.TransformerEncoder: num_layers deep copies of encoder_layer ("layers.0", ...), then norm.
///   nn::TransformerEncoder encoder(layer, 6, nn::LayerNorm(Shape{64}));
class TransformerEncoderImpl : public Module {
 public:
  explicit TransformerEncoderImpl(const TransformerEncoderOptions& options);
  TransformerEncoderImpl(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : TransformerEncoderImpl(TransformerEncoderOptions(std::move(encoder_layer), num_layers)) {}
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  TransformerEncoderImpl(TransformerEncoderLayer encoder_layer, int64_t num_layers, const Holder& norm)
      : TransformerEncoderImpl(TransformerEncoderOptions(std::move(encoder_layer), num_layers).norm(norm)) {}
  /// A deep copy: its own layers and its own copy of norm.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// src as TransformerEncoderLayer's; mask and src_key_padding_mask go to every layer.
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  std::string name() const override { return "TransformerEncoder"; }

  TransformerEncoderOptions options;
  ModuleList layers{nullptr};
  std::shared_ptr<Module> norm;
};
MINIDL_MODULE(TransformerEncoder);

/// The causal mask of a sequence of sz: float32 [sz, sz], -inf above the diagonal and 0 elsewhere
/// (an additive attn_mask).   Tensor mask = nn::generate_square_subsequent_mask(L);
Tensor generate_square_subsequent_mask(int64_t sz, DType dtype = kFloat32, Device device = Device::cpu());

}  // namespace minidl::nn
