// 2-D max pooling.
//
// Shapes: x [N, C, H, W] -> out [N, C, out_h, out_w], out = (in + 2*pad - dil*(k-1) - 1) / stride + 1
// (rounded up with ceil_mode, ops/window.h), and
// indices int64 [N, C, out_h, out_w] holding each maximum's flat position h*W + w in its plane.
// Padding counts as -infinity, so it is never the maximum. Backward adds each gradient at its
// index; overlapping windows (stride < kernel) that share a maximum add up there. With dilation a
// window can hold only padding: its output is -infinity, its index -1, and it passes no gradient.
#include "ops/max_pool2d.h"

#include "core/autograd.h"
#include "ops/backend_setting.h"
#include "ops/kernels.h"
#include "ops/window.h"

namespace minidl {

namespace {

// The cuDNN path (ops/backend_setting.h): its backward needs x and out instead of indices. An
// undefined result means the device has no such path; max_pool2d then uses its own kernels.
Tensor max_pool2d_cudnn_path(const Tensor& x, const ConvGeometry& g) {
  Tensor xc;
  {
    NoGradGuard no_grad;
    xc = x.detach().contiguous();
  }
  Tensor out = Tensor::empty({x.size(0), g.channels, g.out_h, g.out_w}, x.dtype(), x.device());
  if (!kernels_for(x.device()).max_pool2d_cudnn(xc, g, out)) return Tensor();
  if (autograd::needs_recording({x})) {
    autograd::record("max_pool2d", out, {x}, {xc, out}, [xc, y = out.detach(), g](const Tensor& grad, const std::vector<bool>&) {
      Tensor grad_in = Tensor::empty(xc.shape(), grad.dtype(), grad.device());
      const bool done = kernels_for(grad.device()).max_pool2d_backward_cudnn(grad.contiguous(), xc, y, g, grad_in);
      MINIDL_CHECK(done, "max_pool2d: the cuDNN backward is unavailable although its forward ran");
      return std::vector<Tensor>{grad_in};
    });
  }
  return out;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  MINIDL_CHECK(x.defined(), "max_pool2d: x is undefined");
  MINIDL_CHECK(x.dim() == 4, "max_pool2d: expected x of shape [N, C, H, W] (4-D), got shape ", x.shape(), " (",
               x.dim(), "-D)");
  MINIDL_CHECK(is_floating(x.dtype()), "max_pool2d: expected a floating x, got ", x.dtype());
  const ConvGeometry g = pool_geometry("max_pool2d", x.size(1), x.size(2), x.size(3), kernel,
                                      stride.value_or(kernel), padding, dilation, ceil_mode);
  // cuDNN sizes its output with floor and caches a plan per geometry without the output size.
  if (conv_backend() == ConvBackend::Cudnn && !ceil_mode) {
    if (Tensor out = max_pool2d_cudnn_path(x, g); out.defined()) return out;
  }
  const Shape out_shape{x.size(0), g.channels, g.out_h, g.out_w};
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(out_shape, kInt64, x.device());
  {
    NoGradGuard no_grad;  // contiguous() here is plumbing, not a graph node
    kernels_for(x.device()).max_pool2d(x.contiguous(), g, out, indices);
  }
  if (autograd::needs_recording({x})) {
    autograd::record("max_pool2d", out, {x}, [indices, g, x_shape = x.shape()](const Tensor& grad,
                                                                                const std::vector<bool>&) {
      Tensor grad_in = Tensor::empty(x_shape, grad.dtype(), grad.device());
      kernels_for(grad.device()).max_pool2d_backward(grad.contiguous(), indices, g, grad_in);
      return std::vector<Tensor>{grad_in};
    });
  }
  return out;
}

}  // namespace minidl
