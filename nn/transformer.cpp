// TransformerEncoderLayer and TransformerEncoder as torch.nn's (the eager path; PyTorch's fast path
// for inference on nested tensors computes the same values).
#include "nn/transformer.h"

#include <limits>

#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/compare.h"
#include "ops/scan.h"

namespace minidl::nn {

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options)
    : options(options) {
  const std::string& act = options.activation();
  MINIDL_CHECK(act == "relu" || act == "gelu", "TransformerEncoderLayer: expected activation \"relu\" or \"gelu\", got \"",
               act, "\"");
  MINIDL_CHECK(options.dim_feedforward() > 0, "TransformerEncoderLayer: expected a positive dim_feedforward, got ",
               options.dim_feedforward());
  const int64_t d = options.d_model(), ff = options.dim_feedforward();
  const bool bias = options.bias();
  // Registered in PyTorch's order, so that state_dict keys and parameters() line up with its.
  self_attn = register_module("self_attn", MultiheadAttention(MultiheadAttentionOptions(d, options.nhead())
                                                                  .dropout(options.dropout())
                                                                  .bias(bias)
                                                                  .batch_first(options.batch_first())));
  linear1 = register_module("linear1", Linear(LinearOptions(d, ff).bias(bias)));
  dropout = register_module("dropout", Dropout(options.dropout()));
  linear2 = register_module("linear2", Linear(LinearOptions(ff, d).bias(bias)));
  norm1 = register_module("norm1", LayerNorm(LayerNormOptions({d}).eps(options.layer_norm_eps()).bias(bias)));
  norm2 = register_module("norm2", LayerNorm(LayerNormOptions({d}).eps(options.layer_norm_eps()).bias(bias)));
  dropout1 = register_module("dropout1", Dropout(options.dropout()));
  dropout2 = register_module("dropout2", Dropout(options.dropout()));
}

Tensor TransformerEncoderLayerImpl::self_attention_block(const Tensor& x, const Tensor& mask,
                                                         const Tensor& key_padding_mask, bool is_causal) {
  auto [attended, weights] = self_attn->forward(x, x, x, key_padding_mask, /*need_weights=*/false, mask,
                                                /*average_attn_weights=*/true, is_causal);
  return dropout1->forward(attended);
}

Tensor TransformerEncoderLayerImpl::feed_forward_block(const Tensor& x) {
  // With the dropout between the two layers the identity (p = 0, or eval), linear2(act(linear1(x)))
  // is one op: for GELU one whose backward makes the activation again instead of keeping it, for
  // ReLU one whose two products share kernels on CUDA.
  if (!dropout->is_training() || dropout->options.p() == 0) {
    const bool relu = options.activation() == "relu";
    return dropout2->forward(relu ? linear1->forward_relu_linear(x, *linear2)
                                  : linear1->forward_gelu_linear(x, *linear2));
  }
  Tensor hidden = options.activation() == "relu" ? linear1->forward_relu(x) : gelu(linear1->forward(x));
  return dropout2->forward(linear2->forward(dropout->forward(hidden)));
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
  MINIDL_CHECK(options.encoder_layer().get() != nullptr, "TransformerEncoder: the encoder_layer is empty");
  MINIDL_CHECK(options.num_layers() > 0, "TransformerEncoder: expected a positive num_layers, got ",
               options.num_layers());
  layers = register_module("layers", ModuleList());
  for (int64_t i = 0; i < options.num_layers(); ++i) layers->push_back(options.encoder_layer()->clone());
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

Tensor generate_square_subsequent_mask(int64_t sz, DType dtype, Device device) {
  MINIDL_CHECK(sz >= 0, "generate_square_subsequent_mask: expected a size >= 0, got ", sz);
  MINIDL_CHECK(is_floating(dtype), "generate_square_subsequent_mask: expected a floating dtype, got ", dtype);
  // Positions by cumsum on the device rather than triu, whose arange is copied from the host: a
  // synchronizing copy that no CUDA graph capture may contain.
  Tensor row = cumsum(ones({sz, 1}, kFloat32, device), 0), col = cumsum(ones({1, sz}, kFloat32, device), 1);
  return masked_fill(zeros({sz, sz}, dtype, device), gt(col, row), -std::numeric_limits<double>::infinity());
}

}  // namespace minidl::nn
