// MultiheadAttention as torch.nn.functional.multi_head_attention_forward computes it. Inside, every
// tensor is batch-first: [N, L, E] in, heads split to [N, H, L, E/H], attention, heads joined back,
// output projection, then the caller's layout again. Masks become one additive float mask that
// broadcasts against [N, H, L, S]. need_weights=false goes through scaled_dot_product_attention
// (fused where the device can, which with is_causal and no padding mask means no mask tensor at all);
// need_weights=true through its composition, which hands back the weights it multiplied v by.
#include "nn/attention.h"

#include <limits>

#include "nn/init.h"
#include "ops/attention.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl::nn {

namespace {

constexpr const char* kName = "MultiheadAttention";

// A bool mask (true = masked out) as an additive one (-inf there, 0 elsewhere); a floating one in dtype.
Tensor additive_mask(const Tensor& mask, DType dtype, const char* what) {
  if (!mask.defined()) return mask;
  if (mask.dtype() == kBool) {
    return masked_fill(zeros(mask.shape(), dtype, mask.device()), mask, -std::numeric_limits<double>::infinity());
  }
  MINIDL_CHECK(is_floating(mask.dtype()), kName, ": expected a bool or floating ", what, ", got ", mask.dtype());
  return mask.to(dtype);
}

// [N, T, E] -> [N, H, T, E/H]
Tensor split_heads(const Tensor& x, int64_t heads) {
  return transpose(reshape(x, {x.size(0), x.size(1), heads, x.size(2) / heads}), 1, 2);
}

}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options) : options(options) {
  const int64_t E = options.embed_dim(), H = options.num_heads();
  MINIDL_CHECK(E > 0 && H > 0, kName, ": expected positive embed_dim and num_heads, got ", E, " and ", H);
  MINIDL_CHECK(E % H == 0, kName, ": embed_dim (", E, ") must be divisible by num_heads (", H, ")");
  MINIDL_CHECK(kdim() > 0 && vdim() > 0, kName, ": expected positive kdim and vdim, got ", kdim(), " and ", vdim());
  MINIDL_CHECK(options.dropout() >= 0 && options.dropout() <= 1, kName, ": expected dropout in [0, 1], got ",
               options.dropout());
  if (kdim() == E && vdim() == E) {
    in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * E, E}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", Tensor::empty({E, E}));
    k_proj_weight = register_parameter("k_proj_weight", Tensor::empty({E, kdim()}));
    v_proj_weight = register_parameter("v_proj_weight", Tensor::empty({E, vdim()}));
  }
  if (options.bias()) in_proj_bias = register_parameter("in_proj_bias", Tensor::empty({3 * E}));
  if (options.add_bias_kv()) {
    bias_k = register_parameter("bias_k", Tensor::empty({1, 1, E}));
    bias_v = register_parameter("bias_v", Tensor::empty({1, 1, E}));
  }
  out_proj = register_module("out_proj", Linear(LinearOptions(E, E).bias(options.bias())));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  for (Tensor* w : {&in_proj_weight, &q_proj_weight, &k_proj_weight, &v_proj_weight})
    if (w->defined()) init::xavier_uniform_(*w);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
  for (Tensor* b : {&bias_k, &bias_v})
    if (b->defined()) init::xavier_normal_(*b);
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                           const Tensor& key_padding_mask, bool need_weights,
                                                           const Tensor& attn_mask, bool average_attn_weights,
                                                           bool is_causal) {
  const int64_t E = options.embed_dim(), H = options.num_heads();
  MINIDL_CHECK(query.defined() && key.defined() && value.defined(), kName, ": query, key and value must be defined");
  const bool batched = query.dim() == 3;
  MINIDL_CHECK((query.dim() == 2 || batched) && key.dim() == query.dim() && value.dim() == query.dim(), kName,
               ": expected query, key and value all 3-D (batched) or all 2-D (unbatched), got shapes ", query.shape(),
               ", ", key.shape(), " and ", value.shape());
  MINIDL_CHECK(!is_causal || attn_mask.defined(), kName,
               ": is_causal is a hint that attn_mask is the causal mask, so it needs attn_mask (PyTorch's rule); "
               "nn::generate_square_subsequent_mask makes one");
  auto batch_first = [&](const Tensor& t) {
    if (!batched) return unsqueeze(t, 0);
    return options.batch_first() ? t : transpose(t, 0, 1);
  };
  const Tensor q_in = batch_first(query), k_in = batch_first(key), v_in = batch_first(value);
  const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1);
  MINIDL_CHECK(q_in.size(2) == E && k_in.size(2) == kdim() && v_in.size(2) == vdim(), kName,
               ": expected query, key and value of ", E, ", ", kdim(), " and ", vdim(), " features, got shapes ",
               query.shape(), ", ", key.shape(), " and ", value.shape());
  MINIDL_CHECK(k_in.size(0) == N && v_in.size(0) == N && v_in.size(1) == S, kName,
               ": query, key and value disagree on the batch size or key and value on the length; got shapes ",
               query.shape(), ", ", key.shape(), " and ", value.shape(), (options.batch_first() ? " (batch_first)" : ""));

  // The input projections: one GEMM for self-attention, else one per input with its slice of the weights.
  auto bias_part = [&](int64_t i) { return in_proj_bias.defined() ? narrow(in_proj_bias, 0, i * E, E) : Tensor(); };
  Tensor q, k, v;
  if (in_proj_weight.defined() && query.is_same(key) && key.is_same(value)) {
    std::vector<Tensor> qkv = chunk(linear(q_in, in_proj_weight, in_proj_bias), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    auto weight = [&](int64_t i, const Tensor& own) {
      return in_proj_weight.defined() ? narrow(in_proj_weight, 0, i * E, E) : own;
    };
    q = linear(q_in, weight(0, q_proj_weight), bias_part(0));
    k = linear(k_in, weight(1, k_proj_weight), bias_part(1));
    v = linear(v_in, weight(2, v_proj_weight), bias_part(2));
  }
  // add_bias_kv's key and value, then add_zero_attn's zeros: a key position each.
  if (bias_k.defined()) {
    k = cat({k, expand(bias_k, {N, 1, E})}, 1);
    v = cat({v, expand(bias_v, {N, 1, E})}, 1);
  }
  q = split_heads(q, H), k = split_heads(k, H), v = split_heads(v, H);
  if (options.add_zero_attn()) {
    const Tensor zero = zeros({N, H, 1, E / H}, k.dtype(), k.device());
    k = cat({k, zero}, 2);
    v = cat({v, zero}, 2);
  }
  // The masks attend to the added positions: zero columns at the end of the additive form.
  const int64_t added = k.size(2) - S;
  auto attend_added = [&](const Tensor& m) {
    if (added == 0) return m;
    Shape extra = m.shape();
    extra.back() = added;
    return cat({m, zeros(extra, m.dtype(), m.device())}, -1);
  };

  // One additive mask broadcasting against [N, H, L, S].
  Tensor mask = additive_mask(attn_mask, q.dtype(), "attn_mask");
  if (mask.defined()) {
    const bool two_d = mask.dim() == 2 && mask.size(0) == L && mask.size(1) == S;
    const bool per_head = mask.dim() == 3 && mask.size(0) == N * H && mask.size(1) == L && mask.size(2) == S;
    MINIDL_CHECK(two_d || per_head, kName, ": expected attn_mask [L, S] = [", L, ", ", S, "] or [N*num_heads, L, S] = [",
                 N * H, ", ", L, ", ", S, "], got shape ", attn_mask.shape());
    if (per_head) mask = reshape(mask, {N, H, L, S});
    mask = attend_added(mask);
  }
  if (key_padding_mask.defined()) {
    const Shape expected = batched ? Shape{N, S} : Shape{S};
    MINIDL_CHECK(key_padding_mask.shape() == expected, kName, ": expected key_padding_mask of shape ", expected,
                 ", got ", key_padding_mask.shape());
    Tensor padding = reshape(additive_mask(key_padding_mask, q.dtype(), "key_padding_mask"), {N, 1, 1, S});
    padding = attend_added(padding);
    mask = mask.defined() ? add(mask, padding) : padding;
  }
  const double dropout_p = is_training() ? options.dropout() : 0.0;

  Tensor out, weights;
  if (need_weights) {
    out = scaled_dot_product_attention_math(q, k, v, mask, dropout_p, false, std::nullopt, &weights);
    if (average_attn_weights) weights = mean(weights, {1});
  } else if (is_causal && !key_padding_mask.defined()) {
    out = scaled_dot_product_attention(q, k, v, {}, dropout_p, true);  // the hint replaces the mask
  } else {
    out = scaled_dot_product_attention(q, k, v, mask, dropout_p);
  }
  out = out_proj->forward(reshape(transpose(out, 1, 2), {N, L, E}));
  if (!batched) return {squeeze(out, 0), weights.defined() ? squeeze(weights, 0) : weights};
  return {options.batch_first() ? out : transpose(out, 0, 1), weights};
}

}  // namespace minidl::nn
