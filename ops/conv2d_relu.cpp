// conv2d followed by ReLU, and by ReLU and a max pool, each recorded as one node.
//
// Shapes: x [N, C, H, W], weight [O, C, kh, kw], bias [O] (or undefined), pre [N, O, oh, ow] the
// convolution without bias, in the layout the convolution left it (channels-last for cuDNN's 16-bit
// convolutions, ops/conv2d_core.h). conv2d_relu returns y = relu(pre + bias), laid out as pre;
// conv2d_relu_max_pool2d returns [N, O, oh/pool, ow/pool], contiguous (floor: edge rows and columns
// outside every window are dropped, as max_pool2d drops them).
//
// Backward: the epilogue's kernel turns the output gradient into the gradient of pre (and the
// bias's), then the convolution's backward gives the input's and the weight's. Under autocast the
// weight and bias may be 16-bit copies of float32 masters (ops/autocast_masters.h): the tape then
// records the masters, and their gradients come back in float32, converted inside the node.
#include "ops/conv2d_relu.h"

#include "core/autograd.h"
#include "ops/autocast_masters.h"
#include "ops/conv2d_core.h"
#include "ops/kernels.h"

namespace minidl {

namespace {

Tensor contiguous_bias(const Tensor& bias) {
  NoGradGuard no_grad;
  return bias.defined() ? bias.detach().contiguous() : Tensor();
}

// conv2d_relu by Kernels::conv2d_relu_direct: a first layer of one input channel whose input needs
// no gradient, on CUDA (the kernel says which dtypes and shapes), its output in the layout the
// dtype's convolutions run in (conv2d_cudnn_format: the next layer's). One kernel each way instead
// of cuDNN's (or im2col's) convolutions and the epilogue's passes; false where the kernels do not
// take it.
bool direct_first_layer(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvGeometry& g,
                        const autocast::Masters& masters, Tensor& y) {
  if (x.device().is_cpu() || x.size(1) != 1 || x.requires_grad() || !is_floating(x.dtype())) return false;
  Kernels& k = kernels_for(x.device());
  const MemoryFormat format = k.conv2d_cudnn_format(x.dtype());
  Tensor xc, wc, b;
  {
    NoGradGuard no_grad;
    xc = x.detach().contiguous();
    wc = weight.detach().contiguous();
    b = contiguous_bias(bias);
    y = Tensor::empty({x.size(0), weight.size(0), g.out_h, g.out_w}, x.dtype(), x.device(), format);
    if (!k.conv2d_relu_direct(xc, wc, b.defined() ? &b : nullptr, g, y)) return false;
  }
  const Tensor &weight_recorded = autocast::recorded(masters, 1, weight), &bias_recorded = autocast::recorded(masters, 2, bias);
  if (autograd::needs_recording({weight_recorded, bias_recorded})) {
    autograd::record("conv2d_relu", y, {x, weight_recorded, bias_recorded}, {xc, y},
                     [xc, g, y_saved = y.detach(), w_shape = weight.shape(), format,
                      dtypes = GradDtypes(weight_recorded, bias_recorded, x.dtype())](const Tensor& grad,
                                                                                      const std::vector<bool>& needs) {
                       // The kernel writes float32 (masters') gradients itself.
                       const DType out = dtypes.weight == kFloat32 && dtypes.bias == kFloat32 ? kFloat32 : grad.dtype();
                       Tensor gw = Tensor::empty(w_shape, out, grad.device()), gb;
                       if (needs[2]) gb = Tensor::empty({w_shape[0]}, out, grad.device());
                       const bool done = kernels_for(grad.device())
                                             .conv2d_relu_direct_backward(grad.contiguous(format),
                                                                          y_saved, xc, g, gw, needs[2] ? &gb : nullptr);
                       MINIDL_CHECK(done, "conv2d_relu: the direct backward is unavailable although its forward ran");
                       return std::vector<Tensor>{Tensor(), needs[1] ? gw.to(dtypes.weight) : Tensor(),
                                                  needs[2] ? gb.to(dtypes.bias) : Tensor()};
                     });
  }
  return true;
}

Tensor conv2d_relu_op(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                      Size2 dilation, const autocast::Masters& masters) {
  const ConvGeometry g = conv2d_check("conv2d_relu", x, weight, bias, stride, padding, dilation);
  if (conv_computes_in_float32(x, weight.size(0), g))
    return conv2d_relu_op(widen_to_float32(x), widen_to_float32(weight), widen_to_float32(bias), stride, padding,
                          dilation, masters)
        .to(x.dtype());
  if (Tensor y; direct_first_layer(x, weight, bias, g, masters, y)) return y;
  const Tensor &weight_recorded = autocast::recorded(masters, 1, weight), &bias_recorded = autocast::recorded(masters, 2, bias);
  ConvSaved saved;
  Tensor y = conv2d_nobias(x, weight, g, saved, weight_recorded);
  const Tensor b = contiguous_bias(bias);
  kernels_for(x.device()).conv_bias_act(y, b.defined() ? &b : nullptr, true, y);
  if (autograd::needs_recording({x, weight_recorded, bias_recorded})) {
    autograd::record("conv2d_relu", y, {x, weight_recorded, bias_recorded}, {saved.x, saved.cols, saved.w, y},
                     [saved, y_saved = y.detach(), dtypes = GradDtypes(weight_recorded, bias_recorded, x.dtype())](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       Tensor gpre = Tensor::empty(y_saved.shape(), grad.dtype(), grad.device(), saved.format);
                       Tensor gx, gw, gb;
                       if (needs[2]) gb = Tensor::empty({y_saved.size(1)}, grad.dtype(), grad.device());
                       kernels_for(grad.device())
                           .conv_bias_relu_backward(grad.contiguous(saved.format), y_saved, gpre,
                                                    needs[2] ? &gb : nullptr);
                       conv2d_nobias_backward(saved, gpre, needs[0], needs[1], gx, gw, dtypes.weight);
                       return std::vector<Tensor>{gx, gw, needs[2] ? gb.to(dtypes.bias) : Tensor()};
                     });
  }
  return y;
}

Tensor conv2d_relu_max_pool2d_op(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                                 Size2 padding, Size2 dilation, int64_t pool, const autocast::Masters& masters) {
  const char* op = "conv2d_relu_max_pool2d";
  const ConvGeometry g = conv2d_check(op, x, weight, bias, stride, padding, dilation);
  MINIDL_CHECK(pool >= 1, op, ": expected a positive pool size, got ", pool);
  MINIDL_CHECK(g.out_h >= pool && g.out_w >= pool, op, ": a ", pool, "x", pool, " pool does not fit the ", g.out_h,
               "x", g.out_w, " output of the convolution");
  if (conv_computes_in_float32(x, weight.size(0), g))
    return conv2d_relu_max_pool2d_op(widen_to_float32(x), widen_to_float32(weight), widen_to_float32(bias), stride,
                                     padding, dilation, pool, masters)
        .to(x.dtype());
  const Tensor &weight_recorded = autocast::recorded(masters, 1, weight), &bias_recorded = autocast::recorded(masters, 2, bias);
  ConvSaved saved;
  Tensor pre = conv2d_nobias(x, weight, g, saved, weight_recorded);
  const Tensor b = contiguous_bias(bias);
  Tensor out = Tensor::empty({pre.size(0), pre.size(1), g.out_h / pool, g.out_w / pool}, x.dtype(), x.device());
  kernels_for(x.device()).bias_relu_max_pool2d(pre, b.defined() ? &b : nullptr, pool, out);
  if (autograd::needs_recording({x, weight_recorded, bias_recorded})) {
    autograd::record(op, out, {x, weight_recorded, bias_recorded}, {saved.x, saved.cols, saved.w, out},
                     [saved, pre, b, pooled = out.detach(), pool,
                      dtypes = GradDtypes(weight_recorded, bias_recorded, x.dtype())](const Tensor& grad,
                                                                                      const std::vector<bool>& needs) {
                       Tensor gpre = Tensor::empty(pre.shape(), grad.dtype(), grad.device(), saved.format);
                       Tensor gx, gw, gb;
                       if (needs[2]) gb = Tensor::empty({pre.size(1)}, grad.dtype(), grad.device());
                       kernels_for(grad.device())
                           .bias_relu_max_pool2d_backward(grad.contiguous(), pre, b.defined() ? &b : nullptr, pooled,
                                                          pool, gpre, needs[2] ? &gb : nullptr);
                       conv2d_nobias_backward(saved, gpre, needs[0], needs[1], gx, gw, dtypes.weight);
                       return std::vector<Tensor>{gx, gw, needs[2] ? gb.to(dtypes.bias) : Tensor()};
                     });
  }
  return out;
}

}  // namespace

Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                   Size2 dilation) {
  MINIDL_AUTOCAST_MASTERS(conv2d_relu, conv2d_relu_op, x, weight, bias, stride, padding, dilation);
  return conv2d_relu_op(x, weight, bias, stride, padding, dilation, {});
}

Tensor conv2d_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                              Size2 dilation, int64_t pool) {
  MINIDL_AUTOCAST_MASTERS(conv2d_relu_max_pool2d, conv2d_relu_max_pool2d_op, x, weight, bias, stride, padding,
                          dilation, pool);
  return conv2d_relu_max_pool2d_op(x, weight, bias, stride, padding, dilation, pool, {});
}

}  // namespace minidl
