// 2-D convolution by im2col + GEMM.
//
// Shapes (K = C*kh*kw, L = out_h*out_w, out = (in + 2*pad - dil*(k-1) - 1) / stride + 1):
//   x       [N, C, H, W]
//   weight  [O, C, kh, kw]    used as Wm [O, K], shared by the batch
//   bias    [O]               added as [O, 1] to every column
//   cols    [N, K, L]         = im2col(x): column l holds the receptive field of output pixel l
//   out     [N, O, L]         = Wm @ cols[n] for every n, one batched GEMM; returned as a view
//                               [N, O, out_h, out_w] (no copy)
// Backward, from g [N, O, L]:
//   grad_w  [O, K]    = sum_n g[n] @ cols[n]^T
//   grad_x  [N,C,H,W] = col2im(Wm^T @ g[n])
//   grad_b  [O]       = sum of g over N and L
#include "ops/conv2d.h"

#include "core/autograd.h"
#include "ops/backend_setting.h"
#include "ops/kernels.h"
#include "ops/view.h"
#include "ops/window.h"

namespace minidl {

namespace {

void check_image(const char* op, const char* name, const Tensor& x) {
  MINIDL_CHECK(x.defined(), op, ": ", name, " is undefined");
  MINIDL_CHECK(x.dim() == 4, op, ": expected ", name, " of shape [N, C, H, W] (4-D), got shape ", x.shape(), " (",
               x.dim(), "-D)");
  MINIDL_CHECK(is_floating(x.dtype()), op, ": expected a floating ", name, ", got ", x.dtype());
}

// Runs the kernels on contiguous operands without recording the plumbing on the tape.
Tensor im2col_raw(const Tensor& x, const ConvGeometry& g) {
  NoGradGuard no_grad;
  const int64_t k = g.channels * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w;
  Tensor cols = Tensor::empty({x.size(0), k, l}, x.dtype(), x.device());
  kernels_for(x.device()).im2col(x.contiguous(), g, cols);
  return cols;
}

Tensor col2im_raw(const Tensor& cols, const ConvGeometry& g) {
  NoGradGuard no_grad;
  Tensor image = Tensor::empty({cols.size(0), g.channels, g.height, g.width}, cols.dtype(), cols.device());
  kernels_for(cols.device()).col2im(cols.contiguous(), g, image);
  return image;
}

// grad_w [O, K] = sum_n g[n] [O, L] @ cols[n]^T [L, K].
//
// One batched GEMM into [N, O, K] followed by a sum over the batch, rather than N accumulating
// GEMMs (beta = 1) into [O, K]: the CPU GEMM runs a batch one product per thread with no
// synchronization, while N separate calls each split one small product (O and K are tens to a few
// hundred) across all threads and pay a fork/join per sample. The [N, O, K] buffer is smaller than
// cols ([N, K, L]) whenever O < L, which holds for every layer with more output pixels than
// channels. On MNIST-CNN shapes (N = 64; O x K x L = 32x9x676 and 64x288x576) the batched form
// measured 2-7x faster on 2 cores. For N == 1 the product goes straight into grad_w.
Tensor weight_grad(const Tensor& g3, const Tensor& cols) {
  Kernels& k = kernels_for(g3.device());
  const int64_t n = g3.size(0), o = g3.size(1), l = g3.size(2), kk = cols.size(1);
  Tensor grad_w = Tensor::empty({o, kk}, g3.dtype(), g3.device());
  if (n == 1) {
    k.gemm(view(g3, {o, l}), false, view(cols, {kk, l}), true, grad_w, 1, 0);
    return grad_w;
  }
  Tensor per_sample = Tensor::empty({n, o, kk}, g3.dtype(), g3.device());
  k.gemm(g3, false, cols, true, per_sample, 1, 0);
  k.reduce(ReduceOp::Sum, per_sample, 1, n, o * kk, grad_w, nullptr);
  return grad_w;
}

// The cuDNN path (ops/backend_setting.h): forward and backward by the device's cuDNN kernels. An
// undefined result means the device has no such path; conv2d then goes on with im2col + GEMM.
Tensor conv2d_cudnn_path(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvGeometry& g) {
  Tensor xc, wc, bc;
  {
    NoGradGuard no_grad;
    xc = x.detach().contiguous();
    wc = weight.detach().contiguous();
    if (bias.defined()) bc = bias.detach().contiguous();
  }
  Tensor out = Tensor::empty({x.size(0), weight.size(0), g.out_h, g.out_w}, x.dtype(), x.device());
  if (!kernels_for(x.device()).conv2d_cudnn(xc, wc, bias.defined() ? &bc : nullptr, g, out)) return Tensor();
  if (autograd::needs_recording({x, weight, bias})) {
    Tensor saved_x = weight.requires_grad() ? xc : Tensor();  // x only for the weight's gradient
    Tensor saved_w = x.requires_grad() ? wc : Tensor();       // the weight only for the input's
    autograd::record("conv2d", out, {x, weight, bias},
                     [saved_x, saved_w, g, x_shape = x.shape(), w_shape = weight.shape()](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       Tensor go = grad.contiguous();
                       Tensor gx, gw, gb;
                       if (needs[0]) gx = Tensor::empty(x_shape, go.dtype(), go.device());
                       if (needs[1]) gw = Tensor::empty(w_shape, go.dtype(), go.device());
                       const bool done = kernels_for(go.device()).conv2d_backward_cudnn(
                           go, saved_x, saved_w, g, needs[0] ? &gx : nullptr, needs[1] ? &gw : nullptr, nullptr);
                       MINIDL_CHECK(done, "conv2d: the cuDNN backward is unavailable although its forward ran");
                       // Our two reductions, not cudnnConvolutionBackwardBias, which took 59 of 516 us per step
                       // of the MNIST CNN at batch 64 on an H100 (bench --profile).
                       if (needs[2]) gb = conv_bias_grad(view(go, {go.size(0), go.size(1), g.out_h * g.out_w}));
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
              Size2 dilation) {
  check_image("conv2d", "x", x);
  MINIDL_CHECK(weight.defined(), "conv2d: weight is undefined");
  MINIDL_CHECK(weight.dim() == 4, "conv2d: expected weight of shape [O, C, kh, kw] (4-D), got shape ", weight.shape(),
               " (", weight.dim(), "-D)");
  MINIDL_CHECK(weight.size(1) == x.size(1), "conv2d: weight of shape ", weight.shape(), " expects ", weight.size(1),
               " input channels, but x of shape ", x.shape(), " has ", x.size(1), " channels");
  MINIDL_CHECK(weight.dtype() == x.dtype(), "conv2d: expected weight of dtype ", x.dtype(), " (as x), got ",
               weight.dtype());
  const int64_t n = x.size(0), c = x.size(1), o = weight.size(0);
  if (bias.defined()) {
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == o, "conv2d: expected bias of shape [", o,
                 "] (one per output channel of weight ", weight.shape(), "), got shape ", bias.shape());
    MINIDL_CHECK(bias.dtype() == x.dtype(), "conv2d: expected bias of dtype ", x.dtype(), " (as x), got ",
                 bias.dtype());
  }
  check_same_device("conv2d", {x, weight, bias});
  const ConvGeometry g = window_geometry("conv2d", c, x.size(2), x.size(3), {weight.size(2), weight.size(3)}, stride,
                                       padding, dilation);
  const ConvBackend backend = conv_backend();
  if (backend == ConvBackend::Cudnn ||
      (backend == ConvBackend::Auto && kernels_for(x.device()).conv2d_cudnn_is_faster(x.dtype(), n, o, g))) {
    if (Tensor out = conv2d_cudnn_path(x, weight, bias, g); out.defined()) return out;
  }
  const int64_t kk = c * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w;

  Tensor cols = im2col_raw(x, g);
  Tensor w2, out;
  {
    NoGradGuard no_grad;  // views and copies below are plumbing, not graph nodes
    w2 = view(weight.detach().contiguous(), {o, kk});
    Tensor out3 = Tensor::empty({n, o, l}, x.dtype(), x.device());
    Kernels& k = kernels_for(x.device());
    k.gemm(w2, false, cols, false, out3, 1, 0);
    if (bias.defined()) {
      Tensor b = expand(view(bias.detach().contiguous(), {o, 1}), {n, o, l});
      k.binary(BinaryOp::Add, out3, b, out3);
    }
    out = view(out3, {n, o, g.out_h, g.out_w});
  }

  if (autograd::needs_recording({x, weight, bias})) {
    // Keep cols only for the weight's gradient and the weight only for the input's.
    Tensor saved_cols = weight.requires_grad() ? cols : Tensor();
    Tensor saved_w = x.requires_grad() ? w2 : Tensor();
    autograd::record("conv2d", out, {x, weight, bias},
                     [saved_cols, saved_w, g, w_shape = weight.shape()](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       const int64_t n = grad.size(0), o = grad.size(1);
                       Tensor g3 = view(grad.contiguous(), {n, o, g.out_h * g.out_w});
                       Tensor gx, gw, gb;
                       if (needs[0]) {
                         Tensor grad_cols = Tensor::empty({n, saved_w.size(1), g3.size(2)}, g3.dtype(), g3.device());
                         kernels_for(g3.device()).gemm(saved_w, true, g3, false, grad_cols, 1, 0);
                         gx = col2im_raw(grad_cols, g);
                       }
                       if (needs[1]) gw = view(weight_grad(g3, saved_cols), w_shape);
                       if (needs[2]) gb = conv_bias_grad(g3);
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

Tensor im2col(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation) {
  check_image("im2col", "x", x);
  const ConvGeometry g = window_geometry("im2col", x.size(1), x.size(2), x.size(3), kernel, stride, padding, dilation);
  Tensor cols = im2col_raw(x, g);
  if (autograd::needs_recording({x})) {
    autograd::record("im2col", cols, {x}, [kernel, stride, padding, dilation, image = Size2(g.height, g.width)](
                                              const Tensor& grad, const std::vector<bool>&) {
      return std::vector<Tensor>{col2im(grad, image, kernel, stride, padding, dilation)};
    });
  }
  return cols;
}

Tensor col2im(const Tensor& cols, Size2 image, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation) {
  MINIDL_CHECK(cols.defined(), "col2im: cols is undefined");
  MINIDL_CHECK(cols.dim() == 3, "col2im: expected cols of shape [N, C*kh*kw, L] (3-D), got shape ", cols.shape(), " (",
               cols.dim(), "-D)");
  MINIDL_CHECK(is_floating(cols.dtype()), "col2im: expected floating cols, got ", cols.dtype());
  MINIDL_CHECK(image.h > 0 && image.w > 0, "col2im: expected a positive image size, got ", image.h, "x", image.w);
  MINIDL_CHECK(kernel.h > 0 && kernel.w > 0, "col2im: expected a positive kernel size, got ", kernel.h, "x", kernel.w);
  const int64_t window = kernel.h * kernel.w;
  MINIDL_CHECK(cols.size(1) % window == 0, "col2im: cols of shape ", cols.shape(), " has ", cols.size(1),
               " rows, not a multiple of the kernel's ", kernel.h, "x", kernel.w, " = ", window);
  const ConvGeometry g =
      window_geometry("col2im", cols.size(1) / window, image.h, image.w, kernel, stride, padding, dilation);
  MINIDL_CHECK(cols.size(2) == g.out_h * g.out_w, "col2im: expected ", g.out_h * g.out_w, " columns (", g.out_h, "x",
               g.out_w, " windows over a ", image.h, "x", image.w, " image), got cols of shape ", cols.shape());
  Tensor out = col2im_raw(cols, g);
  if (autograd::needs_recording({cols})) {
    autograd::record("col2im", out, {cols}, [kernel, stride, padding, dilation](const Tensor& grad,
                                                                                 const std::vector<bool>&) {
      return std::vector<Tensor>{im2col(grad, kernel, stride, padding, dilation)};
    });
  }
  return out;
}

}  // namespace minidl
