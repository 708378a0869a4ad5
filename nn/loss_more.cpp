#include "nn/loss_more.h"

#include "nn/loss.h"

namespace minidl::nn {

using detail::buffer_of;

Tensor MarginRankingLossImpl::forward(const Tensor& input1, const Tensor& input2, const Tensor& target) {
  return margin_ranking_loss(input1, input2, target, options.margin(), options.reduction());
}

Tensor HingeEmbeddingLossImpl::forward(const Tensor& input, const Tensor& target) {
  return hinge_embedding_loss(input, target, options.margin(), options.reduction());
}

Tensor SoftMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return soft_margin_loss(input, target, options.reduction());
}

Tensor CosineEmbeddingLossImpl::forward(const Tensor& input1, const Tensor& input2, const Tensor& target) {
  return cosine_embedding_loss(input1, input2, target, options.margin(), options.reduction());
}

Tensor TripletMarginLossImpl::forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) {
  return triplet_margin_loss(anchor, positive, negative, options.margin(), options.p(), options.eps(), options.swap(),
                             options.reduction());
}

MultiLabelSoftMarginLossImpl::MultiLabelSoftMarginLossImpl(const MultiLabelSoftMarginLossOptions& options)
    : options(options), weight(buffer_of(*this, "weight", options.weight())) {}

Tensor MultiLabelSoftMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return multilabel_soft_margin_loss(input, target, weight, options.reduction());
}

MultiMarginLossImpl::MultiMarginLossImpl(const MultiMarginLossOptions& options)
    : options(options), weight(buffer_of(*this, "weight", options.weight())) {
  MINIDL_CHECK(options.p() == 1 || options.p() == 2, "MultiMarginLoss: only p == 1 and p == 2 are supported, got p = ",
               options.p());
}

Tensor MultiMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return multi_margin_loss(input, target, options.p(), options.margin(), weight, options.reduction());
}

Tensor MultiLabelMarginLossImpl::forward(const Tensor& input, const Tensor& target) {
  return multilabel_margin_loss(input, target, options.reduction());
}

Tensor PoissonNLLLossImpl::forward(const Tensor& input, const Tensor& target) {
  return poisson_nll_loss(input, target, options.log_input(), options.full(), options.eps(), options.reduction());
}

Tensor GaussianNLLLossImpl::forward(const Tensor& input, const Tensor& target, const Tensor& var) {
  return gaussian_nll_loss(input, target, var, options.full(), options.eps(), options.reduction());
}

}  // namespace minidl::nn
