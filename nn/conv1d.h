#pragma once
// nn::Conv1d, over [N, C, L] (or [C, L]).
#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

struct Conv1dOptions {
  Conv1dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  MINIDL_ARG(int64_t, in_channels);
  MINIDL_ARG(int64_t, out_channels);
  MINIDL_ARG(int64_t, kernel_size);
  MINIDL_ARG(int64_t, stride) = 1;
  MINIDL_ARG(int64_t, padding) = 0;
  MINIDL_ARG(int64_t, dilation) = 1;
  MINIDL_ARG(int64_t, groups) = 1;
  MINIDL_ARG(bool, bias) = true;
};

/// 1-D convolution over [N, C, L]; weight [out, in / groups, k], initialized as PyTorch's.
///   nn::Conv1d conv(nn::Conv1dOptions(16, 32, 3).padding(1));
class Conv1dImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(Conv1dImpl)
  Conv1dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv1dImpl(Conv1dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv1dImpl(const Conv1dOptions& options);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Conv1d"; }
  std::string extra_repr() const override;
  void reset_parameters();

  Conv1dOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(Conv1d);

}  // namespace minidl::nn
