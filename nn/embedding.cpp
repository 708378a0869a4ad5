#include "nn/embedding.h"

#include <sstream>

#include "core/autograd.h"
#include "nn/init.h"
#include "ops/embedding.h"

namespace minidl::nn {

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& options_) : options(options_) {
  const int64_t rows = options.num_embeddings(), dim = options.embedding_dim();
  MINIDL_CHECK(rows > 0 && dim > 0, "Embedding: expected positive num_embeddings and embedding_dim, got ", rows,
               " and ", dim);
  if (options.padding_idx()) {
    const int64_t p = *options.padding_idx();
    MINIDL_CHECK(p >= -rows && p < rows, "Embedding: padding_idx must be within [", -rows, ", ", rows,
                 ") for num_embeddings ", rows, ", got ", p);
    if (p < 0) options.padding_idx(p + rows);
  }
  MINIDL_CHECK(!options.sparse(), "Embedding: sparse=true asks for sparse gradients, which minidl does not have");
  if (options._weight().defined()) {
    MINIDL_CHECK(options._weight().shape() == (Shape{rows, dim}), "Embedding: expected _weight of shape [", rows,
                 ", ", dim, "] (num_embeddings, embedding_dim), got ", options._weight().shape());
    weight = register_parameter("weight", options._weight());
  } else {
    weight = register_parameter("weight", Tensor::empty({rows, dim}));
    reset_parameters();
  }
}

void EmbeddingImpl::reset_parameters() {
  init::normal_(weight, 0, 1);
  if (options.padding_idx()) {
    NoGradGuard no_grad;
    weight.select(0, *options.padding_idx()).zero_();
  }
}

std::shared_ptr<Module> EmbeddingImpl::clone(const std::optional<Device>& device) const {
  EmbeddingOptions fresh = options;
  fresh._weight(Tensor());  // the copy gets a weight of its own, filled by copy_state_into
  auto copy = std::make_shared<EmbeddingImpl>(fresh);
  copy_state_into(*copy, device);
  return copy;
}

Tensor EmbeddingImpl::forward(const Tensor& input) {
  if (options.max_norm()) embedding_renorm_(weight, input, *options.max_norm(), options.norm_type());
  return embedding(weight, input, options.padding_idx(), options.scale_grad_by_freq());
}

std::string EmbeddingImpl::extra_repr() const {
  // libtorch's pretty_print: the sizes, then only the options that differ from their defaults.
  std::ostringstream os;
  os << "num_embeddings=" << options.num_embeddings() << ", embedding_dim=" << options.embedding_dim();
  if (options.padding_idx()) os << ", padding_idx=" << *options.padding_idx();
  if (options.max_norm()) os << ", max_norm=" << *options.max_norm();
  if (options.norm_type() != 2.0) os << ", norm_type=" << options.norm_type();
  if (options.scale_grad_by_freq()) os << ", scale_grad_by_freq=true";
  return os.str();
}

Embedding Embedding::from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& options) {
  MINIDL_CHECK(embeddings.dim() == 2, "Embedding::from_pretrained: expected a 2-D embeddings tensor, got shape ",
               embeddings.shape());
  Embedding layer(EmbeddingOptions(embeddings.size(0), embeddings.size(1))
                      ._weight(embeddings)
                      .padding_idx(options.padding_idx())
                      .max_norm(options.max_norm())
                      .norm_type(options.norm_type())
                      .scale_grad_by_freq(options.scale_grad_by_freq())
                      .sparse(options.sparse()));
  layer->weight.requires_grad_(!options.freeze());
  return layer;
}

Embedding Embedding::from_pretrained(const Tensor& embeddings, bool freeze, std::optional<int64_t> padding_idx) {
  return from_pretrained(embeddings, EmbeddingFromPretrainedOptions().freeze(freeze).padding_idx(padding_idx));
}

Tensor functional::embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options) {
  if (options.max_norm()) {
    Tensor table = weight;  // a handle: the rows are rescaled in weight's own storage
    embedding_renorm_(table, input, *options.max_norm(), options.norm_type());
  }
  return ::minidl::embedding(weight, input, options.padding_idx(), options.scale_grad_by_freq(), options.sparse());
}

}  // namespace minidl::nn
