// 2-D transposed convolution, built as the adjoint of conv2d from the same kernels: its forward is
// conv2d's input gradient (GEMM + col2im) and its backward is conv2d's forward (im2col + GEMM), so
// it runs on every device that has those primitives.
//
// Shapes (G = groups, Ci = C_in / G, Co = C_out / G, kk = kh * kw, L = H * W):
//   x       [N, C_in, H, W]        viewed [N, C_in, L], by group [N, G, Ci, L]
//   weight  [C_in, Co, kh, kw]     viewed Wm [C_in, Co*kk], by group [G, Ci, Co*kk]
//   cols    [N, C_out*kk, L]       = Wm^T @ x[n] per group: column l spreads input pixel l over its
//                                    kh x kw footprint in the output
//   out     [N, C_out, out_h, out_w] = col2im(cols) + bias, with out = (in - 1) * stride
//                                    - 2 * padding + dilation * (k - 1) + output_padding + 1
// The geometry g is that of a conv2d over the output: channels C_out, image out_h x out_w, and its
// output fixed to H x W. With output_padding the rows past the last window get no contribution
// (only the bias), as in PyTorch.
// Backward, from grad [N, C_out, out_h, out_w]:
//   gcols   [N, C_out*kk, L] = im2col(grad)
//   grad_x  [N, C_in, L]     = Wm @ gcols[n] per group
//   grad_w  [C_in, Co*kk]    = sum_n x[n] @ gcols[n]^T per group
//   grad_b  [C_out]          = sum of grad over N, out_h and out_w
// With groups > 1 the GEMMs run per sample, each batched over the groups, since the batched GEMM
// takes a weight that is either shared by every batch or one per batch.
// bfloat16 and float16 run on cuDNN on CUDA (transposed_on_cudnn), else in float32, rounded once.
#include "ops/conv_transpose2d.h"

#include "core/autograd.h"
#include "ops/autocast_policy.h"
#include "ops/backend_setting.h"
#include "ops/kernels.h"
#include "ops/slice.h"
#include "ops/view.h"
#include "ops/window.h"

namespace minidl {

namespace {

constexpr const char* kOp = "conv_transpose2d";

// Sample i of a contiguous [N, ...] tensor, viewed as `shape` (no copy).
Tensor sample(const Tensor& t, int64_t i, const Shape& shape) { return view(narrow(t, 0, i, 1), shape); }

// cols [N, G*Co*kk, L] = Wm^T @ x3[n], per group.
Tensor spread_columns(const Tensor& x3, const Tensor& wm, int64_t groups) {
  const int64_t n = x3.size(0), c_in = x3.size(1), l = x3.size(2), cokk = wm.size(1);
  Kernels& k = kernels_for(x3.device());
  Tensor cols = Tensor::empty({n, groups * cokk, l}, x3.dtype(), x3.device());
  if (groups == 1) {
    k.gemm(wm, true, x3, false, cols, 1, 0);
    return cols;
  }
  const int64_t ci = c_in / groups;
  Tensor wg = view(wm, {groups, ci, cokk});
  for (int64_t i = 0; i < n; ++i) {
    Tensor c = sample(cols, i, {groups, cokk, l});
    k.gemm(wg, true, sample(x3, i, {groups, ci, l}), false, c, 1, 0);
  }
  return cols;
}

// grad_x [N, C_in, L] = Wm @ gcols[n], per group.
Tensor input_grad(const Tensor& gcols, const Tensor& wm, int64_t groups) {
  const int64_t n = gcols.size(0), l = gcols.size(2), c_in = wm.size(0), cokk = wm.size(1);
  Kernels& k = kernels_for(gcols.device());
  Tensor gx = Tensor::empty({n, c_in, l}, gcols.dtype(), gcols.device());
  if (groups == 1) {
    k.gemm(wm, false, gcols, false, gx, 1, 0);
    return gx;
  }
  const int64_t ci = c_in / groups;
  Tensor wg = view(wm, {groups, ci, cokk});
  for (int64_t i = 0; i < n; ++i) {
    Tensor g = sample(gx, i, {groups, ci, l});
    k.gemm(wg, false, sample(gcols, i, {groups, cokk, l}), false, g, 1, 0);
  }
  return gx;
}

// grad_w [C_in, Co*kk] = sum_n x3[n] @ gcols[n]^T, per group. Without groups: one batched GEMM into
// [N, C_in, Co*kk] and a sum over the batch, as conv2d's weight gradient does (ops/conv2d.cpp says
// why); with groups, per-sample GEMMs accumulating into the result.
Tensor weight_grad(const Tensor& x3, const Tensor& gcols, int64_t groups) {
  const int64_t n = x3.size(0), c_in = x3.size(1), l = x3.size(2), cokk = gcols.size(1) / groups;
  Kernels& k = kernels_for(x3.device());
  Tensor gw = Tensor::empty({c_in, cokk}, x3.dtype(), x3.device());
  if (groups == 1 && n == 1) {
    k.gemm(view(x3, {c_in, l}), false, view(gcols, {cokk, l}), true, gw, 1, 0);
  } else if (groups == 1) {
    Tensor per_sample = Tensor::empty({n, c_in, cokk}, x3.dtype(), x3.device());
    k.gemm(x3, false, gcols, true, per_sample, 1, 0);
    k.reduce(ReduceOp::Sum, per_sample, 1, n, c_in * cokk, gw, nullptr);
  } else {
    const int64_t ci = c_in / groups;
    Tensor gwg = view(gw, {groups, ci, cokk});
    for (int64_t i = 0; i < n; ++i)
      k.gemm(sample(x3, i, {groups, ci, l}), false, sample(gcols, i, {groups, cokk, l}), true, gwg, 1, i == 0 ? 0 : 1);
  }
  return gw;
}

int64_t output_size(int64_t in, int64_t stride, int64_t pad, int64_t dilation, int64_t k, int64_t output_padding) {
  return (in - 1) * stride - 2 * pad + dilation * (k - 1) + output_padding + 1;
}

// The transposed convolution as the adjoint of the conv2d of geometry g (from the output's space
// [N, C_out, out_h, out_w] to x's [N, C_in, H, W], weight [C_in, C_out, kh, kw] as its filter) on
// cuDNN: the forward is that conv2d's input gradient, the input's gradient its forward, and the
// weight's gradient its filter gradient with the roles of image and output gradient swapped; one
// cuDNN plan serves all three. For the 16-bit dtypes on CUDA (tensor-op math, float32 accumulation).
// False, doing nothing, where cuDNN does not take it (the CPU, a build without cuDNN, the Im2col
// backend, deterministic mode, a geometry cuDNN sizes otherwise).
bool transposed_on_cudnn(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvGeometry& g,
                         const Shape& out_shape, Tensor& result) {
  if (x.device().is_cpu() || conv_backend() == ConvBackend::Im2col) return false;
  Kernels& k = kernels_for(x.device());
  const int64_t n = x.size(0), c_in = x.size(1);
  if (!k.conv2d_cudnn_is_faster(x.dtype(), n, c_in, g, true)) return false;
  Tensor xc, wc, out;
  const MemoryFormat format = k.conv2d_cudnn_format(x.dtype());  // channels-last for 16 bits
  {
    NoGradGuard no_grad;
    xc = x.detach().contiguous(format);
    wc = weight.detach().contiguous(format);
    out = Tensor::empty(out_shape, x.dtype(), x.device(), format);
    if (!k.conv2d_backward_cudnn(xc, Tensor(), wc, g, &out, nullptr, nullptr)) return false;
    if (bias.defined()) {
      const Tensor b = bias.detach().contiguous();
      k.conv_bias_act(out, &b, false, out);
    }
  }
  if (autograd::needs_recording({x, weight, bias})) {
    Tensor saved_x = weight.requires_grad() ? xc : Tensor();
    Tensor saved_w = x.requires_grad() ? wc : Tensor();
    autograd::record(kOp, out, {x, weight, bias}, {saved_x, saved_w},
                     [saved_x, saved_w, g, format, x_shape = x.shape(), w_shape = weight.shape()](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       NoGradGuard no_grad;
                       Kernels& kg = kernels_for(grad.device());
                       const Tensor go = grad.contiguous(format);
                       Tensor gx, gw, gb;
                       if (needs[0]) {
                         gx = Tensor::empty(x_shape, go.dtype(), go.device(), format);
                         MINIDL_CHECK(kg.conv2d_cudnn(go, saved_w, nullptr, g, gx),
                                      kOp, ": the cuDNN backward is unavailable although its forward ran");
                       }
                       if (needs[1]) {
                         gw = Tensor::empty(w_shape, go.dtype(), go.device(), format);
                         MINIDL_CHECK(kg.conv2d_backward_cudnn(saved_x, go, Tensor(), g, nullptr, &gw, nullptr),
                                      kOp, ": the cuDNN backward is unavailable although its forward ran");
                         gw = gw.contiguous();  // a parameter's gradient, as the optimizers read it
                       }
                       if (needs[2]) gb = conv_bias_grad_4d(go);
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  result = out;
  return true;
}

void check_arguments(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                     Size2 output_padding, int64_t groups, Size2 dilation) {
  MINIDL_CHECK(x.defined(), kOp, ": x is undefined");
  MINIDL_CHECK(x.dim() == 4, kOp, ": expected x of shape [N, C_in, H, W] (4-D), got shape ", x.shape(), " (", x.dim(),
               "-D)");
  MINIDL_CHECK(is_floating(x.dtype()), kOp, ": expected a floating x, got ", x.dtype());
  MINIDL_CHECK(weight.defined(), kOp, ": weight is undefined");
  MINIDL_CHECK(weight.dim() == 4, kOp, ": expected weight of shape [C_in, C_out / groups, kh, kw] (4-D), got shape ",
               weight.shape(), " (", weight.dim(), "-D)");
  MINIDL_CHECK(weight.dtype() == x.dtype(), kOp, ": expected weight of dtype ", x.dtype(), " (as x), got ",
               weight.dtype());
  MINIDL_CHECK(groups > 0, kOp, ": expected a positive number of groups, got ", groups);
  MINIDL_CHECK(weight.size(0) == x.size(1), kOp, ": weight of shape ", weight.shape(), " expects ", weight.size(0),
               " input channels (its first dim), but x of shape ", x.shape(), " has ", x.size(1), " channels");
  MINIDL_CHECK(x.size(1) % groups == 0, kOp, ": expected the ", x.size(1), " input channels to divide into ", groups,
               " groups");
  if (bias.defined()) {
    const int64_t c_out = weight.size(1) * groups;
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == c_out, kOp, ": expected bias of shape [", c_out,
                 "] (one per output channel: weight ", weight.shape(), " with ", groups, " groups), got shape ",
                 bias.shape());
    MINIDL_CHECK(bias.dtype() == x.dtype(), kOp, ": expected bias of dtype ", x.dtype(), " (as x), got ",
                 bias.dtype());
  }
  check_same_device(kOp, {x, weight, bias});
  MINIDL_CHECK(stride.h > 0 && stride.w > 0, kOp, ": expected a positive stride, got ", stride.h, "x", stride.w);
  MINIDL_CHECK(dilation.h > 0 && dilation.w > 0, kOp, ": expected a positive dilation, got ", dilation.h, "x",
               dilation.w);
  MINIDL_CHECK(padding.h >= 0 && padding.w >= 0, kOp, ": expected non-negative padding, got ", padding.h, "x",
               padding.w);
  // output_padding only chooses among the output sizes whose windows give the same input size, so
  // it has to stay below the stride (or the dilation), as PyTorch requires.
  MINIDL_CHECK(output_padding.h >= 0 && output_padding.w >= 0 &&
                   (output_padding.h < stride.h || output_padding.h < dilation.h) &&
                   (output_padding.w < stride.w || output_padding.w < dilation.w),
               kOp, ": output_padding must be non-negative and smaller than either the stride or the dilation, got ",
               "output_padding ", output_padding.h, "x", output_padding.w, " with stride ", stride.h, "x", stride.w,
               " and dilation ", dilation.h, "x", dilation.w);
}

}  // namespace

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                        Size2 output_padding, int64_t groups, Size2 dilation) {
  MINIDL_AUTOCAST(conv_transpose2d, conv_transpose2d, x, weight, bias, stride, padding, output_padding, groups, dilation);
  check_arguments(x, weight, bias, stride, padding, output_padding, groups, dilation);
  const int64_t n = x.size(0), c_in = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t kh = weight.size(2), kw = weight.size(3), c_out = weight.size(1) * groups;
  MINIDL_CHECK(kh > 0 && kw > 0, kOp, ": expected a positive kernel size, got weight of shape ", weight.shape());
  const int64_t out_h = output_size(h, stride.h, padding.h, dilation.h, kh, output_padding.h);
  const int64_t out_w = output_size(w, stride.w, padding.w, dilation.w, kw, output_padding.w);
  MINIDL_CHECK(out_h > 0 && out_w > 0, kOp, ": the output would be ", out_h, "x", out_w,
               " ((in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1 for x of shape ",
               x.shape(), ", kernel ", kh, "x", kw, ", stride ", stride.h, "x", stride.w, ", padding ", padding.h, "x",
               padding.w, "); expected a positive size");
  ConvGeometry g = window_geometry(kOp, c_out, out_h, out_w, {kh, kw}, stride, padding, dilation);
  g.out_h = h;  // the windows of output_padding >= stride (allowed by a larger dilation) lie past x
  g.out_w = w;
  const int64_t l = h * w, cokk = weight.size(1) * kh * kw;
  if (is_reduced_floating(x.dtype())) {
    // bfloat16 / float16: on cuDNN where it takes this convolution (CUDA, one group); else computed in
    // float32 and rounded once (its gradients too), since the GEMM and col2im path here would round
    // every partial product to 16 bits.
    Tensor out16;
    if (groups == 1 && transposed_on_cudnn(x, weight, bias, g, {n, c_out, out_h, out_w}, out16)) return out16;
    const auto wide = [](const Tensor& t) { return t.defined() ? t.to(kFloat32) : t; };
    return conv_transpose2d(wide(x), wide(weight), wide(bias), stride, padding, output_padding, groups, dilation)
        .to(x.dtype());
  }

  Tensor x3, wm, out;
  {
    NoGradGuard no_grad;  // views and copies below are plumbing, not graph nodes
    x3 = view(x.detach().contiguous(), {n, c_in, l});
    wm = view(weight.detach().contiguous(), {c_in, cokk});
    Tensor cols = spread_columns(x3, wm, groups);
    Kernels& k = kernels_for(x.device());
    out = Tensor::empty({n, c_out, out_h, out_w}, x.dtype(), x.device());
    k.col2im(cols, g, out);
    if (bias.defined()) {
      Tensor out3 = view(out, {n, c_out, out_h * out_w});
      k.binary(BinaryOp::Add, out3, expand(view(bias.detach().contiguous(), {c_out, 1}), out3.shape()), out3);
    }
  }

  if (autograd::needs_recording({x, weight, bias})) {
    // Keep x only for the weight's gradient and the weight only for the input's.
    Tensor saved_x = weight.requires_grad() ? x3 : Tensor();
    Tensor saved_w = x.requires_grad() ? wm : Tensor();
    autograd::record(kOp, out, {x, weight, bias}, {saved_x, saved_w},
                     [saved_x, saved_w, g, groups, x_shape = x.shape(), w_shape = weight.shape()](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       NoGradGuard no_grad;
                       const int64_t n = grad.size(0), c_out = grad.size(1);
                       Tensor go = grad.contiguous();
                       Tensor gx, gw, gb;
                       if (needs[0] || needs[1]) {
                         Tensor gcols = Tensor::empty({n, c_out * g.kernel_h * g.kernel_w, g.out_h * g.out_w},
                                                      go.dtype(), go.device());
                         kernels_for(go.device()).im2col(go, g, gcols);
                         if (needs[0]) gx = view(input_grad(gcols, saved_w, groups), x_shape);
                         if (needs[1]) gw = view(weight_grad(saved_x, gcols, groups), w_shape);
                       }
                       if (needs[2]) gb = conv_bias_grad(view(go, {n, c_out, g.height * g.width}));
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

}  // namespace minidl
