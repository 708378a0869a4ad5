#pragma once
// Activation modules over the elementwise and softmax ops (ReLU is in nn/layers.h).
#include <string>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

/// 1 / (1 + exp(-x)) elementwise.   nn::Sigmoid()
class SigmoidImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(SigmoidImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(Sigmoid);

/// tanh(x) elementwise.   nn::Tanh()
class TanhImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(TanhImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(Tanh);

/// softmax over `dim`.   nn::Softmax(1)
class SoftmaxImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(SoftmaxImpl)
  explicit SoftmaxImpl(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};
MINIDL_MODULE(Softmax);

/// log(softmax(x)) over `dim`, computed stably.   nn::LogSoftmax(1)
class LogSoftmaxImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(LogSoftmaxImpl)
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
  MINIDL_CLONE_FROM_OPTIONS(LeakyReLUImpl)
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
  MINIDL_CLONE_FROM_OPTIONS(GELUImpl)
  explicit GELUImpl(const GELUOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "approximate='" + options.approximate() + "'"; }
  GELUOptions options;
};
MINIDL_MODULE(GELU);

/// x * sigmoid(x).   nn::SiLU()
class SiLUImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(SiLUImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(SiLU);

struct SoftplusOptions {
  MINIDL_ARG(double, beta) = 1.0;
  MINIDL_ARG(double, threshold) = 20.0;
};

/// log(1 + exp(beta * x)) / beta, linear above threshold.   nn::Softplus(nn::SoftplusOptions().beta(2))
class SoftplusImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(SoftplusImpl)
  explicit SoftplusImpl(const SoftplusOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  SoftplusOptions options;
};
MINIDL_MODULE(Softplus);

struct ELUOptions {
  MINIDL_ARG(double, alpha) = 1.0;
};

/// x where x > 0, else alpha * (exp(x) - 1).   nn::ELU(nn::ELUOptions().alpha(0.5))
class ELUImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(ELUImpl)
  explicit ELUImpl(const ELUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  ELUOptions options;
};
MINIDL_MODULE(ELU);

/// Scaled ELU with the self-normalizing constants.   nn::SELU()
class SELUImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(SELUImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(SELU);

/// x / (1 + |x|).   nn::Softsign()
class SoftsignImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(SoftsignImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(Softsign);

/// x - tanh(x).   nn::Tanhshrink()
class TanhshrinkImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(TanhshrinkImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(Tanhshrink);

struct HardshrinkOptions {
  MINIDL_ARG(double, lambda) = 0.5;
};

/// x where |x| > lambda, else 0.   nn::Hardshrink(nn::HardshrinkOptions().lambda(0.1))
class HardshrinkImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(HardshrinkImpl)
  explicit HardshrinkImpl(const HardshrinkOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  HardshrinkOptions options;
};
MINIDL_MODULE(Hardshrink);

struct SoftshrinkOptions {
  MINIDL_ARG(double, lambda) = 0.5;
};

/// x -+ lambda outside [-lambda, lambda], else 0.   nn::Softshrink()
class SoftshrinkImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(SoftshrinkImpl)
  explicit SoftshrinkImpl(const SoftshrinkOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  SoftshrinkOptions options;
};
MINIDL_MODULE(Softshrink);

struct CELUOptions {
  MINIDL_ARG(double, alpha) = 1.0;
};

/// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).   nn::CELU(nn::CELUOptions().alpha(2))
class CELUImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(CELUImpl)
  explicit CELUImpl(const CELUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  CELUOptions options;
};
MINIDL_MODULE(CELU);

/// softmax(-x) over `dim`.   nn::Softmin(1)
class SoftminImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(SoftminImpl)
  explicit SoftminImpl(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};
MINIDL_MODULE(Softmin);

/// The gated linear unit over `dim`: a * sigmoid(b) for the halves a, b.   nn::GLU(), nn::GLU(1)
class GLUImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(GLUImpl)
  explicit GLUImpl(int64_t dim = -1) : dim(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};
MINIDL_MODULE(GLU);

/// x * tanh(softplus(x)).   nn::Mish()
class MishImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(MishImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(Mish);

struct HardtanhOptions {
  MINIDL_ARG(double, min_val) = -1.0;
  MINIDL_ARG(double, max_val) = 1.0;
};

/// clamp(x, min_val, max_val).   nn::Hardtanh(nn::HardtanhOptions().min_val(-2).max_val(2))
class HardtanhImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(HardtanhImpl)
  explicit HardtanhImpl(const HardtanhOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  HardtanhOptions options;
};
MINIDL_MODULE(Hardtanh);

/// min(max(x, 0), 6).   nn::ReLU6()
class ReLU6Impl : public Module {
 public:
  MINIDL_CLONE_STATELESS(ReLU6Impl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(ReLU6);

struct PReLUOptions {
  MINIDL_ARG(int64_t, num_parameters) = 1;  // 1 (one shared slope) or the input's channels
  MINIDL_ARG(double, init) = 0.25;
};

/// x where x > 0, else weight * x, with a learned slope per channel (or one shared).
///   nn::PReLU(nn::PReLUOptions().num_parameters(64))
class PReLUImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(PReLUImpl)
  explicit PReLUImpl(const PReLUOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters();
  PReLUOptions options;
  Tensor weight;  // [num_parameters]
};
MINIDL_MODULE(PReLU);

/// log(sigmoid(x)), computed stably.   nn::LogSigmoid()
class LogSigmoidImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(LogSigmoidImpl)
  Tensor forward(const Tensor& input) override;
};
MINIDL_MODULE(LogSigmoid);

}  // namespace minidl::nn

namespace minidl::nn::functional {

// The functional forms with libtorch's option structs; the plain forms (softplus(x, beta, threshold)
// and the others) are in nn/functional.h.
using SoftplusFuncOptions = SoftplusOptions;
using ELUFuncOptions = ELUOptions;
using HardtanhFuncOptions = HardtanhOptions;
/// F::softplus(x, F::SoftplusFuncOptions().beta(2))
Tensor softplus(const Tensor& input, const SoftplusFuncOptions& options);
/// F::elu(x, F::ELUFuncOptions().alpha(0.5))
Tensor elu(const Tensor& input, const ELUFuncOptions& options);
/// F::hardtanh(x, F::HardtanhFuncOptions().min_val(0).max_val(6))
Tensor hardtanh(const Tensor& input, const HardtanhFuncOptions& options);

}  // namespace minidl::nn::functional
