// MultiheadAttention against a hand composition with its own weights (per batch and head, by mm and
// softmax), its masks, weights and layouts; the encoder and decoder layers' float64 gradients and
// their blocks; the stacks' deep copies; Transformer as encoder then decoder, and learning to copy;
// the causal mask helper.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::transformer_test {

using minidl::testing::all_close;
using minidl::testing::expect_error;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

struct HandResult {
  Tensor out;      // [N, L, E]
  Tensor weights;  // [N, H, L, S]
};

// multi-head attention written out: batch-first query [N, L, E], key [N, S, kdim], value [N, S, vdim];
// bias: an additive mask broadcastable to [N, H, L, S] (or undefined).
HandResult hand_mha(const nn::MultiheadAttentionImpl& m, const Tensor& query, const Tensor& key, const Tensor& value,
                    const Tensor& bias) {
  NoGradGuard no_grad;
  const int64_t E = m.options.embed_dim(), H = m.options.num_heads(), hd = E / H;
  const int64_t N = query.size(0), L = query.size(1), S = key.size(1);
  auto w = [&](int64_t i, const Tensor& own) { return m.in_proj_weight.defined() ? m.in_proj_weight.narrow(0, i * E, E) : own; };
  auto b = [&](int64_t i) { return m.in_proj_bias.narrow(0, i * E, E); };
  // add_bias_kv and add_zero_attn each add a key position.
  const int64_t keys = S + (m.bias_k.defined() ? 1 : 0) + (m.options.add_zero_attn() ? 1 : 0);
  const Tensor full_bias = bias.defined() ? bias.expand({N, H, L, keys}) : zeros({N, H, L, keys}, query.dtype());
  std::vector<Tensor> outs, all_weights;
  for (int64_t n = 0; n < N; ++n) {
    Tensor Q = add(mm(query[n], w(0, m.q_proj_weight).t()), b(0));
    Tensor K = add(mm(key[n], w(1, m.k_proj_weight).t()), b(1));
    Tensor V = add(mm(value[n], w(2, m.v_proj_weight).t()), b(2));
    if (m.bias_k.defined()) K = cat({K, m.bias_k.reshape({1, E})}), V = cat({V, m.bias_v.reshape({1, E})});
    std::vector<Tensor> heads, head_weights;
    for (int64_t h = 0; h < H; ++h) {
      Tensor Kh = K.narrow(1, h * hd, hd), Vh = V.narrow(1, h * hd, hd);
      if (m.options.add_zero_attn()) {
        Kh = cat({Kh, zeros({1, hd}, query.dtype())});
        Vh = cat({Vh, zeros({1, hd}, query.dtype())});
      }
      Tensor scores = add(mm(Q.narrow(1, h * hd, hd), Kh.t()) / std::sqrt(double(hd)), full_bias[n][h]);
      Tensor P = softmax(scores, 1);
      heads.push_back(mm(P, Vh));
      head_weights.push_back(P);
    }
    outs.push_back(add(mm(cat(heads, 1), m.out_proj->weight.t()), m.out_proj->bias));
    all_weights.push_back(stack(head_weights));
  }
  return {stack(outs), stack(all_weights)};
}

// A float64 module with random biases (the defaults are zeros, which would hide a missing bias).
nn::MultiheadAttention make_mha(nn::MultiheadAttentionOptions options) {
  nn::MultiheadAttention m(options);
  m->to(kFloat64);
  nn::init::normal_(m->in_proj_bias);
  nn::init::normal_(m->out_proj->bias);
  return m;
}

Tensor r(const Shape& shape) { return randn(shape, kFloat64); }

Tensor bools(const std::vector<int>& values, const Shape& shape) {
  return Tensor::from_vector<bool>(std::vector<bool>(values.begin(), values.end()), shape);
}

GradcheckOptions tight() {
  GradcheckOptions o;
  o.atol = 1e-8;
  o.rtol = 1e-6;
  return o;
}

}  // namespace

TEST(MultiheadAttention, MatchesHandComposition) {
  manual_seed(11);
  nn::MultiheadAttention m = make_mha(nn::MultiheadAttentionOptions(8, 2));
  EXPECT_EQ(m->named_parameters().keys(),
            (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(m->in_proj_weight.shape(), (Shape{24, 8}));
  const Tensor query = r({4, 3, 8}), key = r({5, 3, 8}), value = r({5, 3, 8});  // [L, N, E], [S, N, E]
  const HandResult want = hand_mha(*m, query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), {});
  auto [out, weights] = m->forward(query, key, value);
  ASSERT_EQ(out.shape(), (Shape{4, 3, 8}));
  EXPECT_TRUE(all_close(out.transpose(0, 1), want.out, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(weights, want.weights.mean({1}), 1e-12, 1e-12));  // averaged over the heads
  auto [out2, per_head] = m->forward(query, key, value, {}, true, {}, /*average_attn_weights=*/false);
  EXPECT_TRUE(all_close(per_head, want.weights, 1e-12, 1e-12));
  auto [out3, none] = m->forward(query, key, value, {}, /*need_weights=*/false);
  EXPECT_FALSE(none.defined());
  EXPECT_TRUE(all_close(out3, out, 1e-12, 1e-12));
  // Self-attention (one tensor as query, key and value) projects with one GEMM: same values.
  auto [self_out, self_w] = m->forward(query, query, query);
  const Tensor qb = query.transpose(0, 1);
  EXPECT_TRUE(all_close(self_out.transpose(0, 1), hand_mha(*m, qb, qb, qb, {}).out, 1e-12, 1e-12));
}

TEST(MultiheadAttention, KeyPaddingAndAttnMasks) {
  manual_seed(12);
  nn::MultiheadAttention m = make_mha(nn::MultiheadAttentionOptions(8, 2).batch_first(true));
  const Tensor query = r({2, 4, 8}), key = r({2, 5, 8}), value = r({2, 5, 8});
  // Batch 0 ignores keys 3 and 4; batch 1 key 0. The attn_mask forbids key 1 to query 0 (true = may NOT attend).
  const Tensor padding = bools({0, 0, 0, 1, 1, 1, 0, 0, 0, 0}, {2, 5});
  std::vector<bool> forbid_v(20, false);
  forbid_v[1] = true;
  const Tensor forbid = Tensor::from_vector<bool>(forbid_v, {4, 5});
  const Tensor bias = add(masked_fill(zeros({2, 1, 1, 5}, kFloat64), padding.reshape({2, 1, 1, 5}), -kInf),
                          masked_fill(zeros({4, 5}, kFloat64), forbid, -kInf));
  const HandResult want = hand_mha(*m, query, key, value, bias);
  for (bool need_weights : {true, false}) {
    auto [out, weights] = m->forward(query, key, value, padding, need_weights, forbid);
    EXPECT_TRUE(all_close(out, want.out, 1e-12, 1e-12)) << "need_weights " << need_weights;
    if (need_weights) {
      EXPECT_TRUE(all_close(weights, want.weights.mean({1}), 1e-12, 1e-12));
    }
  }
  // A float mask [N*H, L, S] is added per head; a float key padding mask is added too.
  const Tensor per_head = r({4, 4, 5});
  const HandResult want2 = hand_mha(*m, query, key, value, per_head.reshape({2, 2, 4, 5}));
  auto [out2, w2] = m->forward(query, key, value, {}, true, per_head, false);
  EXPECT_TRUE(all_close(out2, want2.out, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(w2, want2.weights, 1e-12, 1e-12));
  const Tensor soft_padding = r({2, 5});
  auto [out3, w3] = m->forward(query, key, value, soft_padding);
  EXPECT_TRUE(all_close(out3, hand_mha(*m, query, key, value, soft_padding.reshape({2, 1, 1, 5})).out, 1e-12, 1e-12));
}

// add_bias_kv and add_zero_attn: one key position each, appended after the projections; the masks
// attend to them (PyTorch pads attn_mask and key_padding_mask with a column that does), and the
// weights cover them. The parameters have PyTorch's names and shapes, and gradients reach them.
TEST(MultiheadAttention, AddBiasKvAndZeroAttn) {
  manual_seed(16);
  for (bool bias_kv : {false, true}) {
    for (bool zero_attn : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "add_bias_kv " << bias_kv << " add_zero_attn " << zero_attn);
      nn::MultiheadAttention m =
          make_mha(nn::MultiheadAttentionOptions(8, 2).batch_first(true).add_bias_kv(bias_kv).add_zero_attn(zero_attn));
      EXPECT_EQ(m->named_parameters().contains("bias_k"), bias_kv);
      if (bias_kv) {
        EXPECT_EQ(m->bias_v.shape(), (Shape{1, 1, 8}));
        nn::init::normal_(m->bias_k);
        nn::init::normal_(m->bias_v);
      }
      const int64_t added = int64_t(bias_kv) + int64_t(zero_attn);
      const Tensor query = r({2, 4, 8}), key = r({2, 5, 8}), value = r({2, 5, 8});
      const Tensor padding = bools({0, 0, 0, 1, 1, 1, 0, 0, 0, 0}, {2, 5});
      std::vector<bool> forbid_v(20, false);
      forbid_v[2] = true;
      const Tensor forbid = Tensor::from_vector<bool>(forbid_v, {4, 5});
      // The hand composition's mask over every key position: the added ones attend.
      auto widen = [&](const Tensor& t) {
        Shape extra = t.shape();
        extra.back() = added;
        return cat({t, zeros(extra, kFloat64)}, -1);
      };
      const Tensor bias = add(widen(masked_fill(zeros({2, 1, 1, 5}, kFloat64), padding.reshape({2, 1, 1, 5}), -kInf)),
                              widen(masked_fill(zeros({4, 5}, kFloat64), forbid, -kInf)));
      const HandResult want = hand_mha(*m, query, key, value, bias);
      for (bool need_weights : {true, false}) {
        auto [out, weights] = m->forward(query, key, value, padding, need_weights, forbid, false);
        EXPECT_TRUE(all_close(out, want.out, 1e-12, 1e-12)) << "need_weights " << need_weights;
        if (need_weights) {
          ASSERT_EQ(weights.shape(), (Shape{2, 2, 4, 5 + added}));
          EXPECT_TRUE(all_close(weights, want.weights, 1e-12, 1e-12));
        }
      }
      auto [plain, unused] = m->forward(query, key, value);
      EXPECT_TRUE(all_close(plain, hand_mha(*m, query, key, value, {}).out, 1e-12, 1e-12));
      if (bias_kv) {
        plain.sum().backward();
        ASSERT_TRUE(m->bias_k.grad().defined());
        EXPECT_GT(m->bias_v.grad().abs().sum().item<double>(), 0.0);
      }
    }
  }
}

TEST(MultiheadAttention, GradcheckWithAddBiasKvAndZeroAttn) {
  manual_seed(17);
  nn::MultiheadAttention m =
      make_mha(nn::MultiheadAttentionOptions(4, 2).batch_first(true).add_bias_kv(true).add_zero_attn(true));
  const Tensor padding = bools({0, 1, 0, 0, 0, 0}, {2, 3});
  std::vector<Tensor> inputs{r({2, 2, 4}).requires_grad_(), r({2, 3, 4}).requires_grad_(), r({2, 3, 4}).requires_grad_(),
                             m->bias_k, m->bias_v};
  // gradcheck perturbs copies of its inputs: the module reads bias_k and bias_v from them.
  GradcheckResult res = gradcheck(
      [&](const std::vector<Tensor>& t) {
        m->bias_k = t[3], m->bias_v = t[4];
        return std::get<0>(m->forward(t[0], t[1], t[2], padding, false));
      },
      inputs, tight());
  EXPECT_TRUE(res) << res.message;
}

TEST(MultiheadAttention, LayoutsAndSeparateProjections) {
  manual_seed(13);
  nn::MultiheadAttention seq_first = make_mha(nn::MultiheadAttentionOptions(6, 3));
  nn::MultiheadAttention batch_first(nn::MultiheadAttentionOptions(6, 3).batch_first(true));
  batch_first->to(kFloat64);
  batch_first->load_state_dict(seq_first->state_dict());
  const Tensor query = r({4, 2, 6}), key = r({3, 2, 6}), value = r({3, 2, 6});
  auto [a, wa] = seq_first->forward(query, key, value);
  auto [b, wb] = batch_first->forward(query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1));
  EXPECT_TRUE(all_close(b, a.transpose(0, 1), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(wb, wa, 1e-12, 1e-12));
  // Unbatched [L, E]: the batch element alone.
  auto [c, wc] = seq_first->forward(query.select(1, 1), key.select(1, 1), value.select(1, 1));
  EXPECT_TRUE(all_close(c, a.select(1, 1), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(wc, wa[1], 1e-12, 1e-12));
  // kdim and vdim other than embed_dim: three projection weights.
  nn::MultiheadAttention cross = make_mha(nn::MultiheadAttentionOptions(6, 2).kdim(4).vdim(5).batch_first(true));
  EXPECT_FALSE(cross->in_proj_weight.defined());
  EXPECT_EQ(cross->named_parameters().keys(),
            (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                      "out_proj.weight", "out_proj.bias"}));
  const Tensor q = r({2, 3, 6}), k = r({2, 7, 4}), v = r({2, 7, 5});
  auto [d, wd] = cross->forward(q, k, v);
  const HandResult want = hand_mha(*cross, q, k, v, {});
  EXPECT_TRUE(all_close(d, want.out, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(wd, want.weights.mean({1}), 1e-12, 1e-12));
}

TEST(MultiheadAttention, CausalHintAndGradcheck) {
  manual_seed(14);
  nn::MultiheadAttention m = make_mha(nn::MultiheadAttentionOptions(4, 2).batch_first(true));
  const Tensor x = r({2, 5, 4});
  const Tensor mask = nn::generate_square_subsequent_mask(5, kFloat64);
  auto [hinted, none] = m->forward(x, x, x, {}, false, mask, true, /*is_causal=*/true);  // fused, no mask tensor
  auto [masked, w] = m->forward(x, x, x, {}, true, mask);
  EXPECT_TRUE(all_close(hinted, masked, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(masked, hand_mha(*m, x, x, x, mask).out, 1e-12, 1e-12));
  const Tensor bias = r({3, 5});
  for (bool need_weights : {true, false}) {
    GradcheckResult res = gradcheck(
        [&](const std::vector<Tensor>& in) { return std::get<0>(m->forward(in[0], in[1], in[2], {}, need_weights, bias)); },
        {r({2, 3, 4}).requires_grad_(), r({2, 5, 4}).requires_grad_(), r({2, 5, 4}).requires_grad_()}, tight());
    EXPECT_TRUE(res) << "need_weights " << need_weights << ": " << res.message;
  }
}

TEST(MultiheadAttention, ClearErrors) {
  expect_error([] { nn::MultiheadAttention(6, 4); }, {"embed_dim (6)", "num_heads (4)"});
  nn::MultiheadAttention m(8, 2);
  const Tensor x = randn({4, 2, 8});
  expect_error([&] { m->forward(x, x, x, {}, true, ones({3, 3}, kBool)); }, {"attn_mask", "[4, 4]", "[3, 3]"});
  expect_error([&] { m->forward(x, x, x, ones({4, 2}, kBool)); }, {"key_padding_mask", "[2, 4]"});
  expect_error([&] { m->forward(x, x, x, {}, false, {}, true, true); }, {"is_causal", "attn_mask"});
  expect_error([&] { m->forward(x, randn({4, 2, 5}), x); }, {"features"});
  expect_error([&] { m->forward(x, randn({4, 8}), x); }, {"3-D", "2-D"});
}

TEST(TransformerEncoderLayer, GradcheckBothNormOrders) {
  manual_seed(15);
  for (bool norm_first : {false, true}) {
    for (const char* activation : {"relu", "gelu"}) {
      SCOPED_TRACE(std::string(norm_first ? "norm_first " : "post-norm ") + activation);
      nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(4, 2)
                                            .dim_feedforward(6)
                                            .dropout(0)
                                            .activation(activation)
                                            .norm_first(norm_first));
      layer->to(kFloat64);
      const Tensor mask = nn::generate_square_subsequent_mask(3, kFloat64);
      // relu's kink is met with probability zero by random inputs.
      GradcheckResult res = gradcheck(
          [&](const std::vector<Tensor>& in) { return layer->forward(in[0], mask, {}, /*is_causal=*/true); },
          {r({3, 2, 4}).requires_grad_()}, tight());
      EXPECT_TRUE(res) << res.message;
    }
  }
}

TEST(TransformerEncoderLayer, ComposesItsBlocks) {
  manual_seed(16);
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).batch_first(true));
  layer->to(kFloat64);
  layer->eval();  // dropout off
  EXPECT_EQ(layer->named_parameters().keys(),
            (std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                                      "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                                      "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}));
  const Tensor x = r({2, 5, 8});
  const Tensor padding = bools({0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, {2, 5});
  Tensor x1 = layer->norm1->forward(add(x, std::get<0>(layer->self_attn->forward(x, x, x, padding))));
  Tensor want = layer->norm2->forward(add(x1, layer->linear2->forward(relu(layer->linear1->forward(x1)))));
  EXPECT_TRUE(all_close(layer->forward(x, {}, padding), want, 1e-12, 1e-12));
  // Training mode with dropout draws masks: outputs differ from evaluation.
  layer->train();
  EXPECT_FALSE(all_close(layer->forward(x, {}, padding), want, 1e-6, 1e-6));
}

TEST(TransformerEncoder, DeepCopiesThenNorm) {
  manual_seed(17);
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0));
  nn::TransformerEncoder encoder(layer, 3, nn::LayerNorm(nn::LayerNormOptions({8})));
  EXPECT_EQ(encoder->parameters().size(), 3 * layer->parameters().size() + 2);
  EXPECT_TRUE(encoder->named_parameters().contains("layers.2.self_attn.in_proj_weight"));
  EXPECT_TRUE(encoder->named_parameters().contains("norm.weight"));
  auto first = std::static_pointer_cast<nn::TransformerEncoderLayerImpl>((*encoder->layers)[0]);
  auto second = std::static_pointer_cast<nn::TransformerEncoderLayerImpl>((*encoder->layers)[1]);
  // Copies of one layer: equal values, separate tensors.
  EXPECT_TRUE(all_close(first->linear1->weight, layer->linear1->weight, 0, 0));
  EXPECT_NE(first->linear1->weight.data_ptr(), layer->linear1->weight.data_ptr());
  EXPECT_NE(first->linear1->weight.data_ptr(), second->linear1->weight.data_ptr());
  nn::init::normal_(second->linear1->weight);  // the layers now differ
  const Tensor x = randn({5, 2, 8});
  Tensor want = x;
  for (const auto& l : *encoder->layers) want = std::static_pointer_cast<nn::TransformerEncoderLayerImpl>(l)->forward(want);
  want = encoder->norm->forward(want);
  EXPECT_TRUE(all_close(encoder->forward(x), want, 1e-6, 1e-6));
  // clone() copies deeply, the norm included.
  auto copy = std::dynamic_pointer_cast<nn::TransformerEncoderImpl>(encoder->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(all_close(copy->forward(x), want, 0, 0));
  EXPECT_NE(copy->norm->parameters()[0].data_ptr(), encoder->norm->parameters()[0].data_ptr());
}

TEST(TransformerEncoder, SquareSubsequentMask) {
  const Tensor mask = nn::generate_square_subsequent_mask(3);
  EXPECT_EQ(mask.dtype(), kFloat32);
  EXPECT_EQ(mask.to_vector<float>(), (std::vector<float>{0, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0, 0, 0}));
  expect_error([] { nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(8, 2).activation("tanh")); },
               {"activation", "tanh"});
}

TEST(TransformerDecoderLayer, ComposesItsBlocks) {
  manual_seed(18);
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first ? "norm_first" : "post-norm");
    nn::TransformerDecoderLayer layer(
        nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(16).batch_first(true).norm_first(norm_first).activation("gelu"));
    layer->to(kFloat64);
    layer->eval();  // dropout off
    EXPECT_EQ(layer->named_parameters().keys(),
              (std::vector<std::string>{
                  "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                  "self_attn.out_proj.bias", "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
                  "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", "linear1.weight", "linear1.bias",
                  "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
                  "norm3.weight", "norm3.bias"}));
    for (Tensor& p : layer->parameters()) nn::init::normal_(p, 0.0, 0.3);  // biases and norms not at their defaults
    const Tensor tgt = r({2, 4, 8}), memory = r({2, 6, 8});
    const Tensor causal = nn::generate_square_subsequent_mask(4, kFloat64);
    const Tensor memory_padding = bools({0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 6});
    auto self_block = [&](const Tensor& x) { return std::get<0>(layer->self_attn->forward(x, x, x, {}, true, causal)); };
    auto memory_block = [&](const Tensor& x) {
      return std::get<0>(layer->multihead_attn->forward(x, memory, memory, memory_padding));
    };
    auto ff_block = [&](const Tensor& x) { return layer->linear2->forward(gelu(layer->linear1->forward(x))); };
    Tensor want = tgt;
    if (norm_first) {
      want = add(want, self_block(layer->norm1->forward(want)));
      want = add(want, memory_block(layer->norm2->forward(want)));
      want = add(want, ff_block(layer->norm3->forward(want)));
    } else {
      want = layer->norm1->forward(add(want, self_block(want)));
      want = layer->norm2->forward(add(want, memory_block(want)));
      want = layer->norm3->forward(add(want, ff_block(want)));
    }
    EXPECT_TRUE(all_close(layer->forward(tgt, memory, causal, {}, {}, memory_padding), want, 1e-12, 1e-12));
    // The causal hint gives the same values as the mask.
    EXPECT_TRUE(all_close(layer->forward(tgt, memory, causal, {}, {}, memory_padding, /*tgt_is_causal=*/true), want,
                          1e-12, 1e-12));
    // Unbatched [T, E] and [S, E]: the batch element alone.
    EXPECT_TRUE(all_close(layer->forward(tgt[1], memory[1], causal, {}, {}, memory_padding[1]), want[1], 1e-12, 1e-12));
  }
}

TEST(TransformerDecoderLayer, GradcheckTargetAndMemory) {
  manual_seed(19);
  for (bool norm_first : {false, true}) {
    SCOPED_TRACE(norm_first ? "norm_first" : "post-norm");
    nn::TransformerDecoderLayer layer(
        nn::TransformerDecoderLayerOptions(4, 2).dim_feedforward(6).dropout(0).norm_first(norm_first));
    layer->to(kFloat64);
    const Tensor mask = nn::generate_square_subsequent_mask(3, kFloat64);
    GradcheckResult res = gradcheck(
        [&](const std::vector<Tensor>& in) { return layer->forward(in[0], in[1], mask, {}, {}, {}, true); },
        {r({3, 2, 4}).requires_grad_(), r({5, 2, 4}).requires_grad_()}, tight());
    EXPECT_TRUE(res) << res.message;
  }
}

TEST(TransformerDecoder, DeepCopiesReadingOneMemoryThenNorm) {
  manual_seed(20);
  nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(16).dropout(0));
  nn::TransformerDecoder decoder(layer, 2, nn::LayerNorm(nn::LayerNormOptions({8})));
  EXPECT_EQ(decoder->parameters().size(), 2 * layer->parameters().size() + 2);
  EXPECT_TRUE(decoder->named_parameters().contains("layers.1.multihead_attn.out_proj.weight"));
  auto first = std::static_pointer_cast<nn::TransformerDecoderLayerImpl>((*decoder->layers)[0]);
  auto second = std::static_pointer_cast<nn::TransformerDecoderLayerImpl>((*decoder->layers)[1]);
  EXPECT_NE(first->linear1->weight.data_ptr(), second->linear1->weight.data_ptr());
  nn::init::normal_(second->linear1->weight);
  const Tensor tgt = randn({5, 2, 8}), memory = randn({7, 2, 8}), mask = nn::generate_square_subsequent_mask(5);
  const Tensor want = decoder->norm->forward(second->forward(first->forward(tgt, memory, mask), memory, mask));
  EXPECT_TRUE(all_close(decoder->forward(tgt, memory, mask), want, 1e-6, 1e-6));
  auto copy = std::dynamic_pointer_cast<nn::TransformerDecoderImpl>(decoder->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(all_close(copy->forward(tgt, memory, mask), want, 0, 0));
  EXPECT_NE(copy->norm->parameters()[0].data_ptr(), decoder->norm->parameters()[0].data_ptr());
}

TEST(Transformer, EncoderThenDecoderAsPyTorch) {
  manual_seed(21);
  nn::Transformer model(nn::TransformerOptions(8, 2).num_encoder_layers(2).num_decoder_layers(1).dim_feedforward(16));
  model->eval();
  const auto names = model->named_parameters().keys();
  EXPECT_EQ(names.front(), "encoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(names.back(), "decoder.norm.bias");
  EXPECT_TRUE(model->named_parameters().contains("encoder.norm.weight"));
  EXPECT_TRUE(model->named_parameters().contains("decoder.layers.0.multihead_attn.in_proj_weight"));
  EXPECT_FALSE(model->named_parameters().contains("decoder.layers.1.norm1.weight"));
  // _reset_parameters: every matrix is xavier-uniform, so within its bound and not the layers' defaults.
  for (const auto& [name, p] : model->named_parameters()) {
    if (p.dim() < 2) continue;
    const double bound = std::sqrt(6.0 / double(p.size(0) + p.size(1)));
    EXPECT_LE(abs(p).max().item<double>(), bound) << name;
    EXPECT_GT(abs(p).max().item<double>(), 0.8 * bound) << name;
  }
  const Tensor src = randn({6, 3, 8}), tgt = randn({4, 3, 8});
  const Tensor tgt_mask = nn::TransformerImpl::generate_square_subsequent_mask(4);
  const Tensor src_padding = gt(rand({3, 6}), 0.7), memory_padding = src_padding;
  const Tensor memory = model->encoder->forward(src, {}, src_padding);
  const Tensor want = model->decoder->forward(tgt, memory, tgt_mask, {}, {}, memory_padding);
  EXPECT_TRUE(all_close(model->forward(src, tgt, {}, tgt_mask, {}, src_padding, {}, memory_padding), want, 0, 0));
  EXPECT_EQ(model->forward(src, tgt).shape(), (Shape{4, 3, 8}));
  expect_error([&] { model->forward(src, randn({4, 2, 8})); }, {"Transformer", "batch sizes", "[6, 3, 8]", "[4, 2, 8]"});
  expect_error([&] { model->forward(src, randn({4, 3, 6})); }, {"Transformer", "feature sizes", "d_model (8)"});
  expect_error([] { nn::TransformerDecoderLayer(nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(0)); },
               {"TransformerDecoderLayer", "dim_feedforward", "0"});
}

// A one-layer encoder-decoder learns to copy short sequences of tokens: the gradients reach every
// part of it (embedding, both stacks, the cross-attention).
TEST(Transformer, LearnsToCopyASequence) {
  manual_seed(22);
  const int64_t vocab = 6, length = 5, d = 16, batch = 32;
  nn::Embedding embed(vocab, d), position(length, d);
  nn::Transformer model(nn::TransformerOptions(d, 2).num_encoder_layers(1).num_decoder_layers(1).dim_feedforward(32)
                            .dropout(0).batch_first(true));
  nn::Linear head(d, vocab);
  std::vector<Tensor> params = model->parameters();
  for (const Tensor& p : embed->parameters()) params.push_back(p);
  for (const Tensor& p : position->parameters()) params.push_back(p);
  for (const Tensor& p : head->parameters()) params.push_back(p);
  optim::Adam opt(params, optim::AdamOptions(3e-3));
  const Tensor mask = nn::generate_square_subsequent_mask(length);
  auto loss_on = [&](const Tensor& seq) {
    // The decoder sees the target shifted right behind a start token (0); tokens are 1..vocab-1.
    const Tensor shifted = cat({zeros({seq.size(0), 1}, kInt64), seq.narrow(1, 0, length - 1)}, 1);
    const Tensor positions = position->forward(arange(length, kInt64, Device::cpu()));
    const Tensor out = model->forward(add(embed->forward(seq), positions), add(embed->forward(shifted), positions), {},
                                      mask, {}, {}, {}, {}, false, true);
    return nn::functional::cross_entropy(head->forward(out).reshape({-1, vocab}), seq.reshape({-1}));
  };
  auto draw = [&] { return add(mul(rand({batch, length}), vocab - 1).to(kInt64), 1); };
  const double first = loss_on(draw()).item<double>();
  double last = first;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    Tensor loss = loss_on(draw());
    loss.backward();
    opt.step();
    last = loss.item<double>();
  }
  EXPECT_GT(first, 1.4);  // about log(5) at the start
  EXPECT_LT(last, 0.05) << "from " << first;  // without the memory it could not beat log(5)
}

// ---- CUDA (skipped without a GPU) ----

TEST(CudaTransformer, MultiheadAttentionGradcheckFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  nn::MultiheadAttention m = make_mha(nn::MultiheadAttentionOptions(4, 2).batch_first(true));
  m->to(minidl::testing::gpu());
  const Tensor bias = r({3, 5}).to(minidl::testing::gpu());
  auto leaf = [](const Shape& s) { return r(s).to(minidl::testing::gpu()).requires_grad_(); };
  for (bool need_weights : {true, false}) {
    GradcheckResult res = gradcheck(
        [&](const std::vector<Tensor>& in) { return std::get<0>(m->forward(in[0], in[1], in[2], {}, need_weights, bias)); },
        {leaf({2, 3, 4}), leaf({2, 5, 4}), leaf({2, 5, 4})}, tight());
    EXPECT_TRUE(res) << "need_weights " << need_weights << ": " << res.message;
  }
}

// A float32 encoder layer of head size 32: the fused kernels under the causal hint, the composed
// path under a padding mask; outputs and input gradients as on the CPU.
TEST(CudaTransformer, EncoderLayerMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  nn::TransformerEncoderLayer layer(
      nn::TransformerEncoderLayerOptions(64, 2).dim_feedforward(128).dropout(0).batch_first(true).norm_first(true));
  auto on_gpu = std::dynamic_pointer_cast<nn::TransformerEncoderLayerImpl>(layer->clone(minidl::testing::gpu()));
  ASSERT_TRUE(on_gpu);
  const Tensor mask = nn::generate_square_subsequent_mask(40);
  const Tensor padding = gt(rand({2, 40}), 0.8);
  minidl::testing::expect_cpu_cuda_agree(
      "causal", [&](auto& in) {
        auto& l = in[0].is_cuda() ? *on_gpu : *layer;
        return l.forward(in[0], mask.to(in[0].device()), {}, /*is_causal=*/true);
      },
      {randn({2, 40, 64})}, 2e-4);
  minidl::testing::expect_cpu_cuda_agree(
      "padding", [&](auto& in) {
        auto& l = in[0].is_cuda() ? *on_gpu : *layer;
        return l.forward(in[0], {}, padding.to(in[0].device()));
      },
      {randn({2, 40, 64})}, 2e-4);
}

// A float32 decoder layer of head size 32: causal self-attention (fused under the hint) and the
// attention over memory with a padding mask (composed); outputs and gradients as on the CPU.
TEST(CudaTransformer, DecoderLayerMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  nn::TransformerDecoderLayer layer(
      nn::TransformerDecoderLayerOptions(64, 2).dim_feedforward(128).dropout(0).batch_first(true));
  auto on_gpu = std::dynamic_pointer_cast<nn::TransformerDecoderLayerImpl>(layer->clone(minidl::testing::gpu()));
  ASSERT_TRUE(on_gpu);
  const Tensor mask = nn::generate_square_subsequent_mask(24);
  const Tensor memory_padding = gt(rand({2, 40}), 0.8);
  minidl::testing::expect_cpu_cuda_agree(
      "decoder", [&](auto& in) {
        auto& l = in[0].is_cuda() ? *on_gpu : *layer;
        const Device d = in[0].device();
        return l.forward(in[0], in[1], mask.to(d), {}, {}, memory_padding.to(d), /*tgt_is_causal=*/true);
      },
      {randn({2, 24, 64}), randn({2, 40, 64})}, 2e-4);
}

}  // namespace minidl::transformer_test
