#include "nn/loss.h"

#include "ops/loss.h"

namespace minidl::nn {

Tensor detail::buffer_of(Module& module, const char* name, const Tensor& option) {
  return option.defined() ? module.register_buffer(name, option) : Tensor();
}

using detail::buffer_of;

CrossEntropyLossImpl::CrossEntropyLossImpl(const CrossEntropyLossOptions& options)
    : options(options), weight(buffer_of(*this, "weight", options.weight())) {}

Tensor CrossEntropyLossImpl::forward(const Tensor& logits, const Tensor& target) {
  return cross_entropy(logits, target, weight, options.reduction(), options.ignore_index(), options.label_smoothing());
}

NLLLossImpl::NLLLossImpl(const NLLLossOptions& options)
    : options(options), weight(buffer_of(*this, "weight", options.weight())) {}

Tensor NLLLossImpl::forward(const Tensor& log_probs, const Tensor& target) {
  return nll_loss(log_probs, target, weight, options.reduction(), options.ignore_index());
}

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }

Tensor L1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return l1_loss(input, target, options.reduction());
}

BCEWithLogitsLossImpl::BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options)
    : options(options),
      weight(buffer_of(*this, "weight", options.weight())),
      pos_weight(buffer_of(*this, "pos_weight", options.pos_weight())) {}

Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, weight, pos_weight, options.reduction());
}

BCELossImpl::BCELossImpl(const BCELossOptions& options)
    : options(options), weight(buffer_of(*this, "weight", options.weight())) {}

Tensor BCELossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy(input, target, weight, options.reduction());
}

Tensor KLDivLossImpl::forward(const Tensor& input, const Tensor& target) {
  return kl_div(input, target, options.reduction(), options.log_target());
}

Tensor SmoothL1LossImpl::forward(const Tensor& input, const Tensor& target) {
  return smooth_l1_loss(input, target, options.reduction(), options.beta());
}

Tensor HuberLossImpl::forward(const Tensor& input, const Tensor& target) {
  return huber_loss(input, target, options.reduction(), options.delta());
}

}  // namespace minidl::nn
