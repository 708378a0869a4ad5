#pragma once
// Padding, as torch::nn::functional::pad: constant, reflect, replicate and circular.
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// Pads x by `pad` = {left, right} for the last dimension, then {top, bottom} for the one before,
/// and so on (pad.size() / 2 dimensions, from the last), as torch::nn::functional::pad. mode:
/// "constant" (fills with `value`; a negative pad crops), "reflect" (mirrors without repeating the
/// edge: each pad < that dimension's size), "replicate" (repeats the edge) or "circular" (wraps
/// around: each pad <= the size). The non-constant modes pad the last 1, 2 or 3 dimensions of a
/// tensor with one or two more (batch and channels), as PyTorch's. Differentiable.
///   pad(x, {1, 1, 2, 2}), pad(images, {4, 4, 4, 4}, "reflect")
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const std::string& mode = "constant", double value = 0);

/// torch::nn::functional::PadFuncOptions: the pads, the mode and the fill value.
///   nn::functional::pad(x, nn::functional::PadFuncOptions({1, 1}).mode("reflect"))
struct PadOptions {
  PadOptions(std::vector<int64_t> pad) : pad_(std::move(pad)) {}  // NOLINT: implicit, as in PyTorch
  PadOptions& pad(std::vector<int64_t> value) { pad_ = std::move(value); return *this; }
  PadOptions& mode(std::string value) { mode_ = std::move(value); return *this; }
  PadOptions& value(double v) { value_ = v; return *this; }
  const std::vector<int64_t>& pad() const { return pad_; }
  const std::string& mode() const { return mode_; }
  double value() const { return value_; }

 private:
  std::vector<int64_t> pad_;
  std::string mode_ = "constant";
  double value_ = 0;
};

/// pad(x, options.pad(), options.mode(), options.value()).
Tensor pad(const Tensor& x, const PadOptions& options);

}  // namespace minidl
