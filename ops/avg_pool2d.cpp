// Average pooling.
//
// Shapes: x [N, C, H, W] -> out [N, C, out_h, out_w].
//   avg_pool2d: out sized as max_pool2d's (ops/window.h pool_geometry, no dilation); each output is
//     its window's sum over the divisor PyTorch uses (ops/kernels.h, avg_pool2d).
//   adaptive_avg_pool2d: out = output_size; output row i covers rows
//     [floor(i * H / out_h), ceil((i + 1) * H / out_h)), columns likewise, so windows may overlap
//     by one or (for output_size > input) repeat an element.
// Backward spreads each output's gradient, divided the same way, over its window; neither needs
// the input, so nothing of it is saved.
#include "ops/avg_pool2d.h"

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/view.h"
#include "ops/window.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

void check_image(const char* op, const Tensor& x) {
  MINIDL_CHECK(x.defined(), op, ": x is undefined");
  MINIDL_CHECK(x.dim() == 4, op, ": expected x of shape [N, C, H, W] (4-D), got shape ", x.shape(), " (", x.dim(),
               "-D)");
  MINIDL_CHECK(is_floating(x.dtype()), op, ": expected a floating x, got ", x.dtype());
}

Tensor contiguous_input(const Tensor& x) {
  NoGradGuard no_grad;  // plumbing, not a graph node
  return x.detach().contiguous();
}

// Global average pooling (output 1x1), what a ResNet ends with: each plane's sum by the reduction
// kernel (on CUDA one warp per plane) and one division, instead of a thread walking each plane
// alone; the backward is a single broadcast division of the gradient into the input's shape.
Tensor global_avg_pool(const Tensor& x) {
  const Shape x_shape = x.shape();
  const int64_t planes = x.size(0) * x.size(1), area = x.size(2) * x.size(3);
  Tensor out = Tensor::empty({x.size(0), x.size(1), 1, 1}, x.dtype(), x.device());
  {
    NoGradGuard no_grad;
    Kernels& k = kernels_for(x.device());
    // A 16-bit x is summed and divided in float32, then rounded once (ops/reduce.h's rule): in
    // float16 the sum or the area of a 300 x 300 image is infinite.
    Tensor sums = is_reduced_floating(x.dtype()) ? Tensor::empty(out.shape(), kFloat32, x.device()) : out;
    k.reduce(ReduceOp::Sum, contiguous_input(x), planes, area, 1, sums, nullptr);
    k.binary(BinaryOp::Div, sums, expand(scalar_like(static_cast<double>(area), sums), sums.shape()), sums);
    if (sums.dtype() != out.dtype()) k.copy(sums, out);
  }
  if (autograd::needs_recording({x})) {
    autograd::record("adaptive_avg_pool2d", out, {x}, [x_shape, area](const Tensor& grad, const std::vector<bool>&) {
      NoGradGuard no_grad;
      // The area as a number: a 16-bit gradient divides by it in float32 (scalar_operand).
      return std::vector<Tensor>{div(expand(grad, x_shape), Scalar(static_cast<double>(area)))};
    });
  }
  return out;
}

}  // namespace

Tensor avg_pool2d(const Tensor& x, Size2 kernel, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad) {
  check_image("avg_pool2d", x);
  const ConvGeometry g = pool_geometry("avg_pool2d", x.size(1), x.size(2), x.size(3), kernel,
                                       stride.value_or(kernel), padding, 1, ceil_mode);
  Tensor out = Tensor::empty({x.size(0), g.channels, g.out_h, g.out_w}, x.dtype(), x.device());
  {
    Widened w(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = w.output(out);
    w.kernels().avg_pool2d(w.input(contiguous_input(x)), g, count_include_pad, out32);
    w.finish();
  }
  if (autograd::needs_recording({x})) {
    autograd::record("avg_pool2d", out, {x}, [g, count_include_pad, x_shape = x.shape()](const Tensor& grad,
                                                                                         const std::vector<bool>&) {
      Tensor grad_in = Tensor::empty(x_shape, grad.dtype(), grad.device());
      Widened w(kernels_for(grad.device()));
      Tensor grad_in32 = w.output(grad_in);
      w.kernels().avg_pool2d_backward(w.input(contiguous_input(grad)), g, count_include_pad, grad_in32);
      w.finish();
      return std::vector<Tensor>{grad_in};
    });
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size) {
  check_image("adaptive_avg_pool2d", x);
  MINIDL_CHECK(output_size.h > 0 && output_size.w > 0,
               "adaptive_avg_pool2d: expected a positive output size, got ", output_size.h, "x", output_size.w);
  MINIDL_CHECK(x.size(2) > 0 && x.size(3) > 0, "adaptive_avg_pool2d: expected a non-empty image, got x of shape ",
               x.shape());
  if (output_size == Size2(1)) return global_avg_pool(x);
  Tensor out = Tensor::empty({x.size(0), x.size(1), output_size.h, output_size.w}, x.dtype(), x.device());
  {
    Widened w(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = w.output(out);
    w.kernels().adaptive_avg_pool2d(w.input(contiguous_input(x)), out32);
    w.finish();
  }
  if (autograd::needs_recording({x})) {
    autograd::record("adaptive_avg_pool2d", out, {x}, [x_shape = x.shape()](const Tensor& grad,
                                                                            const std::vector<bool>&) {
      Tensor grad_in = Tensor::empty(x_shape, grad.dtype(), grad.device());
      Widened w(kernels_for(grad.device()));
      Tensor grad_in32 = w.output(grad_in);
      w.kernels().adaptive_avg_pool2d_backward(w.input(contiguous_input(grad)), grad_in32);
      w.finish();
      return std::vector<Tensor>{grad_in};
    });
  }
  return out;
}

}  // namespace minidl
