#pragma once
// More of torch.nn's layers, each over an op of ops/: Unflatten, PixelShuffle, PixelUnshuffle,
// Threshold, Softmax2d and Bilinear.
#include <vector>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

struct UnflattenOptions {
  UnflattenOptions(int64_t dim, std::vector<int64_t> sizes) : dim_(dim), sizes_(std::move(sizes)) {}
  MINIDL_ARG(int64_t, dim);
  MINIDL_ARG(std::vector<int64_t>, sizes);  // their product is the dim's size; one may be -1
};

/// Splits dim `dim` into `sizes`, Flatten's inverse.   nn::Unflatten(1, std::vector<int64_t>{2, 5})  // [N, 10] -> [N, 2, 5]
class UnflattenImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(UnflattenImpl)
  UnflattenImpl(int64_t dim, std::vector<int64_t> sizes) : options(dim, std::move(sizes)) {}
  explicit UnflattenImpl(const UnflattenOptions& options) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Unflatten"; }
  std::string extra_repr() const override;
  UnflattenOptions options;
};
MINIDL_MODULE(Unflatten);

struct PixelShuffleOptions {
  PixelShuffleOptions(int64_t upscale_factor) : upscale_factor_(upscale_factor) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(int64_t, upscale_factor);
};

/// [*, C r^2, H, W] -> [*, C, H r, W r].   nn::PixelShuffle(3)
class PixelShuffleImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(PixelShuffleImpl)
  explicit PixelShuffleImpl(const PixelShuffleOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "PixelShuffle"; }
  std::string extra_repr() const override { return "upscale_factor=" + std::to_string(options.upscale_factor()); }
  PixelShuffleOptions options;
};
MINIDL_MODULE(PixelShuffle);

struct PixelUnshuffleOptions {
  PixelUnshuffleOptions(int64_t downscale_factor) : downscale_factor_(downscale_factor) {}  // NOLINT: implicit
  MINIDL_ARG(int64_t, downscale_factor);
};

/// [*, C, H r, W r] -> [*, C r^2, H, W].   nn::PixelUnshuffle(2)
class PixelUnshuffleImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(PixelUnshuffleImpl)
  explicit PixelUnshuffleImpl(const PixelUnshuffleOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "PixelUnshuffle"; }
  std::string extra_repr() const override { return "downscale_factor=" + std::to_string(options.downscale_factor()); }
  PixelUnshuffleOptions options;
};
MINIDL_MODULE(PixelUnshuffle);

struct ThresholdOptions {
  ThresholdOptions(double threshold, double value) : threshold_(threshold), value_(value) {}
  MINIDL_ARG(double, threshold);
  MINIDL_ARG(double, value);  // what replaces the elements <= threshold
};

/// x where x > threshold, else value.   nn::Threshold(0.1, 20.0)
class ThresholdImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(ThresholdImpl)
  ThresholdImpl(double threshold, double value) : options(threshold, value) {}
  explicit ThresholdImpl(const ThresholdOptions& options) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Threshold"; }
  std::string extra_repr() const override;
  ThresholdOptions options;
};
MINIDL_MODULE(Threshold);

/// softmax over the channels of [N, C, H, W] (or [C, H, W]) at every pixel.   nn::Softmax2d()
class Softmax2dImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(Softmax2dImpl)
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Softmax2d"; }
};
MINIDL_MODULE(Softmax2d);

struct BilinearOptions {
  BilinearOptions(int64_t in1_features, int64_t in2_features, int64_t out_features)
      : in1_features_(in1_features), in2_features_(in2_features), out_features_(out_features) {}
  MINIDL_ARG(int64_t, in1_features);
  MINIDL_ARG(int64_t, in2_features);
  MINIDL_ARG(int64_t, out_features);
  MINIDL_ARG(bool, bias) = true;
};

/// y = x1^T A x2 + b for each pair of rows.   nn::Bilinear bl(20, 30, 40);  bl(x1, x2)  // [N, 20], [N, 30] -> [N, 40]
class BilinearImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(BilinearImpl)
  BilinearImpl(int64_t in1_features, int64_t in2_features, int64_t out_features)
      : BilinearImpl(BilinearOptions(in1_features, in2_features, out_features)) {}
  explicit BilinearImpl(const BilinearOptions& options);
  Tensor forward(const Tensor& input1, const Tensor& input2);
  std::string name() const override { return "Bilinear"; }
  std::string extra_repr() const override;
  /// weight and bias uniform in [-1/sqrt(in1_features), 1/sqrt(in1_features)], as PyTorch's.
  void reset_parameters();
  BilinearOptions options;
  Tensor weight;  // [out_features, in1_features, in2_features]
  Tensor bias;    // [out_features], when options.bias()
};
MINIDL_MODULE(Bilinear);

}  // namespace minidl::nn
