// Nearest-neighbour upsampling.
//
// Shapes: x [N, C, H, W] -> out [N, C, out_h, out_w]. Output row i reads input row
// src(i) = min(floor(i * s), H - 1), s a float: 1 / scale_factor when the caller gave one, else
// H / out_h, except that out_h == H reads row i and out_h == 2 H reads row i / 2 whatever the
// factor (PyTorch's nearest_idx); columns likewise. src is non-decreasing, so the outputs reading
// one input row form a run. Backward sums grad_out over those runs; it needs no saved tensor.
#include "ops/upsample.h"

#include <cmath>

#include "core/autograd.h"
#include "ops/kernels.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

// The float step between source rows, as PyTorch's compute_scales_value<float> with its two
// exact cases (identity and doubling) made explicit.
float nearest_scale(int64_t in, int64_t out, std::optional<double> scale) {
  if (out == in) return 1.0f;
  if (out == 2 * in) return 0.5f;
  if (scale && *scale > 0) return static_cast<float>(1.0 / *scale);
  return static_cast<float>(in) / static_cast<float>(out);
}

}  // namespace

Tensor upsample_nearest2d(const Tensor& x, Size2 output_size, std::optional<Scale2> scales) {
  MINIDL_CHECK(x.defined(), "upsample_nearest2d: x is undefined");
  MINIDL_CHECK(x.dim() == 4, "upsample_nearest2d: expected x of shape [N, C, H, W] (4-D), got shape ", x.shape(),
               " (", x.dim(), "-D)");
  MINIDL_CHECK(is_floating(x.dtype()), "upsample_nearest2d: expected a floating x, got ", x.dtype());
  MINIDL_CHECK(x.size(2) > 0 && x.size(3) > 0, "upsample_nearest2d: expected a non-empty image, got x of shape ",
               x.shape());
  MINIDL_CHECK(output_size.h > 0 && output_size.w > 0, "upsample_nearest2d: expected a positive output size, got ",
               output_size.h, "x", output_size.w, " for x of shape ", x.shape());
  const float scale_h = nearest_scale(x.size(2), output_size.h, scales ? std::optional(scales->h) : std::nullopt);
  const float scale_w = nearest_scale(x.size(3), output_size.w, scales ? std::optional(scales->w) : std::nullopt);
  Tensor out = Tensor::empty({x.size(0), x.size(1), output_size.h, output_size.w}, x.dtype(), x.device());
  {
    NoGradGuard no_grad;  // contiguous() is plumbing, not a graph node
    Widened wide(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = wide.output(out);
    wide.kernels().upsample_nearest2d(wide.input(x.contiguous()), scale_h, scale_w, out32);
    wide.finish();
  }
  if (autograd::needs_recording({x})) {
    autograd::record("upsample_nearest2d", out, {x}, [scale_h, scale_w, x_shape = x.shape()](
                                                         const Tensor& grad, const std::vector<bool>&) {
      Tensor grad_in = Tensor::empty(x_shape, grad.dtype(), grad.device());
      Widened wide(kernels_for(grad.device()));
      Tensor grad_in32 = wide.output(grad_in);
      wide.kernels().upsample_nearest2d_backward(wide.input(grad.contiguous()), scale_h, scale_w, grad_in32);
      wide.finish();
      return std::vector<Tensor>{grad_in};
    });
  }
  return out;
}

Tensor interpolate(const Tensor& x, const InterpolateOptions& options) {
  MINIDL_CHECK(options.mode() == "nearest", "interpolate: mode \"", options.mode(),
               "\" is not supported; expected \"nearest\"");
  MINIDL_CHECK(options.size().has_value() != options.scale_factor().has_value(),
               "interpolate: expected exactly one of size and scale_factor, got ",
               options.size() ? "both" : "neither");
  MINIDL_CHECK(x.defined(), "interpolate: x is undefined");
  MINIDL_CHECK(x.dim() == 4, "interpolate: expected x of shape [N, C, H, W] (4-D), got shape ", x.shape(), " (",
               x.dim(), "-D)");
  if (options.size()) return upsample_nearest2d(x, *options.size());
  const Scale2 s = *options.scale_factor();
  MINIDL_CHECK(s.h > 0 && s.w > 0 && std::isfinite(s.h) && std::isfinite(s.w),
               "interpolate: expected positive scale factors, got ", s.h, "x", s.w);
  // The output size in double, as PyTorch: floor(in * scale).
  const Size2 size(static_cast<int64_t>(std::floor(static_cast<double>(x.size(2)) * s.h)),
                   static_cast<int64_t>(std::floor(static_cast<double>(x.size(3)) * s.w)));
  MINIDL_CHECK(size.h > 0 && size.w > 0, "interpolate: scale_factor ", s.h, "x", s.w, " turns the ", x.size(2), "x",
               x.size(3), " image of x into ", size.h, "x", size.w, "; expected a non-empty output");
  if (options.recompute_scale_factor()) return upsample_nearest2d(x, size);
  return upsample_nearest2d(x, size, s);
}

}  // namespace minidl
