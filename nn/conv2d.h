#pragma once
#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  MINIDL_ARG(int64_t, in_channels);
  MINIDL_ARG(int64_t, out_channels);
  MINIDL_ARG(Size2, kernel_size);
  MINIDL_ARG(Size2, stride) = 1;
  MINIDL_ARG(Size2, padding) = 0;
  MINIDL_ARG(Size2, dilation) = 1;
  MINIDL_ARG(bool, bias) = true;
};

/// 2-D convolution over [N, C, H, W]; weight [out, in, kh, kw].
///   nn::Conv2d conv(nn::Conv2dOptions(1, 32, 3).padding(1));
class Conv2dImpl : public Module {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv2dImpl(const Conv2dOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(Conv2dImpl)
  Tensor forward(const Tensor& input) override;
  /// relu(forward(input)) as one op (ops/conv2d_relu.h): what nn::Sequential runs for a Conv2d
  /// followed by a ReLU.
  Tensor forward_relu(const Tensor& input);
  /// max_pool2d(relu(forward(input)), pool) as one op, for a pool of non-overlapping pool x pool
  /// windows: what nn::Sequential runs for Conv2d, ReLU and such a MaxPool2d.
  Tensor forward_relu_max_pool2d(const Tensor& input, int64_t pool);
  std::string name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  void reset_parameters();

  Conv2dOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(Conv2d);

}  // namespace minidl::nn
