#pragma once
// Normalization layers: BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm, GroupNorm.
#include <optional>

#include "nn/init.h"
#include "nn/module.h"
#include "nn/options.h"
#include "ops/creation.h"

namespace minidl::nn {

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(int64_t, num_features);
  MINIDL_ARG(double, eps) = 1e-5;
  /// The weight of each new batch in the running statistics; std::nullopt: their cumulative average
  /// (reads num_batches_tracked on the host every step, a sync on CUDA).
  MINIDL_ARG(std::optional<double>, momentum) = 0.1;
  MINIDL_ARG(bool, affine) = true;
  MINIDL_ARG(bool, track_running_stats) = true;
};

/// What BatchNorm1d and BatchNorm2d share; they differ only in the input ranks they accept.
/// Training normalizes with the batch's statistics and updates the running ones (buffers, so they
/// are in state_dict() and move with to()); eval() normalizes with the running statistics.
/// What batch and instance norm share, as libtorch's NormImplBase: the affine weight and bias and the
/// running statistics over options.num_features() channels, made as the options say.
template <class Options>
class NormImplBase : public Module {
 public:
  /// running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void reset_running_stats() {
    if (!options.track_running_stats()) return;
    fill_(running_mean, 0);
    fill_(running_var, 1);
    fill_(num_batches_tracked, 0);
  }
  /// The running statistics, and weight = 1, bias = 0.
  void reset_parameters() {
    reset_running_stats();
    if (options.affine()) {
      init::ones_(weight);
      init::zeros_(bias);
    }
  }

  Options options;
  Tensor weight, bias;                                      // [C], when affine
  Tensor running_mean, running_var, num_batches_tracked;    // [C], [C], int64 0-d; when tracking

 protected:
  NormImplBase(const Options& options, const char* kind) : options(options) {
    const int64_t c = options.num_features();
    MINIDL_CHECK(c > 0, kind, ": expected num_features > 0, got ", c);
    if (options.affine()) {
      weight = register_parameter("weight", Tensor::empty({c}));
      bias = register_parameter("bias", Tensor::empty({c}));
    }
    if (options.track_running_stats()) {
      running_mean = register_buffer("running_mean", Tensor::empty({c}));
      running_var = register_buffer("running_var", Tensor::empty({c}));
      num_batches_tracked = register_buffer("num_batches_tracked", Tensor::empty({}, kInt64));
    }
    reset_parameters();
  }
};

class BatchNormImplBase : public NormImplBase<BatchNormOptions> {
 public:
  explicit BatchNormImplBase(const BatchNormOptions& options) : NormImplBase(options, "BatchNorm") {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 protected:
  virtual void check_input_dim(const Tensor& input) const = 0;
};

/// Batch norm over [N, C] or [N, C, L].   nn::BatchNorm1d bn(128);
class BatchNorm1dImpl : public BatchNormImplBase {
 public:
  using BatchNormImplBase::BatchNormImplBase;
  MINIDL_CLONE_FROM_OPTIONS(BatchNorm1dImpl)

 protected:
  void check_input_dim(const Tensor& input) const override;
};
MINIDL_MODULE(BatchNorm1d);

/// Batch norm over [N, C, H, W], per channel.   nn::BatchNorm2d bn(nn::BatchNormOptions(32).momentum(0.01));
class BatchNorm2dImpl : public BatchNormImplBase {
 public:
  using BatchNormImplBase::BatchNormImplBase;
  MINIDL_CLONE_FROM_OPTIONS(BatchNorm2dImpl)

 protected:
  void check_input_dim(const Tensor& input) const override;
};
MINIDL_MODULE(BatchNorm2d);

struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT: implicit
  MINIDL_ARG(Shape, normalized_shape);
  MINIDL_ARG(double, eps) = 1e-5;
  MINIDL_ARG(bool, elementwise_affine) = true;
  /// With elementwise_affine: false keeps the weight and drops the bias.
  MINIDL_ARG(bool, bias) = true;
};

/// Normalizes the trailing dims normalized_shape of each input.   nn::LayerNorm ln(Shape{512});
class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(LayerNormImpl)
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  /// weight = 1, bias = 0.
  void reset_parameters();

  LayerNormOptions options;
  Tensor weight, bias;  // normalized_shape, when elementwise_affine
};
MINIDL_MODULE(LayerNorm);

struct RMSNormOptions {
  RMSNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT: implicit
  MINIDL_ARG(Shape, normalized_shape);
  /// None: the machine epsilon of the computing dtype (float32, or float64), as PyTorch's.
  MINIDL_ARG(std::optional<double>, eps);
  MINIDL_ARG(bool, elementwise_affine) = true;
};

/// torch.nn.RMSNorm: x / sqrt(mean(x^2) + eps) * weight over the trailing dims normalized_shape
/// (no mean subtracted, no bias).   nn::RMSNorm norm(Shape{4096});
class RMSNormImpl : public Module {
 public:
  explicit RMSNormImpl(const RMSNormOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(RMSNormImpl)
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  /// weight = 1.
  void reset_parameters();

  RMSNormOptions options;
  Tensor weight;  // normalized_shape, when elementwise_affine
};
MINIDL_MODULE(RMSNorm);

struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels) : num_groups_(num_groups), num_channels_(num_channels) {}
  MINIDL_ARG(int64_t, num_groups);
  MINIDL_ARG(int64_t, num_channels);
  MINIDL_ARG(double, eps) = 1e-5;
  MINIDL_ARG(bool, affine) = true;
};

/// Normalizes each sample's groups of channels of [N, C, *].   nn::GroupNorm gn(8, 64);
class GroupNormImpl : public Module {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels) : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}
  explicit GroupNormImpl(const GroupNormOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(GroupNormImpl)
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  /// weight = 1, bias = 0.
  void reset_parameters();

  GroupNormOptions options;
  Tensor weight, bias;  // [C], when affine
};
MINIDL_MODULE(GroupNorm);

}  // namespace minidl::nn
