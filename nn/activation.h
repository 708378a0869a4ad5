#pragma once
// Activation modules over the elementwise and softmax ops (ReLU is in nn/layers.h).
#include "nn/module.h"

namespace minidl::nn {

/// 1 / (1 + exp(-x)) elementwise.   nn::Sigmoid()
class SigmoidImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(Sigmoid);

/// tanh(x) elementwise.   nn::Tanh()
class TanhImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(Tanh);

/// softmax over `dim`.   nn::Softmax(1)
class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};
MINIDL_MODULE(Softmax);

/// log(softmax(x)) over `dim`, computed stably.   nn::LogSoftmax(1)
class LogSoftmaxImpl : public Module {
 public:
  explicit LogSoftmaxImpl(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};
MINIDL_MODULE(LogSoftmax);

}  // namespace minidl::nn
