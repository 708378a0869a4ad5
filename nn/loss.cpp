#include "nn/loss.h"

#include "ops/loss.h"

namespace minidl::nn {

Tensor CrossEntropyLossImpl::forward(const Tensor& logits, const Tensor& target) { return cross_entropy(logits, target); }

Tensor MSELossImpl::forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }

}  // namespace minidl::nn
