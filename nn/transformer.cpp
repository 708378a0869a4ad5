// torch.nn's transformer modules (the eager path; PyTorch's fast path for inference on nested
// tensors computes the same values): the encoder and decoder layers, their stacks, Transformer.
#include "nn/transformer.h"

#include <limits>

#include "nn/init.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/compare.h"
#include "ops/scan.h"

namespace minidl::nn {

namespace {

void check_layer_options(const char* layer, const std::string& activation, int64_t dim_feedforward) {
  MINIDL_CHECK(activation == "relu" || activation == "gelu", layer,
               ": expected activation \"relu\" or \"gelu\", got \"", activation, "\"");
  MINIDL_CHECK(dim_feedforward > 0, layer, ": expected a positive dim_feedforward, got ", dim_feedforward);
}

// linear2(dropout(act(linear1(x)))), the feed-forward block of both layers. With the dropout the
// identity (p = 0, or eval) it is one op: for GELU one whose backward makes the activation again
// instead of keeping it, for ReLU one whose two products share kernels on CUDA.
Tensor feed_forward(const Tensor& x, const std::string& activation, LinearImpl& linear1, DropoutImpl& dropout,
                    LinearImpl& linear2) {
  const bool relu = activation == "relu";
  if (!dropout.is_training() || dropout.options.p() == 0)
    return relu ? linear1.forward_relu_linear(x, linear2) : linear1.forward_gelu_linear(x, linear2);
  Tensor hidden = relu ? linear1.forward_relu(x) : gelu(linear1.forward(x));
  return linear2.forward(dropout.forward(hidden));
}

MultiheadAttention make_attention(int64_t d_model, int64_t nhead, double dropout, bool bias, bool batch_first) {
  return MultiheadAttention(
      MultiheadAttentionOptions(d_model, nhead).dropout(dropout).bias(bias).batch_first(batch_first));
}

LayerNorm make_norm(int64_t d_model, double eps, bool bias) {
  return LayerNorm(LayerNormOptions({d_model}).eps(eps).bias(bias));
}

// The attention block's output before its residual: attention(query, kv, kv) without weights.
Tensor attend(MultiheadAttentionImpl& attn, const Tensor& query, const Tensor& kv, const Tensor& mask,
              const Tensor& key_padding_mask, bool is_causal) {
  return std::get<0>(attn.forward(query, kv, kv, key_padding_mask, /*need_weights=*/false, mask,
                                  /*average_attn_weights=*/true, is_causal));
}

// A stack's layers: num_layers deep copies of `layer`, as PyTorch's _get_clones.
ModuleList copies_of(const char* stack, const std::shared_ptr<Module>& layer, int64_t num_layers) {
  MINIDL_CHECK(layer != nullptr, stack, ": the layer to copy is empty");
  MINIDL_CHECK(num_layers > 0, stack, ": expected a positive num_layers, got ", num_layers);
  ModuleList list;
  for (int64_t i = 0; i < num_layers; ++i) list->push_back(layer->clone());
  return list;
}

}  // namespace

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options)
    : options(options) {
  check_layer_options("TransformerEncoderLayer", options.activation(), options.dim_feedforward());
  const int64_t d = options.d_model(), ff = options.dim_feedforward();
  const bool bias = options.bias();
  // Registered in PyTorch's order, so that state_dict keys and parameters() line up with its.
  self_attn = register_module("self_attn",
                              make_attention(d, options.nhead(), options.dropout(), bias, options.batch_first()));
  linear1 = register_module("linear1", Linear(LinearOptions(d, ff).bias(bias)));
  dropout = register_module("dropout", Dropout(options.dropout()));
  linear2 = register_module("linear2", Linear(LinearOptions(ff, d).bias(bias)));
  norm1 = register_module("norm1", make_norm(d, options.layer_norm_eps(), bias));
  norm2 = register_module("norm2", make_norm(d, options.layer_norm_eps(), bias));
  dropout1 = register_module("dropout1", Dropout(options.dropout()));
  dropout2 = register_module("dropout2", Dropout(options.dropout()));
}

Tensor TransformerEncoderLayerImpl::self_attention_block(const Tensor& x, const Tensor& mask,
                                                         const Tensor& key_padding_mask, bool is_causal) {
  return dropout1->forward(attend(*self_attn, x, x, mask, key_padding_mask, is_causal));
}

Tensor TransformerEncoderLayerImpl::feed_forward_block(const Tensor& x) {
  return dropout2->forward(feed_forward(x, options.activation(), *linear1, *dropout, *linear2));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask, bool is_causal) {
  Tensor x = src;
  if (options.norm_first()) {
    x = x + self_attention_block(norm1->forward(x), src_mask, src_key_padding_mask, is_causal);
    return x + feed_forward_block(norm2->forward(x));
  }
  x = norm1->forward(x + self_attention_block(x, src_mask, src_key_padding_mask, is_causal));
  return norm2->forward(x + feed_forward_block(x));
}

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderOptions& options) : options(options) {
  layers = register_module("layers",
                           copies_of("TransformerEncoder", options.encoder_layer().ptr(), options.num_layers()));
  norm = options.norm();  // shared with the caller, as PyTorch keeps the module it is given
  if (norm) register_module("norm", norm);
}

std::shared_ptr<Module> TransformerEncoderImpl::clone(const std::optional<Device>& device) const {
  TransformerEncoderOptions copy_options = options;
  if (norm) copy_options.norm(norm->clone());
  auto copy = std::make_shared<TransformerEncoderImpl>(copy_options);
  copy_state_into(*copy, device);
  return copy;
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask,
                                       bool is_causal) {
  Tensor x = src;
  for (const auto& layer : *layers) {
    x = std::static_pointer_cast<TransformerEncoderLayerImpl>(layer)->forward(x, mask, src_key_padding_mask, is_causal);
  }
  return norm ? norm->forward(x) : x;
}

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options)
    : options(options) {
  check_layer_options("TransformerDecoderLayer", options.activation(), options.dim_feedforward());
  const int64_t d = options.d_model(), ff = options.dim_feedforward();
  const bool bias = options.bias();
  const double eps = options.layer_norm_eps();
  // Registered in PyTorch's order, so that state_dict keys and parameters() line up with its.
  self_attn = register_module("self_attn",
                              make_attention(d, options.nhead(), options.dropout(), bias, options.batch_first()));
  multihead_attn = register_module("multihead_attn",
                                   make_attention(d, options.nhead(), options.dropout(), bias, options.batch_first()));
  linear1 = register_module("linear1", Linear(LinearOptions(d, ff).bias(bias)));
  dropout = register_module("dropout", Dropout(options.dropout()));
  linear2 = register_module("linear2", Linear(LinearOptions(ff, d).bias(bias)));
  norm1 = register_module("norm1", make_norm(d, eps, bias));
  norm2 = register_module("norm2", make_norm(d, eps, bias));
  norm3 = register_module("norm3", make_norm(d, eps, bias));
  dropout1 = register_module("dropout1", Dropout(options.dropout()));
  dropout2 = register_module("dropout2", Dropout(options.dropout()));
  dropout3 = register_module("dropout3", Dropout(options.dropout()));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                            const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                            const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                            bool memory_is_causal) {
  MINIDL_CHECK(memory.defined(), "TransformerDecoderLayer: memory (the encoder's output) is undefined");
  auto self_block = [&](const Tensor& x) {
    return dropout1->forward(attend(*self_attn, x, x, tgt_mask, tgt_key_padding_mask, tgt_is_causal));
  };
  auto memory_block = [&](const Tensor& x) {
    return dropout2->forward(
        attend(*multihead_attn, x, memory, memory_mask, memory_key_padding_mask, memory_is_causal));
  };
  auto ff_block = [&](const Tensor& x) {
    return dropout3->forward(feed_forward(x, options.activation(), *linear1, *dropout, *linear2));
  };
  Tensor x = tgt;
  if (options.norm_first()) {
    x = x + self_block(norm1->forward(x));
    x = x + memory_block(norm2->forward(x));
    return x + ff_block(norm3->forward(x));
  }
  x = norm1->forward(x + self_block(x));
  x = norm2->forward(x + memory_block(x));
  return norm3->forward(x + ff_block(x));
}

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerDecoderOptions& options) : options(options) {
  layers = register_module("layers",
                           copies_of("TransformerDecoder", options.decoder_layer().ptr(), options.num_layers()));
  norm = options.norm();  // shared with the caller, as PyTorch keeps the module it is given
  if (norm) register_module("norm", norm);
}

std::shared_ptr<Module> TransformerDecoderImpl::clone(const std::optional<Device>& device) const {
  TransformerDecoderOptions copy_options = options;
  if (norm) copy_options.norm(norm->clone());
  auto copy = std::make_shared<TransformerDecoderImpl>(copy_options);
  copy_state_into(*copy, device);
  return copy;
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                       const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask, bool tgt_is_causal,
                                       bool memory_is_causal) {
  Tensor x = tgt;
  for (const auto& layer : *layers) {
    x = std::static_pointer_cast<TransformerDecoderLayerImpl>(layer)->forward(
        x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
        memory_is_causal);
  }
  return norm ? norm->forward(x) : x;
}

TransformerImpl::TransformerImpl(const TransformerOptions& options) : options(options) {
  const int64_t d = options.d_model();
  const TransformerEncoderLayer encoder_layer(TransformerEncoderLayerOptions(d, options.nhead())
                                                  .dim_feedforward(options.dim_feedforward())
                                                  .dropout(options.dropout())
                                                  .activation(options.activation())
                                                  .layer_norm_eps(options.layer_norm_eps())
                                                  .batch_first(options.batch_first())
                                                  .norm_first(options.norm_first())
                                                  .bias(options.bias()));
  const TransformerDecoderLayer decoder_layer(TransformerDecoderLayerOptions(d, options.nhead())
                                                  .dim_feedforward(options.dim_feedforward())
                                                  .dropout(options.dropout())
                                                  .activation(options.activation())
                                                  .layer_norm_eps(options.layer_norm_eps())
                                                  .batch_first(options.batch_first())
                                                  .norm_first(options.norm_first())
                                                  .bias(options.bias()));
  encoder = register_module("encoder", TransformerEncoder(encoder_layer, options.num_encoder_layers(),
                                                          make_norm(d, options.layer_norm_eps(), options.bias())));
  decoder = register_module("decoder", TransformerDecoder(decoder_layer, options.num_decoder_layers(),
                                                          make_norm(d, options.layer_norm_eps(), options.bias())));
  for (Tensor& p : parameters())  // PyTorch's _reset_parameters
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask, const Tensor& tgt_mask,
                                const Tensor& memory_mask, const Tensor& src_key_padding_mask,
                                const Tensor& tgt_key_padding_mask, const Tensor& memory_key_padding_mask,
                                bool src_is_causal, bool tgt_is_causal, bool memory_is_causal) {
  MINIDL_CHECK(src.defined() && tgt.defined(), "Transformer: src and tgt must both be defined");
  const int64_t batch_dim = options.batch_first() ? 0 : 1;
  MINIDL_CHECK(src.dim() != 3 || (tgt.dim() == 3 && src.size(batch_dim) == tgt.size(batch_dim)),
               "Transformer: the batch sizes of src ", src.shape(), " and tgt ", tgt.shape(), " must be equal (dim ",
               batch_dim, options.batch_first() ? ", batch_first" : "", ")");
  const int64_t d = options.d_model();
  MINIDL_CHECK(src.dim() >= 1 && tgt.dim() >= 1 && src.size(-1) == d && tgt.size(-1) == d,
               "Transformer: the feature sizes of src ", src.shape(), " and tgt ", tgt.shape(), " must equal d_model (",
               options.d_model(), ")");
  const Tensor memory = encoder->forward(src, src_mask, src_key_padding_mask, src_is_causal);
  return decoder->forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                          tgt_is_causal, memory_is_causal);
}

Tensor TransformerImpl::generate_square_subsequent_mask(int64_t sz, DType dtype, Device device) {
  return nn::generate_square_subsequent_mask(sz, dtype, device);
}

Tensor generate_square_subsequent_mask(int64_t sz, DType dtype, Device device) {
  MINIDL_CHECK(sz >= 0, "generate_square_subsequent_mask: expected a size >= 0, got ", sz);
  MINIDL_CHECK(is_floating(dtype), "generate_square_subsequent_mask: expected a floating dtype, got ", dtype);
  // Positions by cumsum on the device rather than triu, whose arange is copied from the host: a
  // synchronizing copy that no CUDA graph capture may contain.
  Tensor row = cumsum(ones({sz, 1}, kFloat32, device), 0), col = cumsum(ones({1, sz}, kFloat32, device), 1);
  return masked_fill(zeros({sz, sz}, dtype, device), gt(col, row), -std::numeric_limits<double>::infinity());
}

}  // namespace minidl::nn
