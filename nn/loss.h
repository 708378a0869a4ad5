#pragma once
#include "nn/module.h"

namespace minidl::nn {

/// Cross-entropy of logits [N, C] against int64 class indices [N], mean over the batch.
///   nn::CrossEntropyLoss criterion;  Tensor loss = criterion(logits, target);
class CrossEntropyLossImpl : public Module {
 public:
  Tensor forward(const Tensor& logits, const Tensor& target);
  std::string name() const override { return "CrossEntropyLoss"; }
};
MINIDL_MODULE(CrossEntropyLoss);

}  // namespace minidl::nn
