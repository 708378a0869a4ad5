#pragma once
// nn::Embedding: a lookup table of learned vectors, as torch::nn::Embedding.
#include <optional>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

/// libtorch's EmbeddingOptions.   nn::EmbeddingOptions(65, 384).padding_idx(0).max_norm(1.0)
struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  MINIDL_ARG(int64_t, num_embeddings);
  MINIDL_ARG(int64_t, embedding_dim);
  /// The row that gets no gradient and starts at zero; negative counts from num_embeddings.
  MINIDL_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  /// Looked-up rows whose norm_type-norm exceeds it are rescaled to it, in place, before the lookup.
  MINIDL_ARG(std::optional<double>, max_norm) = std::nullopt;
  MINIDL_ARG(double, norm_type) = 2.0;
  MINIDL_ARG(bool, scale_grad_by_freq) = false;
  /// Refused: minidl has no sparse gradients.
  MINIDL_ARG(bool, sparse) = false;
  /// A [num_embeddings, embedding_dim] tensor to use as the weight instead of a fresh one.
  MINIDL_ARG(Tensor, _weight);
};

/// libtorch's EmbeddingFromPretrainedOptions.
///   nn::Embedding::from_pretrained(w, nn::EmbeddingFromPretrainedOptions().freeze(false))
struct EmbeddingFromPretrainedOptions {
  MINIDL_ARG(bool, freeze) = true;
  MINIDL_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  MINIDL_ARG(std::optional<double>, max_norm) = std::nullopt;
  MINIDL_ARG(double, norm_type) = 2.0;
  MINIDL_ARG(bool, scale_grad_by_freq) = false;
  MINIDL_ARG(bool, sparse) = false;
};

/// Rows of `weight` [num_embeddings, embedding_dim], initialized N(0, 1) with the padding row zero,
/// picked by integer ids: input [...] -> [..., embedding_dim].
///   nn::Embedding tok(nn::EmbeddingOptions(vocab, 384));  Tensor x = tok(tokens);
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  /// Draws the weight from N(0, 1) again and zeroes the padding row.
  void reset_parameters();

  /// padding_idx as given to the constructor, made non-negative.
  EmbeddingOptions options;
  Tensor weight;
};

/// The holder of EmbeddingImpl, with libtorch's from_pretrained.
class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder<EmbeddingImpl>::ModuleHolder;
  /// A layer whose weight is `embeddings` [V, D] itself (shared, not copied), trained only when
  /// freeze is false.   auto emb = nn::Embedding::from_pretrained(vectors);
  static Embedding from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& options = {});
  /// The same with the two options set most often.   nn::Embedding::from_pretrained(w, false, 0)
  static Embedding from_pretrained(const Tensor& embeddings, bool freeze,
                                   std::optional<int64_t> padding_idx = std::nullopt);
};

namespace functional {
/// libtorch's F::EmbeddingFuncOptions.   F::embedding(ids, w, F::EmbeddingFuncOptions().padding_idx(0))
struct EmbeddingFuncOptions {
  MINIDL_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  MINIDL_ARG(std::optional<double>, max_norm) = std::nullopt;
  MINIDL_ARG(double, norm_type) = 2.0;
  MINIDL_ARG(bool, scale_grad_by_freq) = false;
  MINIDL_ARG(bool, sparse) = false;
};
/// torch::nn::functional::embedding, in PyTorch's (input, weight) order; max_norm rescales the
/// looked-up rows of weight in place first.   Tensor x = F::embedding(tokens, table);
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options = {});
}  // namespace functional

}  // namespace minidl::nn
