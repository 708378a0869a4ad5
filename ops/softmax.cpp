// Softmax and log-softmax over one dim. Shapes: the output has the input's shape. The kernel sees
// the input as [outer, n, inner] with n the softmax dim, so any dim of a contiguous input works
// without a permute. Backward needs only the output y:
//   softmax:      grad_in = y * (g - sum_n(g * y))
//   log_softmax:  grad_in = g - exp(y) * sum_n(g)
#include "ops/softmax.h"

#include "core/autograd.h"
#include "ops/autocast_policy.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

struct RowGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};

RowGeometry row_geometry(const Shape& shape, int64_t dim) {
  RowGeometry g;
  if (shape.empty()) return g;  // a 0-d tensor is one row of one element
  g.n = shape[dim];
  // An empty tensor has no rows to work on, and its other dimensions may multiply past int64.
  if (shape_numel(shape) == 0) {
    g.outer = 0;
    return g;
  }
  for (int64_t d = 0; d < dim; ++d) g.outer *= shape[d];
  g.n = shape[dim];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) g.inner *= shape[d];
  return g;
}

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  MINIDL_CHECK(is_floating(x.dtype()), name, ": expected a floating tensor, got ", x.dtype(), " of shape ", x.shape());
  const RowGeometry geo = row_geometry(x.shape(), wrap_dim(dim, x.dim(), name));
  Tensor src;
  {
    NoGradGuard no_grad;  // the copy is plumbing; the tape gets one entry for the whole op
    src = x.contiguous();
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (geo.outer > 0) {
    Widened wide(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = wide.output(out);
    wide.kernels().softmax(wide.input(src), geo.outer, geo.n, geo.inner, log, out32);
    wide.finish();
  }
  if (autograd::needs_recording({x})) {
    autograd::record(name, out, {x}, {out}, [y = out.detach(), geo, log, d = wrap_dim(dim, x.dim(), name)](
                                                 const Tensor& g, const std::vector<bool>&) {
      if (grad_mode_enabled()) {  // create_graph: the same formulas from recorded ops
        Tensor yh = autograd::saved_output(y);
        if (log) return std::vector<Tensor>{sub(g, mul(exp(yh), sum(g, {d}, true)))};
        return std::vector<Tensor>{mul(yh, sub(g, sum(mul(g, yh), {d}, true)))};
      }
      Tensor grad_in = Tensor::empty(y.shape(), y.dtype(), y.device());
      if (geo.outer > 0) {
        Widened wide(kernels_for(y.device()));
        Tensor grad_in32 = wide.output(grad_in);
        wide.kernels().softmax_backward(wide.input(g.contiguous()), wide.input(y), geo.outer, geo.n, geo.inner, log,
                                        grad_in32);
        wide.finish();
      }
      return std::vector<Tensor>{grad_in};
    }, true);
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  MINIDL_AUTOCAST(softmax, softmax, x, dim);
  return softmax_impl(x, dim, false);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  MINIDL_AUTOCAST(log_softmax, log_softmax, x, dim);
  return softmax_impl(x, dim, true);
}

Tensor softmin(const Tensor& x, int64_t dim) { return softmax(neg(x), dim); }

// In the dtype asked for, also under autocast (PyTorch leaves an explicit dtype alone there).
Tensor softmax(const Tensor& x, int64_t dim, DType dtype) {
  autocast::ExcludeGuard as_asked;
  return softmax(x.to(dtype), dim);
}
Tensor log_softmax(const Tensor& x, int64_t dim, DType dtype) {
  autocast::ExcludeGuard as_asked;
  return log_softmax(x.to(dtype), dim);
}

}  // namespace minidl
