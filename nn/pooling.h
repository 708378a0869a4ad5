#pragma once
// Pooling and resizing layers: AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, MaxPool1d,
// AvgPool1d, Upsample (MaxPool2d is in nn/layers.h).
#include <optional>
#include <string>
#include <tuple>

#include "nn/module.h"
#include "nn/options.h"
#include "ops/upsample.h"

namespace minidl::nn {

struct AvgPool2dOptions {
  AvgPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(Size2, kernel_size);
  MINIDL_ARG(std::optional<Size2>, stride);  // defaults to kernel_size
  MINIDL_ARG(Size2, padding) = 0;
  MINIDL_ARG(bool, ceil_mode) = false;          // round the output size up
  MINIDL_ARG(bool, count_include_pad) = true;   // the zero padding counts in each window's divisor
};

/// Mean over windows of [N, C, H, W].   nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1))
class AvgPool2dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(AvgPool2dImpl)
  explicit AvgPool2dImpl(Size2 kernel_size) : options(kernel_size) {}
  explicit AvgPool2dImpl(const AvgPool2dOptions& options) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  AvgPool2dOptions options;
};
MINIDL_MODULE(AvgPool2d);

struct AdaptiveAvgPool2dOptions {
  AdaptiveAvgPool2dOptions(Size2 output_size) : output_size_(output_size) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(Size2, output_size);
};

/// Mean over the windows that turn [N, C, H, W] into [N, C, out_h, out_w], whatever H and W.
///   nn::AdaptiveAvgPool2d(1)  // global average pooling
class AdaptiveAvgPool2dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(AdaptiveAvgPool2dImpl)
  explicit AdaptiveAvgPool2dImpl(Size2 output_size) : AdaptiveAvgPool2dImpl(AdaptiveAvgPool2dOptions(output_size)) {}
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;
  AdaptiveAvgPool2dOptions options;
};
MINIDL_MODULE(AdaptiveAvgPool2d);

struct UpsampleOptions {
  MINIDL_ARG(std::optional<Size2>, size);
  MINIDL_ARG(std::optional<Scale2>, scale_factor);
  MINIDL_ARG(std::string, mode) = "nearest";  // the only mode so far
};

/// Resizes [N, C, H, W] to `size`, or by `scale_factor`, as interpolate (ops/upsample.h).
///   nn::Upsample(nn::UpsampleOptions().scale_factor(2))
class UpsampleImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(UpsampleImpl)
  explicit UpsampleImpl(const UpsampleOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Upsample"; }
  std::string extra_repr() const override;
  UpsampleOptions options;
};
MINIDL_MODULE(Upsample);

struct AdaptiveMaxPool2dOptions {
  AdaptiveMaxPool2dOptions(Size2 output_size) : output_size_(output_size) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(Size2, output_size);
};

/// Max over the windows that turn [N, C, H, W] (or [C, H, W]) into [N, C, out_h, out_w].
///   nn::AdaptiveMaxPool2d pool(nn::AdaptiveMaxPool2dOptions({7, 7}));
///   auto [values, indices] = pool->forward_with_indices(x);
class AdaptiveMaxPool2dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(AdaptiveMaxPool2dImpl)
  explicit AdaptiveMaxPool2dImpl(Size2 output_size) : AdaptiveMaxPool2dImpl(AdaptiveMaxPool2dOptions(output_size)) {}
  explicit AdaptiveMaxPool2dImpl(const AdaptiveMaxPool2dOptions& options);
  Tensor forward(const Tensor& input) override;
  /// The values and their int64 indices (flat h * W + w in each plane), as adaptive_max_pool2d.
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& input);
  std::string name() const override { return "AdaptiveMaxPool2d"; }
  std::string extra_repr() const override;
  AdaptiveMaxPool2dOptions options;
};
MINIDL_MODULE(AdaptiveMaxPool2d);

struct MaxPool1dOptions {
  MaxPool1dOptions(int64_t kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(int64_t, kernel_size);
  MINIDL_ARG(std::optional<int64_t>, stride);  // defaults to kernel_size
  MINIDL_ARG(int64_t, padding) = 0;
  MINIDL_ARG(int64_t, dilation) = 1;
  MINIDL_ARG(bool, ceil_mode) = false;
};

/// Max over windows of [N, C, L] (or [C, L]).   nn::MaxPool1d(nn::MaxPool1dOptions(3).stride(2))
class MaxPool1dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(MaxPool1dImpl)
  explicit MaxPool1dImpl(int64_t kernel_size) : options(kernel_size) {}
  explicit MaxPool1dImpl(const MaxPool1dOptions& options) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "MaxPool1d"; }
  std::string extra_repr() const override;
  MaxPool1dOptions options;
};
MINIDL_MODULE(MaxPool1d);

struct AvgPool1dOptions {
  AvgPool1dOptions(int64_t kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(int64_t, kernel_size);
  MINIDL_ARG(std::optional<int64_t>, stride);  // defaults to kernel_size
  MINIDL_ARG(int64_t, padding) = 0;
  MINIDL_ARG(bool, ceil_mode) = false;
  MINIDL_ARG(bool, count_include_pad) = true;
};

/// Mean over windows of [N, C, L] (or [C, L]).   nn::AvgPool1d(nn::AvgPool1dOptions(3).stride(1).padding(1))
class AvgPool1dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(AvgPool1dImpl)
  explicit AvgPool1dImpl(int64_t kernel_size) : options(kernel_size) {}
  explicit AvgPool1dImpl(const AvgPool1dOptions& options) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "AvgPool1d"; }
  std::string extra_repr() const override;
  AvgPool1dOptions options;
};
MINIDL_MODULE(AvgPool1d);

}  // namespace minidl::nn
