// 2-D convolution: by cuDNN where conv_backend() picks it (ops/backend_setting.h), on the CPU by
// oneDNN where minidl was built with it, else by im2col + GEMM, as below. The bias is added
// afterwards in one pass over the output (Kernels::conv_bias_act).
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
#include "ops/autocast_masters.h"
#include "ops/backend_setting.h"
#include "ops/conv2d_core.h"
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

}  // namespace

bool conv_computes_in_float32(const Tensor& x, int64_t out_channels, const ConvGeometry& g) {
  if (!is_reduced_floating(x.dtype())) return false;
  if (x.device().is_cpu() || conv_backend() == ConvBackend::Im2col) return true;
  return !kernels_for(x.device()).conv2d_cudnn_is_faster(x.dtype(), x.size(0), out_channels, g, x.requires_grad());
}

Tensor widen_to_float32(const Tensor& t) { return t.defined() ? t.to(kFloat32) : t; }

ConvGeometry conv2d_check(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                          Size2 padding, Size2 dilation) {
  check_image(op, "x", x);
  MINIDL_CHECK(weight.defined(), op, ": weight is undefined");
  MINIDL_CHECK(weight.dim() == 4, op, ": expected weight of shape [O, C, kh, kw] (4-D), got shape ", weight.shape(),
               " (", weight.dim(), "-D)");
  MINIDL_CHECK(weight.size(1) == x.size(1), op, ": weight of shape ", weight.shape(), " expects ", weight.size(1),
               " input channels, but x of shape ", x.shape(), " has ", x.size(1), " channels");
  MINIDL_CHECK(weight.dtype() == x.dtype(), op, ": expected weight of dtype ", x.dtype(), " (as x), got ",
               weight.dtype());
  const int64_t o = weight.size(0);
  if (bias.defined()) {
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == o, op, ": expected bias of shape [", o,
                 "] (one per output channel of weight ", weight.shape(), "), got shape ", bias.shape());
    MINIDL_CHECK(bias.dtype() == x.dtype(), op, ": expected bias of dtype ", x.dtype(), " (as x), got ",
                 bias.dtype());
  }
  check_same_device(op, {x, weight, bias});
  return window_geometry(op, x.size(1), x.size(2), x.size(3), {weight.size(2), weight.size(3)}, stride, padding,
                         dilation);
}

Tensor conv2d_nobias(const Tensor& x, const Tensor& weight, const ConvGeometry& g, ConvSaved& saved,
                     const Tensor& weight_recorded) {
  NoGradGuard no_grad;  // views and copies below are plumbing, not graph nodes
  const int64_t n = x.size(0), o = weight.size(0);
  Kernels& k = kernels_for(x.device());
  saved.g = g;
  saved.w_shape = weight.shape();
  // Keep x (or its columns) only for the weight's gradient and the weight only for the input's.
  const bool keep_x = weight_recorded.requires_grad(), keep_w = x.requires_grad();
  const ConvBackend backend = conv_backend();
  if (backend == ConvBackend::Cudnn ||
      (backend == ConvBackend::Auto && k.conv2d_cudnn_is_faster(x.dtype(), n, o, g, keep_w))) {
    // In cuDNN's layout: channels-last input, filter and output for 16-bit data, so its tensor-core
    // kernels run without transposes around them (ops/cuda/cudnn_plan.h).
    const MemoryFormat format = k.conv2d_cudnn_format(x.dtype());
    Tensor xc = x.detach().contiguous(format), wc = weight.detach().contiguous(format);
    Tensor out = Tensor::empty({n, o, g.out_h, g.out_w}, x.dtype(), x.device(), format);
    if (k.conv2d_cudnn(xc, wc, nullptr, g, out)) {
      saved.cudnn = true;
      saved.format = format;
      if (keep_x) saved.x = xc;
      if (keep_w) saved.w = wc;
      return out;
    }
  }
  const int64_t kk = g.channels * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w;
  // On the CPU, oneDNN where the window holds enough products per output to pay for its layout
  // conversions: at the first layer of the MNIST CNN (one channel, 3 x 3) im2col measured faster.
  if (backend == ConvBackend::Auto && kk >= 64 && x.device().is_cpu() && x.dtype() == kFloat32) {
    Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
    Tensor out = Tensor::empty({n, o, g.out_h, g.out_w}, x.dtype(), x.device());
    if (k.conv2d_onednn(xc, wc, g, out)) {
      saved.onednn = true;
      if (keep_x) saved.x = xc;
      if (keep_w) saved.w = wc;
      return out;
    }
  }
  Tensor cols = im2col_raw(x.detach(), g);
  Tensor w2 = view(weight.detach().contiguous(), {o, kk});
  Tensor out3 = Tensor::empty({n, o, l}, x.dtype(), x.device());
  k.gemm(w2, false, cols, false, out3, 1, 0);
  if (keep_x) saved.cols = cols;
  if (keep_w) saved.w = w2;
  return view(out3, {n, o, g.out_h, g.out_w});
}

void conv2d_nobias_backward(const ConvSaved& saved, const Tensor& grad, bool need_x, bool need_w, Tensor& grad_x,
                            Tensor& grad_w, DType weight_grad_dtype) {
  NoGradGuard no_grad;
  const ConvGeometry& g = saved.g;
  const int64_t n = grad.size(0), o = grad.size(1);
  Kernels& k = kernels_for(grad.device());
  if (saved.cudnn) {
    const MemoryFormat format = saved.format;
    // cuDNN's float32 layout follows the TF32 switch (channels-last under TF32), and the backward
    // finds its algorithms by the switch as it is now.
    MINIDL_CHECK(format == k.conv2d_cudnn_format(grad.dtype()),
                 "conv2d: the TF32 setting for convolutions (set_allow_tf32_cudnn) changed between this "
                 "convolution's forward and its backward; keep it fixed from a forward to its backward");
    Tensor go = grad.contiguous(format);
    if (need_x) grad_x = Tensor::empty({n, g.channels, g.height, g.width}, go.dtype(), go.device(), format);
    // A parameter's gradient, as the optimizers read it: contiguous, in its master's dtype (the
    // backend converts from the filter layout it writes, KRSC when channels-last, in one copy).
    if (need_w) grad_w = Tensor::empty(saved.w_shape, weight_grad_dtype, go.device());
    const bool done = k.conv2d_backward_cudnn(go, saved.x, saved.w, g, need_x ? &grad_x : nullptr,
                                              need_w ? &grad_w : nullptr, nullptr);
    MINIDL_CHECK(done, "conv2d: the cuDNN backward is unavailable although its forward ran");
    return;
  }
  Tensor go = grad.contiguous();
  Tensor g3 = view(go, {n, o, g.out_h * g.out_w});
  if (saved.onednn) {
    if (need_x) grad_x = Tensor::empty({n, g.channels, g.height, g.width}, go.dtype(), go.device());
    if (need_w) grad_w = Tensor::empty(saved.w_shape, go.dtype(), go.device());
    MINIDL_CHECK((!need_x || k.conv2d_backward_data_onednn(go, saved.w, g, grad_x)) &&
                     (!need_w || k.conv2d_backward_weights_onednn(go, saved.x, g, grad_w)),
                 "conv2d: the oneDNN backward is unavailable although its forward ran");
    if (need_w) grad_w = grad_w.to(weight_grad_dtype);
    return;
  }
  if (need_x) {
    Tensor grad_cols = Tensor::empty({n, saved.w.size(1), g3.size(2)}, g3.dtype(), g3.device());
    k.gemm(saved.w, true, g3, false, grad_cols, 1, 0);
    grad_x = col2im_raw(grad_cols, g);
  }
  if (need_w) grad_w = view(weight_grad(g3, saved.cols), saved.w_shape);
  if (need_w) grad_w = grad_w.to(weight_grad_dtype);
}

namespace {

// conv2d. Under autocast the weight and bias may be 16-bit copies of float32 masters
// (ops/autocast_masters.h): the tape then records the masters, and their gradients come back in
// float32, converted inside this node.
Tensor conv2d_op(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                 Size2 dilation, const autocast::Masters& masters) {
  const ConvGeometry g = conv2d_check("conv2d", x, weight, bias, stride, padding, dilation);
  if (conv_computes_in_float32(x, weight.size(0), g))
    return conv2d_op(widen_to_float32(x), widen_to_float32(weight), widen_to_float32(bias), stride, padding, dilation,
                     masters)
        .to(x.dtype());
  const Tensor &weight_recorded = autocast::recorded(masters, 1, weight), &bias_recorded = autocast::recorded(masters, 2, bias);
  ConvSaved saved;
  Tensor out = conv2d_nobias(x, weight, g, saved, weight_recorded);
  if (bias.defined()) {
    NoGradGuard no_grad;
    // One pass over the output with the bias read per channel: cheaper than a broadcast add, and
    // than cudnnAddTensor (72 us against 54 us on [512, 64, 24, 24] floats, H100).
    const Tensor b = bias.detach().contiguous();
    kernels_for(x.device()).conv_bias_act(out, &b, false, out);
  }
  if (autograd::needs_recording({x, weight_recorded, bias_recorded})) {
    autograd::record("conv2d", out, {x, weight_recorded, bias_recorded}, {saved.x, saved.cols, saved.w},
                     [saved, dtypes = GradDtypes(weight_recorded, bias_recorded, x.dtype())](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       Tensor gx, gw, gb;
                       conv2d_nobias_backward(saved, grad, needs[0], needs[1], gx, gw, dtypes.weight);
                       if (needs[2]) gb = conv_bias_grad_4d(grad).to(dtypes.bias);
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
              Size2 dilation) {
  MINIDL_AUTOCAST_MASTERS(conv2d, conv2d_op, x, weight, bias, stride, padding, dilation);
  return conv2d_op(x, weight, bias, stride, padding, dilation, {});
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
