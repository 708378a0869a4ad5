#pragma once
// InstanceNorm1d, InstanceNorm2d and LocalResponseNorm, over ops/normalization_more.h.
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/options.h"

namespace minidl::nn {

struct InstanceNormOptions {
  InstanceNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(int64_t, num_features);
  MINIDL_ARG(double, eps) = 1e-5;
  MINIDL_ARG(double, momentum) = 0.1;  // the weight of each new batch in the running statistics
  MINIDL_ARG(bool, affine) = false;
  MINIDL_ARG(bool, track_running_stats) = false;
};
using InstanceNorm1dOptions = InstanceNormOptions;
using InstanceNorm2dOptions = InstanceNormOptions;

/// What InstanceNorm1d and InstanceNorm2d share; they differ in the input ranks they accept (with or
/// without a batch dim). Normalizes each sample's channels with their own statistics; with
/// track_running_stats, training updates the running statistics (buffers) and eval() normalizes
/// with them, as PyTorch's. num_batches_tracked is registered but, as PyTorch's, not counted.
class InstanceNormImplBase : public NormImplBase<InstanceNormOptions> {
 public:
  explicit InstanceNormImplBase(const InstanceNormOptions& options) : NormImplBase(options, "InstanceNorm") {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 protected:
  /// The number of dims of a batched input (3 for 1d, 4 for 2d); one fewer is an unbatched one.
  virtual int64_t batched_dims() const = 0;
};

/// Instance norm over [N, C, L] (or [C, L]).   nn::InstanceNorm1d norm(nn::InstanceNorm1dOptions(64).affine(true));
class InstanceNorm1dImpl : public InstanceNormImplBase {
 public:
  using InstanceNormImplBase::InstanceNormImplBase;
  MINIDL_CLONE_FROM_OPTIONS(InstanceNorm1dImpl)
  std::string name() const override { return "InstanceNorm1d"; }

 protected:
  int64_t batched_dims() const override { return 3; }
};
MINIDL_MODULE(InstanceNorm1d);

/// Instance norm over [N, C, H, W] (or [C, H, W]).   nn::InstanceNorm2d norm(3);
class InstanceNorm2dImpl : public InstanceNormImplBase {
 public:
  using InstanceNormImplBase::InstanceNormImplBase;
  MINIDL_CLONE_FROM_OPTIONS(InstanceNorm2dImpl)
  std::string name() const override { return "InstanceNorm2d"; }

 protected:
  int64_t batched_dims() const override { return 4; }
};
MINIDL_MODULE(InstanceNorm2d);

struct LocalResponseNormOptions {
  LocalResponseNormOptions(int64_t size) : size_(size) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(int64_t, size);  // the channels in each window
  MINIDL_ARG(double, alpha) = 1e-4;
  MINIDL_ARG(double, beta) = 0.75;
  MINIDL_ARG(double, k) = 1.0;
};

/// Normalizes each channel by the squares of its neighbours (AlexNet's).   nn::LocalResponseNorm(2)
class LocalResponseNormImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(LocalResponseNormImpl)
  explicit LocalResponseNormImpl(const LocalResponseNormOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "LocalResponseNorm"; }
  std::string extra_repr() const override;
  LocalResponseNormOptions options;
};
MINIDL_MODULE(LocalResponseNorm);

}  // namespace minidl::nn
