#pragma once
// torch.nn's transformer modules: the encoder and decoder layers, their stacks, and Transformer.
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

struct TransformerDecoderLayerOptions {
  TransformerDecoderLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  MINIDL_ARG(int64_t, d_model);
  MINIDL_ARG(int64_t, nhead);
  MINIDL_ARG(int64_t, dim_feedforward) = 2048;
  MINIDL_ARG(double, dropout) = 0.1;
  /// "relu" or "gelu".
  MINIDL_ARG(std::string, activation) = "relu";
  MINIDL_ARG(double, layer_norm_eps) = 1e-5;
  /// Inputs [N, T, E] instead of [T, N, E].
  MINIDL_ARG(bool, batch_first) = false;
  /// Pre-norm (x + block(norm(x)) for each block) instead of post-norm (norm(x + block(x))).
  MINIDL_ARG(bool, norm_first) = false;
  /// Biases of the linear layers and the layer norms.
  MINIDL_ARG(bool, bias) = true;
};

/// torch.nn.TransformerDecoderLayer: self-attention over the target, attention from the target to
/// the encoder's output (memory), and a feed-forward block, each with dropout, a residual
/// connection and a LayerNorm (after, or before with norm_first).
///   nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions(64, 4).batch_first(true));
///   Tensor y = layer->forward(tgt, memory, nn::generate_square_subsequent_mask(tgt.size(1)));
class TransformerDecoderLayerImpl : public Module {
 public:
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead)) {}
  explicit TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(TransformerDecoderLayerImpl)
  /// tgt [T, N, E] and memory [S, N, E] ([N, T, E] and [N, S, E] with batch_first; unbatched [T, E]
  /// and [S, E]). tgt_mask ([T, T]) and tgt_key_padding_mask ([N, T]) go to the self-attention,
  /// memory_mask ([T, S]) and memory_key_padding_mask ([N, S]) to the attention over memory, as
  /// MultiheadAttention's attn_mask and key_padding_mask; each is_causal is that mask's hint.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {},
                 bool tgt_is_causal = false, bool memory_is_causal = false);
  std::string name() const override { return "TransformerDecoderLayer"; }

  TransformerDecoderLayerOptions options;
  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  Linear linear1{nullptr}, linear2{nullptr};
  Dropout dropout{nullptr}, dropout1{nullptr}, dropout2{nullptr}, dropout3{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
};
MINIDL_MODULE(TransformerDecoderLayer);

struct TransformerDecoderOptions {
  TransformerDecoderOptions(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : decoder_layer_(std::move(decoder_layer)), num_layers_(num_layers) {}
  /// The layer every layer of the stack is a deep copy of.
  MINIDL_ARG(TransformerDecoderLayer, decoder_layer);
  MINIDL_ARG(int64_t, num_layers);
  /// A module applied after the last layer (a LayerNorm), or none.
  MINIDL_ARG(std::shared_ptr<Module>, norm);

 public:
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  TransformerDecoderOptions& norm(const Holder& holder) {
    norm_ = holder.ptr();
    return *this;
  }
};

/// torch.nn.TransformerDecoder: num_layers deep copies of decoder_layer ("layers.0", ...), each
/// reading the same memory, then norm.
///   nn::TransformerDecoder decoder(layer, 6, nn::LayerNorm(Shape{64}));
class TransformerDecoderImpl : public Module {
 public:
  explicit TransformerDecoderImpl(const TransformerDecoderOptions& options);
  TransformerDecoderImpl(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : TransformerDecoderImpl(TransformerDecoderOptions(std::move(decoder_layer), num_layers)) {}
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  TransformerDecoderImpl(TransformerDecoderLayer decoder_layer, int64_t num_layers, const Holder& norm)
      : TransformerDecoderImpl(TransformerDecoderOptions(std::move(decoder_layer), num_layers).norm(norm)) {}
  /// A deep copy: its own layers and its own copy of norm.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  /// As TransformerDecoderLayer's forward; every mask goes to every layer.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {},
                 bool tgt_is_causal = false, bool memory_is_causal = false);
  std::string name() const override { return "TransformerDecoder"; }

  TransformerDecoderOptions options;
  ModuleList layers{nullptr};
  std::shared_ptr<Module> norm;
};
MINIDL_MODULE(TransformerDecoder);

struct TransformerOptions {
  TransformerOptions() = default;
  TransformerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}
  MINIDL_ARG(int64_t, d_model) = 512;
  MINIDL_ARG(int64_t, nhead) = 8;
  MINIDL_ARG(int64_t, num_encoder_layers) = 6;
  MINIDL_ARG(int64_t, num_decoder_layers) = 6;
  MINIDL_ARG(int64_t, dim_feedforward) = 2048;
  MINIDL_ARG(double, dropout) = 0.1;
  /// "relu" or "gelu".
  MINIDL_ARG(std::string, activation) = "relu";
  MINIDL_ARG(double, layer_norm_eps) = 1e-5;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(bool, norm_first) = false;
  MINIDL_ARG(bool, bias) = true;
};

/// torch.nn.Transformer ("Attention Is All You Need"): a TransformerEncoder and a
/// TransformerDecoder, each ending in a LayerNorm, every matrix initialized by xavier_uniform_ as
/// PyTorch's _reset_parameters does. (PyTorch's custom_encoder and custom_decoder are not taken.)
///   nn::Transformer model(nn::TransformerOptions(64, 4).num_encoder_layers(2).num_decoder_layers(2));
///   Tensor out = model->forward(src, tgt, {}, model->generate_square_subsequent_mask(tgt.size(0)));
class TransformerImpl : public Module {
 public:
  TransformerImpl() : TransformerImpl(TransformerOptions()) {}
  explicit TransformerImpl(const TransformerOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(TransformerImpl)
  /// src [S, N, E], tgt [T, N, E] ([N, S, E], [N, T, E] with batch_first) -> [T, N, E]: memory =
  /// encoder(src, src_mask, src_key_padding_mask), then decoder(tgt, memory, ...), the masks as
  /// TransformerDecoderLayer's forward takes them.
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = {}, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& src_key_padding_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {},
                 bool src_is_causal = false, bool tgt_is_causal = false, bool memory_is_causal = false);
  std::string name() const override { return "Transformer"; }
  /// nn::generate_square_subsequent_mask, as the static method of PyTorch's class.
  static Tensor generate_square_subsequent_mask(int64_t sz, DType dtype = kFloat32, Device device = Device::cpu());

  TransformerOptions options;
  TransformerEncoder encoder{nullptr};
  TransformerDecoder decoder{nullptr};
};
MINIDL_MODULE(Transformer);

/// The causal mask of a sequence of sz: float32 [sz, sz], -inf above the diagonal and 0 elsewhere
/// (an additive attn_mask).   Tensor mask = nn::generate_square_subsequent_mask(L);
Tensor generate_square_subsequent_mask(int64_t sz, DType dtype = kFloat32, Device device = Device::cpu());

}  // namespace minidl::nn
