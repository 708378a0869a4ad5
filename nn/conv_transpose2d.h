#pragma once
#include <optional>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

struct ConvTranspose2dOptions {
  ConvTranspose2dOptions(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  MINIDL_ARG(int64_t, in_channels);
  MINIDL_ARG(int64_t, out_channels);
  MINIDL_ARG(Size2, kernel_size);
  MINIDL_ARG(Size2, stride) = 1;
  MINIDL_ARG(Size2, padding) = 0;
  MINIDL_ARG(Size2, output_padding) = 0;  // extra rows/columns on one side; below stride or dilation
  MINIDL_ARG(int64_t, groups) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(Size2, dilation) = 1;
};

/// 2-D transposed convolution over [N, C_in, H, W]; weight [in, out / groups, kh, kw], as PyTorch.
/// Output size (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.
///   nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(64, 32, 4).stride(2).padding(1));  // doubles H, W
class ConvTranspose2dImpl : public Module {
 public:
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options);
  MINIDL_CLONE_FROM_OPTIONS(ConvTranspose2dImpl)
  Tensor forward(const Tensor& input) override;
  /// Picks output_padding so that the output is `output_size` (height, width), as PyTorch's
  /// forward(input, output_size); the size must be reachable, i.e. within stride - 1 of the smallest.
  Tensor forward(const Tensor& input, Size2 output_size);
  std::string name() const override { return "ConvTranspose2d"; }
  std::string extra_repr() const override;
  void reset_parameters();

  ConvTranspose2dOptions options;
  Tensor weight, bias;

 private:
  Tensor run(const Tensor& input, Size2 output_padding);
};
MINIDL_MODULE(ConvTranspose2d);

}  // namespace minidl::nn
