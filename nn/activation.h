#pragma once
// Activation modules over the elementwise and softmax ops (ReLU is in nn/layers.h).
#include <string>

#include "nn/module.h"
#include "nn/options.h"

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

struct LeakyReLUOptions {
  LeakyReLUOptions(double negative_slope = 0.01) : negative_slope_(negative_slope) {}  // NOLINT: implicit
  MINIDL_ARG(double, negative_slope);
};

/// x where x > 0, else negative_slope * x.   nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2))
class LeakyReLUImpl : public Module {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  LeakyReLUOptions options;
};
MINIDL_MODULE(LeakyReLU);

struct GELUOptions {
  MINIDL_ARG(std::string, approximate) = "none";  // "none" (erf) or "tanh"
};

/// x * Phi(x), exact or with PyTorch's tanh approximation.
///   nn::GELU(), nn::GELU(nn::GELUOptions().approximate("tanh"))
class GELUImpl : public Module {
 public:
  explicit GELUImpl(const GELUOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "approximate='" + options.approximate() + "'"; }
  GELUOptions options;
};
MINIDL_MODULE(GELU);

/// x * sigmoid(x).   nn::SiLU()
class SiLUImpl : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(SiLU);

}  // namespace minidl::nn
