#pragma once
// Nearest-neighbour resizing of images, as torch.nn.functional.interpolate(mode="nearest").
#include <optional>
#include <string>

#include "core/tensor.h"

namespace minidl {

/// A (height, width) pair of scale factors that also accepts one number for both.
struct Scale2 {
  double h, w;
  Scale2(double both) : h(both), w(both) {}  // NOLINT: implicit on purpose, like Size2
  Scale2(double h, double w) : h(h), w(w) {}
  friend bool operator==(const Scale2&, const Scale2&) = default;
};

/// x [N, C, H, W] -> [N, C, out_h, out_w]: output row i copies input row min(floor(i * s), H - 1)
/// with s = 1 / scales.h when given (the factor the caller asked for), else H / out_h, computed in
/// float as PyTorch does; columns likewise. Backward sums each output's gradient into the element
/// it copied.   upsample_nearest2d(x, {28, 28})
Tensor upsample_nearest2d(const Tensor& x, Size2 output_size, std::optional<Scale2> scales = std::nullopt);

/// The arguments of interpolate: exactly one of size and scale_factor. With scale_factor the output
/// is floor(H * scale) x floor(W * scale) and, unless recompute_scale_factor, the factor itself
/// places the samples (PyTorch's default).   InterpolateOptions().scale_factor(2)
struct InterpolateOptions {
  InterpolateOptions& size(Size2 value) { size_ = value; return *this; }
  InterpolateOptions& scale_factor(Scale2 value) { scale_factor_ = value; return *this; }
  InterpolateOptions& mode(std::string value) { mode_ = std::move(value); return *this; }
  InterpolateOptions& recompute_scale_factor(bool value) { recompute_scale_factor_ = value; return *this; }
  const std::optional<Size2>& size() const { return size_; }
  const std::optional<Scale2>& scale_factor() const { return scale_factor_; }
  const std::string& mode() const { return mode_; }
  bool recompute_scale_factor() const { return recompute_scale_factor_; }

 private:
  std::optional<Size2> size_;
  std::optional<Scale2> scale_factor_;
  std::string mode_ = "nearest";
  bool recompute_scale_factor_ = false;
};

/// Resizes x [N, C, H, W] as torch.nn.functional.interpolate; mode "nearest" is supported.
///   interpolate(x, InterpolateOptions().scale_factor(2)), interpolate(x, InterpolateOptions().size({7, 7}))
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

}  // namespace minidl
