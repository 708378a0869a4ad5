#include "ops/window.h"

#include "ops/view.h"

namespace minidl {

// Validates the window parameters against an image of C x H x W and derives the output size.
ConvGeometry window_geometry(const char* op, int64_t channels, int64_t height, int64_t width, Size2 kernel,
                           Size2 stride, Size2 padding, Size2 dilation) {
  MINIDL_CHECK(kernel.h > 0 && kernel.w > 0, op, ": expected a positive kernel size, got ", kernel.h, "x", kernel.w);
  MINIDL_CHECK(stride.h > 0 && stride.w > 0, op, ": expected a positive stride, got ", stride.h, "x", stride.w);
  MINIDL_CHECK(padding.h >= 0 && padding.w >= 0, op, ": expected non-negative padding, got ", padding.h, "x",
               padding.w);
  MINIDL_CHECK(dilation.h > 0 && dilation.w > 0, op, ": expected a positive dilation, got ", dilation.h, "x",
               dilation.w);
  const int64_t span_h = dilation.h * (kernel.h - 1) + 1, span_w = dilation.w * (kernel.w - 1) + 1;
  const int64_t padded_h = height + 2 * padding.h, padded_w = width + 2 * padding.w;
  MINIDL_CHECK(span_h <= padded_h && span_w <= padded_w, op, ": the kernel ", kernel.h, "x", kernel.w,
               " with dilation ", dilation.h, "x", dilation.w, " spans ", span_h, "x", span_w,
               ", larger than the input ", height, "x", width, " with padding ", padding.h, "x", padding.w, " (",
               padded_h, "x", padded_w, "); the output would be empty");
  ConvGeometry g{};
  g.channels = channels;
  g.height = height;
  g.width = width;
  g.kernel_h = kernel.h;
  g.kernel_w = kernel.w;
  g.stride_h = stride.h;
  g.stride_w = stride.w;
  g.pad_h = padding.h;
  g.pad_w = padding.w;
  g.dilation_h = dilation.h;
  g.dilation_w = dilation.w;
  g.out_h = (padded_h - span_h) / stride.h + 1;
  g.out_w = (padded_w - span_w) / stride.w + 1;
  return g;
}

namespace {

int64_t ceil_mode_size(int64_t in, int64_t pad, int64_t span, int64_t stride) {
  int64_t out = (in + 2 * pad - span + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace

ConvGeometry pool_geometry(const char* op, int64_t channels, int64_t height, int64_t width, Size2 kernel,
                           Size2 stride, Size2 padding, Size2 dilation, bool ceil_mode) {
  // Padding beyond half the kernel would let a window hold only padding.
  MINIDL_CHECK(padding.h >= 0 && padding.w >= 0 && padding.h <= kernel.h / 2 && padding.w <= kernel.w / 2, op,
               ": padding must be between 0 and half the kernel size (", kernel.h / 2, "x", kernel.w / 2, " for a ",
               kernel.h, "x", kernel.w, " kernel), got ", padding.h, "x", padding.w);
  ConvGeometry g = window_geometry(op, channels, height, width, kernel, stride, padding, dilation);
  if (ceil_mode) {
    g.out_h = ceil_mode_size(height, padding.h, dilation.h * (kernel.h - 1) + 1, stride.h);
    g.out_w = ceil_mode_size(width, padding.w, dilation.w * (kernel.w - 1) + 1, stride.w);
  }
  return g;
}

Tensor conv_bias_grad(const Tensor& g3) {
  Kernels& k = kernels_for(g3.device());
  const int64_t n = g3.size(0), c = g3.size(1), p = g3.size(2);
  Tensor per_sample = Tensor::empty({n, c}, g3.dtype(), g3.device());
  k.reduce(ReduceOp::Sum, g3, n * c, p, 1, per_sample, nullptr);
  Tensor grad_b = Tensor::empty({c}, g3.dtype(), g3.device());
  k.reduce(ReduceOp::Sum, per_sample, 1, n, c, grad_b, nullptr);
  return grad_b;
}

Tensor conv_bias_grad_4d(const Tensor& grad) {
  const int64_t n = grad.size(0), c = grad.size(1), p = grad.size(2) * grad.size(3);
  if (grad.is_contiguous() || !grad.is_contiguous(MemoryFormat::ChannelsLast))
    return conv_bias_grad(view(grad.contiguous(), {n, c, p}));
  Tensor grad_b = Tensor::empty({c}, grad.dtype(), grad.device());
  kernels_for(grad.device()).reduce(ReduceOp::Sum, grad, 1, n * p, c, grad_b, nullptr);
  return grad_b;
}

}  // namespace minidl
