#pragma once
// nanoGPT's GPT (Karpathy's model.py) written as a minidl user writes it: token and position
// embeddings, pre-norm blocks of causal self-attention and a GELU MLP, a final LayerNorm and an
// output layer tied to the token embedding; nanoGPT's initialization and its AdamW parameter groups.
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace char_gpt {

using namespace minidl;

/// nanoGPT's GPTConfig, with the shakespeare-char defaults (vocab_size comes from the corpus).
struct GptConfig {
  int64_t vocab_size = 0;
  int64_t block_size = 256;
  int64_t n_layer = 6, n_head = 6, n_embd = 384;
  double dropout = 0.2;
  bool bias = false;  // biases in the Linear and LayerNorm layers (nanoGPT's default: none)
  // The last blocks whose MLP saves its GELU's output for the backward rather than making it again
  // (linear_gelu_linear's keep_gelu_output): each a [B*T, 4C] tensor more at the step's peak, and
  // one pass less over it in the backward (char_gpt's --keep-gelu-outputs).
  int64_t mlps_keeping_gelu_output = 0;
};

/// Multi-head causal self-attention: one Linear makes q, k and v; the heads attend through the
/// fused scaled_dot_product_attention; c_proj mixes the heads back.
struct CausalSelfAttention : nn::Module {
  explicit CausalSelfAttention(const GptConfig& c)
      : c_attn(nn::LinearOptions(c.n_embd, 3 * c.n_embd).bias(c.bias)),
        c_proj(nn::LinearOptions(c.n_embd, c.n_embd).bias(c.bias)),
        resid_dropout(c.dropout),
        n_head(c.n_head),
        n_embd(c.n_embd),
        dropout(c.dropout) {
    MINIDL_CHECK(c.n_head >= 1 && c.n_embd % c.n_head == 0, "GPT: n_embd ", c.n_embd,
                 " must be a multiple of n_head ", c.n_head);
    register_module("c_attn", c_attn);
    register_module("c_proj", c_proj);
    register_module("resid_dropout", resid_dropout);
  }

  /// The heads' attention, projected back to [B, T, C]: the branch before its dropout.
  Tensor project(const Tensor& x) {  // [B, T, C]
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head;
    std::vector<Tensor> qkv = c_attn(x).split(n_embd, 2);
    auto heads = [&](const Tensor& t) { return t.view({B, T, n_head, hs}).transpose(1, 2); };  // [B, nh, T, hs]
    Tensor y = nn::functional::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {},
                                                            is_training() ? dropout : 0.0, /*is_causal=*/true);
    y = y.transpose(1, 2).contiguous().view({B, T, C});
    return c_proj(y);
  }
  Tensor forward(const Tensor& x) override { return resid_dropout(project(x)); }

  nn::Linear c_attn, c_proj;
  nn::Dropout resid_dropout;
  int64_t n_head, n_embd;
  double dropout;
};

/// Linear(C, 4C) -> GELU -> Linear(4C, C) -> Dropout.
struct Mlp : nn::Module {
  explicit Mlp(const GptConfig& c)
      : c_fc(nn::LinearOptions(c.n_embd, 4 * c.n_embd).bias(c.bias)),
        c_proj(nn::LinearOptions(4 * c.n_embd, c.n_embd).bias(c.bias)),
        dropout(c.dropout) {
    register_module("c_fc", c_fc);
    register_module("c_proj", c_proj);
    register_module("dropout", dropout);
  }
  // c_proj(gelu(c_fc(x))) as one op, whose backward makes the GELU's output again rather than saving
  // it: the tape keeps one [B*T, 4C] tensor per layer instead of two (PyTorch's compiler recomputes
  // such pointwise results too), unless keep_gelu_output (GptConfig::mlps_keeping_gelu_output).
  Tensor project(const Tensor& x) {  // before the dropout
    return c_fc->forward_gelu_linear(x, *c_proj, "none", keep_gelu_output);
  }
  Tensor forward(const Tensor& x) override { return dropout(project(x)); }

  nn::Linear c_fc, c_proj;
  nn::Dropout dropout;
  bool keep_gelu_output = false;
};

/// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
struct Block : nn::Module {
  explicit Block(const GptConfig& c)
      : ln_1(nn::LayerNormOptions({c.n_embd}).bias(c.bias)),
        attn(std::make_shared<CausalSelfAttention>(c)),
        ln_2(nn::LayerNormOptions({c.n_embd}).bias(c.bias)),
        mlp(std::make_shared<Mlp>(c)) {
    register_module("ln_1", ln_1);
    register_module("attn", attn);
    register_module("ln_2", ln_2);
    register_module("mlp", mlp);
  }
  Tensor forward(const Tensor& input) override {
    Tensor x = input + attn->forward(ln_1(input));
    return x + mlp->forward(ln_2(x));
  }

  /// forward() with each residual addition fused to the dropout before it and the layer norm after
  /// it (nn::functional::dropout_add_layer_norm: one pass each way on CUDA, where the separate ops
  /// make four kernels forward and six backward). Takes the stream x and ln_1(x); returns the new
  /// stream and `next`'s norm of it (the next block's ln_1, or the final ln_f).
  std::tuple<Tensor, Tensor> forward_fused(const Tensor& x, const Tensor& normed, const nn::LayerNorm& next) {
    namespace F = nn::functional;
    const bool train = is_training();
    auto [normed_2, x_1] = F::dropout_add_layer_norm(attn->project(normed), x, ln_2->weight, ln_2->bias,
                                                     attn->resid_dropout->options.p(), train, ln_2->options.eps());
    auto [normed_next, x_2] = F::dropout_add_layer_norm(mlp->project(normed_2), x_1, next->weight, next->bias,
                                                        mlp->dropout->options.p(), train, next->options.eps());
    return {x_2, normed_next};
  }

  nn::LayerNorm ln_1;
  std::shared_ptr<CausalSelfAttention> attn;
  nn::LayerNorm ln_2;
  std::shared_ptr<Mlp> mlp;
};

/// The GPT language model: ids [B, T] (T <= block_size) -> logits [B, T, vocab_size]. Its parameter
/// names are nanoGPT's (transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ..., lm_head.weight).
///   auto model = std::make_shared<Gpt>(GptConfig{.vocab_size = 65});  Tensor logits = model->forward(ids);
struct Gpt : nn::Module {
  explicit Gpt(const GptConfig& c) : config(c) {
    MINIDL_CHECK(c.vocab_size >= 1 && c.block_size >= 1 && c.n_layer >= 1, "GPT: expected a vocabulary, block_size "
                 "and n_layer of at least 1, got ", c.vocab_size, ", ", c.block_size, " and ", c.n_layer);
    wte = nn::Embedding(c.vocab_size, c.n_embd);
    wpe = nn::Embedding(c.block_size, c.n_embd);
    drop = nn::Dropout(c.dropout);
    for (int64_t i = 0; i < c.n_layer; ++i) {
      blocks.push_back(std::make_shared<Block>(c));
      blocks.back()->mlp->keep_gelu_output = i >= c.n_layer - c.mlps_keeping_gelu_output;
      h->push_back(blocks.back());
    }
    ln_f = nn::LayerNorm(nn::LayerNormOptions({c.n_embd}).bias(c.bias));
    transformer->register_module("wte", wte);
    transformer->register_module("wpe", wpe);
    transformer->register_module("drop", drop);
    transformer->register_module("h", h);
    transformer->register_module("ln_f", ln_f);
    register_module("transformer", transformer);
    lm_head = nn::Linear(nn::LinearOptions(c.n_embd, c.vocab_size).bias(false));
    register_module("lm_head", lm_head);
    // Weight tying (nanoGPT: self.transformer.wte.weight = self.lm_head.weight): one tensor, whose
    // gradient sums the embedding's and the output layer's.
    lm_head->weight = lm_head->register_parameter("weight", wte->weight);
    init_weights();
  }

  /// nanoGPT's _init_weights: every Linear and Embedding weight N(0, 0.02), biases zero, and the
  /// residual projections (c_proj) N(0, 0.02 / sqrt(2 n_layer)) (GPT-2's scaling of the residual path).
  void init_weights() {
    NoGradGuard no_grad;
    for (auto& [name, p] : named_parameters()) {
      const bool is_residual_projection = name.ends_with("c_proj.weight");
      if (name.ends_with(".bias")) {
        p.zero_();
      } else if (p.dim() == 2) {
        nn::init::normal_(p, 0.0, is_residual_projection ? 0.02 / std::sqrt(2.0 * config.n_layer) : 0.02);
      }
    }
  }

  Tensor forward(const Tensor& idx) override {
    MINIDL_CHECK(idx.dim() == 2 && idx.dtype() == kInt64, "GPT: expected int64 ids [B, T], got ", idx.dtype(), " ",
                 idx.shape());
    const int64_t T = idx.size(1);
    MINIDL_CHECK(T <= config.block_size, "GPT: cannot forward a sequence of length ", T, ", block_size is only ",
                 config.block_size);
    Tensor pos = arange(T, kInt64, idx.device());
    // x = drop(wte(idx) + wpe(pos)) and the first block's ln_1(x) as one op, the norm in the dtype
    // its product takes (autocast's, where on); then block by block as block->forward(x), each
    // block's seams fused with the next one's first norm.
    const nn::LayerNorm& ln_1 = blocks.front()->ln_1;
    const std::optional<DType> product_dtype =
        autocast::is_enabled(idx.device()) ? std::optional(autocast::dtype(idx.device())) : std::nullopt;
    Tensor normed, x;
    std::tie(normed, x) = nn::functional::embedding_dropout_layer_norm(
        wte->weight, idx, wpe->weight, pos, ln_1->weight, ln_1->bias, drop->options.p(), is_training(),
        ln_1->options.eps(), product_dtype);
    for (size_t i = 0; i < blocks.size(); ++i)
      std::tie(x, normed) = blocks[i]->forward_fused(x, normed, i + 1 < blocks.size() ? blocks[i + 1]->ln_1 : ln_f);
    return lm_head(normed);
  }

  /// nanoGPT's configure_optimizers: the optimizer's weight decay on the parameters of 2 or more dims
  /// (the Linear and Embedding weights), none on biases and LayerNorm weights.
  ///   optim::AdamW opt(model->param_groups(), optim::AdamOptions(1e-3).betas({0.9, 0.99}).weight_decay(0.1));
  std::vector<optim::ParamGroup> param_groups() const {
    std::vector<Tensor> decay, no_decay;
    for (const Tensor& p : parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    return {optim::ParamGroup(decay), optim::ParamGroup(no_decay, std::nullopt, /*weight_decay=*/0.0)};
  }

  GptConfig config;
  std::shared_ptr<nn::Module> transformer = std::make_shared<nn::Module>();
  nn::Embedding wte{nullptr}, wpe{nullptr};
  nn::Dropout drop{nullptr};
  nn::ModuleList h;
  std::vector<std::shared_ptr<Block>> blocks;  // h's modules, typed
  nn::LayerNorm ln_f{nullptr};
  nn::Linear lm_head{nullptr};
};

}  // namespace char_gpt
