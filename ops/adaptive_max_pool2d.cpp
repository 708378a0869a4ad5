// adaptive_max_pool2d. Shapes: x [N, C, H, W] or [C, H, W] -> values and int64 indices
// [N, C, out_h, out_w] (or [C, out_h, out_w]).
// The backward adds each output's gradient at its recorded index. It is index_add over the flattened
// input, with every index offset by its plane's start: that kernel exists on every device, and its
// deterministic mode and accumulation of repeats (overlapping windows pick one element twice)
// carry over, so no backward kernel of its own is needed.
#include "ops/adaptive_max_pool2d.h"

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/view.h"
#include "ops/widen_16bit.h"

namespace minidl {

std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& x, Size2 output_size) {
  const char* op = "adaptive_max_pool2d";
  MINIDL_CHECK(x.defined(), op, ": x is undefined");
  MINIDL_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected x of shape [N, C, H, W] or [C, H, W], got shape ",
               x.shape(), " (", x.dim(), "-D)");
  MINIDL_CHECK(is_floating(x.dtype()), op, ": expected a floating x, got ", x.dtype());
  MINIDL_CHECK(output_size.h > 0 && output_size.w > 0, op, ": expected a positive output_size, got (",
               output_size.h, ", ", output_size.w, ")");
  if (x.dim() == 3) {
    auto [values, indices] = adaptive_max_pool2d(unsqueeze(x, 0), output_size);
    return {squeeze(values, 0), squeeze(indices, 0)};
  }
  MINIDL_CHECK(x.size(2) > 0 && x.size(3) > 0, op, ": expected a non-empty image, got shape ", x.shape());
  Tensor src;
  {
    NoGradGuard no_grad;
    src = x.detach().contiguous();
  }
  const Shape out_shape{x.size(0), x.size(1), output_size.h, output_size.w};
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(out_shape, kInt64, x.device());
  {
    Widened w(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = w.output(out);
    w.kernels().adaptive_max_pool2d(w.input(src), out32, indices);
    w.finish();
  }
  if (autograd::needs_recording({x})) {
    Tensor flat_index;
    {
      NoGradGuard no_grad;
      const int64_t planes = x.size(0) * x.size(1), plane = x.size(2) * x.size(3);
      Tensor start = mul(arange(0, static_cast<double>(planes), 1, kInt64, x.device()), scalar_like(plane, indices));
      flat_index = add(view(indices, {planes, -1}), unsqueeze(start, 1)).reshape({-1});
    }
    autograd::record("adaptive_max_pool2d", out, {x}, {flat_index},
                     [flat_index, x_shape = x.shape()](const Tensor& grad, const std::vector<bool>&) {
                       NoGradGuard no_grad;
                       Tensor grad_in = zeros({shape_numel(x_shape)}, grad.dtype(), grad.device());
                       kernels_for(grad.device()).index_add(grad.contiguous().reshape({-1}), 0, flat_index, grad_in);
                       return std::vector<Tensor>{grad_in.view(x_shape)};
                     });
  }
  return {out, indices};
}

}  // namespace minidl
