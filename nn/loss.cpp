#include "nn/loss.h"

#include "ops/loss.h"

namespace minidl::nn {

Tensor CrossEntropyLossImpl::forward(const Tensor& logits, const Tensor& target) { return cross_entropy(logits, target); }

}  // namespace minidl::nn
