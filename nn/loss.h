#pragma once
#include "nn/module.h"
#include "ops/loss.h"

namespace minidl::nn {

/// Cross-entropy of logits [N, C] against int64 class indices [N], mean over the batch.
///   nn::CrossEntropyLoss criterion;  Tensor loss = criterion(logits, target);
class CrossEntropyLossImpl : public Module {
 public:
  Tensor forward(const Tensor& logits, const Tensor& target);
  std::string name() const override { return "CrossEntropyLoss"; }
};
MINIDL_MODULE(CrossEntropyLoss);

/// Mean (or summed, or per-element) squared error.   nn::MSELoss criterion;  criterion(output, target)
class MSELossImpl : public Module {
 public:
  explicit MSELossImpl(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "MSELoss"; }
  Reduction reduction;
};
MINIDL_MODULE(MSELoss);

}  // namespace minidl::nn
