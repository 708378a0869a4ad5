#pragma once
// Padding layers, as torch.nn's: ZeroPad1d/2d, ConstantPad1d/2d, ReflectionPad1d/2d and
// ReplicationPad1d/2d, each a call of ops/pad.h's pad in its mode. The pads are {left, right} for
// the 1d layers and {left, right, top, bottom} for the 2d ones; one number pads every side.
// They print as libtorch's: `ReflectionPad1d(padding=[3, 1])`, `ConstantPad2d(padding=[1, 1, 2, 0], value=3.5)`.
#include <cstddef>
#include <vector>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

/// The pads of a D-dimensional padding layer: 2 * D of them, or one number for every side.
///   nn::ReflectionPad2dOptions({1, 1, 2, 0}), nn::ZeroPad2dOptions(3)
template <size_t D>
struct PaddingOptions {
  PaddingOptions(int64_t padding) : padding_(2 * D, padding) {}                       // NOLINT: implicit, as in PyTorch
  PaddingOptions(std::vector<int64_t> padding) : padding_(std::move(padding)) {}      // NOLINT
  PaddingOptions(std::initializer_list<int64_t> padding) : padding_(padding) {}       // NOLINT
  MINIDL_ARG(std::vector<int64_t>, padding);
};
template <size_t D>
using ZeroPadOptions = PaddingOptions<D>;
template <size_t D>
using ReflectionPadOptions = PaddingOptions<D>;
template <size_t D>
using ReplicationPadOptions = PaddingOptions<D>;
using ZeroPad1dOptions = ZeroPadOptions<1>;
using ZeroPad2dOptions = ZeroPadOptions<2>;
using ReflectionPad1dOptions = ReflectionPadOptions<1>;
using ReflectionPad2dOptions = ReflectionPadOptions<2>;
using ReplicationPad1dOptions = ReplicationPadOptions<1>;
using ReplicationPad2dOptions = ReplicationPadOptions<2>;

/// The pads and the fill value of a constant padding layer.   nn::ConstantPad1dOptions({3, 1}, 3.5)
template <size_t D>
struct ConstantPadOptions {
  ConstantPadOptions(int64_t padding, double value) : padding_(2 * D, padding), value_(value) {}
  ConstantPadOptions(std::vector<int64_t> padding, double value) : padding_(std::move(padding)), value_(value) {}
  MINIDL_ARG(std::vector<int64_t>, padding);
  MINIDL_ARG(double, value);
};
using ConstantPad1dOptions = ConstantPadOptions<1>;
using ConstantPad2dOptions = ConstantPadOptions<2>;

/// What the padding layers share: the checks of the options and the input, forward and printing.
/// `D` dims are padded; the layer named `Name` pads in `mode` (ops/pad.h).
class PadLayerBase : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 protected:
  PadLayerBase(const char* layer, size_t dims, const char* mode, const std::vector<int64_t>& padding, double value);

 private:
  const char* layer_;
  size_t dims_;
  const char* mode_;
  std::vector<int64_t> padding_;
  double value_;
};

#define MINIDL_PADDING_LAYER(Name, D, Options, mode, value_expr)                                       \
  class Name##Impl : public PadLayerBase {                                                            \
   public:                                                                                            \
    MINIDL_CLONE_FROM_OPTIONS(Name##Impl)                                                             \
    explicit Name##Impl(const Options& options) : PadLayerBase(#Name, D, mode, options.padding(), value_expr), options(options) {} \
    std::string name() const override { return #Name; }                                              \
    Options options;                                                                                  \
  };                                                                                                  \
  MINIDL_MODULE(Name)

/// Pads the last dim of [N, C, W] (or any tensor) with zeros.   nn::ZeroPad1d(2)
MINIDL_PADDING_LAYER(ZeroPad1d, 1, ZeroPad1dOptions, "constant", 0.0);
/// Pads the last two dims of [N, C, H, W] (or any tensor of 2 or more) with zeros.   nn::ZeroPad2d(ZeroPad2dOptions({1, 1, 2, 0}))
MINIDL_PADDING_LAYER(ZeroPad2d, 2, ZeroPad2dOptions, "constant", 0.0);
/// Pads the last dim with `value`.   nn::ConstantPad1d(nn::ConstantPad1dOptions({3, 1}, 3.5))
MINIDL_PADDING_LAYER(ConstantPad1d, 1, ConstantPad1dOptions, "constant", options.value());
/// Pads the last two dims with `value`.   nn::ConstantPad2d(nn::ConstantPad2dOptions(2, -1.0))
MINIDL_PADDING_LAYER(ConstantPad2d, 2, ConstantPad2dOptions, "constant", options.value());
/// Mirrors the last dim of [C, W] or [N, C, W] without repeating the edge (each pad < W).   nn::ReflectionPad1d(2)
MINIDL_PADDING_LAYER(ReflectionPad1d, 1, ReflectionPad1dOptions, "reflect", 0.0);
/// Mirrors the last two dims of [C, H, W] or [N, C, H, W].   nn::ReflectionPad2d(ReflectionPad2dOptions({1, 1, 2, 0}))
MINIDL_PADDING_LAYER(ReflectionPad2d, 2, ReflectionPad2dOptions, "reflect", 0.0);
/// Repeats the edge of the last dim of [C, W] or [N, C, W].   nn::ReplicationPad1d(2)
MINIDL_PADDING_LAYER(ReplicationPad1d, 1, ReplicationPad1dOptions, "replicate", 0.0);
/// Repeats the edges of the last two dims of [C, H, W] or [N, C, H, W].   nn::ReplicationPad2d(1)
MINIDL_PADDING_LAYER(ReplicationPad2d, 2, ReplicationPad2dOptions, "replicate", 0.0);
#undef MINIDL_PADDING_LAYER

}  // namespace minidl::nn
