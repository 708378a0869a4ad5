#pragma once
// Parameter-free layers: ReLU, Flatten, Dropout, Dropout2d, Identity, MaxPool2d.
#include <optional>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

/// max(x, 0) elementwise.   nn::ReLU()
class ReLUImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(ReLUImpl)
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "ReLU"; }
};
MINIDL_MODULE(ReLU);

struct FlattenOptions {
  MINIDL_ARG(int64_t, start_dim) = 1;
  MINIDL_ARG(int64_t, end_dim) = -1;
};

/// Flattens dims start_dim..end_dim (by default all but the batch).   nn::Flatten()
class FlattenImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(FlattenImpl)
  explicit FlattenImpl(const FlattenOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  FlattenOptions options;
};
MINIDL_MODULE(Flatten);

struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(double, p);
};

/// Zeroes elements with probability p while training (scaling the rest); identity in eval().
///   nn::Dropout(0.25)
class DropoutImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(DropoutImpl)
  explicit DropoutImpl(const DropoutOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  DropoutOptions options;
};
MINIDL_MODULE(Dropout);

/// libtorch's name: Dropout2d takes DropoutOptions.
using Dropout2dOptions = DropoutOptions;

/// Zeroes whole channels of [N, C, H, W] (or [C, H, W]) with probability p while training, scaling
/// the rest; identity in eval().   nn::Dropout2d(0.2)
class Dropout2dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(Dropout2dImpl)
  explicit Dropout2dImpl(const Dropout2dOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Dropout2d"; }
  std::string extra_repr() const override;
  Dropout2dOptions options;
};
MINIDL_MODULE(Dropout2d);

/// Returns its input: a placeholder layer (any constructor arguments are ignored, as PyTorch's).
///   nn::Identity()
class IdentityImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(IdentityImpl)
  template <class... Args>
  explicit IdentityImpl(const Args&...) {}
  Tensor forward(const Tensor& input) override { return input; }
  std::string name() const override { return "Identity"; }
};
MINIDL_MODULE(Identity);

struct MaxPool2dOptions {
  MaxPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(Size2, kernel_size);
  MINIDL_ARG(std::optional<Size2>, stride);  // defaults to kernel_size
  MINIDL_ARG(Size2, padding) = 0;
  MINIDL_ARG(Size2, dilation) = 1;
  MINIDL_ARG(bool, ceil_mode) = false;  // round the output size up (ops/window.h)
};

/// Max over windows of [N, C, H, W].   nn::MaxPool2d(2)
class MaxPool2dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(MaxPool2dImpl)
  explicit MaxPool2dImpl(Size2 kernel_size) : options(kernel_size) {}
  explicit MaxPool2dImpl(const MaxPool2dOptions& options) : options(options) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  MaxPool2dOptions options;
};
MINIDL_MODULE(MaxPool2d);

}  // namespace minidl::nn
