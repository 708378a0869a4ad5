// cumsum and cumprod. Shapes: the output has x's shape. The kernels scan the middle axis of an
// [outer, n, inner] view of a contiguous tensor, `dim` being the middle, so no dim is moved.
#include "ops/scan.h"

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/slice.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

struct ScanGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};

ScanGeometry geometry(const Shape& shape, int64_t dim) {
  ScanGeometry g;
  if (shape.empty()) return g;  // a 0-d tensor: one element
  for (int64_t d = 0; d < dim; ++d) g.outer *= shape[static_cast<size_t>(d)];
  g.n = shape[static_cast<size_t>(dim)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) g.inner *= shape[d];
  return g;
}

// bool and integral tensors accumulate as int64, as PyTorch's cumsum and cumprod.
Tensor scan_input(const Tensor& x) { return is_floating(x.dtype()) || x.dtype() == kInt64 ? x : x.to(kInt64); }

Tensor scan_forward(ScanOp op, const Tensor& x, int64_t dim, bool reverse) {
  Tensor src = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const ScanGeometry g = geometry(x.shape(), dim);
  kernels_for(x.device()).scan(op, src, g.outer, g.n, g.inner, reverse, out);
  return out;
}

// cumsum from the front, or from the back when `reverse` (the gradient of cumsum, and of that).
Tensor cumsum_impl(const Tensor& x, int64_t dim, bool reverse) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = scan_forward(ScanOp::Sum, x, dim, reverse);
  }
  if (autograd::needs_recording({x})) {
    autograd::record("CumsumBackward0", out, {x}, [dim, reverse](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{cumsum_impl(g, dim, !reverse)};
    });
  }
  return out;
}

}  // namespace

Tensor cumsum(const Tensor& x_in, int64_t dim) {
  Tensor x = scan_input(x_in);
  return cumsum_impl(x, wrap_dim(dim, x.dim(), "cumsum"), false);
}

Tensor cumprod(const Tensor& x_in, int64_t dim) {
  Tensor x = scan_input(x_in);
  dim = wrap_dim(dim, x.dim(), "cumprod");
  Tensor out;
  {
    NoGradGuard no_grad;
    out = scan_forward(ScanOp::Prod, x, dim, false);
  }
  if (autograd::needs_recording({x})) {
    autograd::record("CumprodBackward0", out, {x}, {x}, [sx = x.detach(), dim](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{cumprod_backward(g, sx, dim)};
    });
  }
  return out;
}

Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim) {
  MINIDL_CHECK(grad.shape() == x.shape(), "cumprod_backward: the gradient's shape ", grad.shape(),
               " differs from the input's ", x.shape());
  MINIDL_CHECK(is_floating(x.dtype()), "cumprod_backward: expected a floating tensor, got ", x.dtype());
  check_same_device("cumprod_backward", {grad, x});
  dim = wrap_dim(dim, x.dim(), "cumprod_backward");
  Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (gx.numel() == 0) return gx;
  Tensor xs = x.contiguous(), gs = grad.to(x.dtype()).contiguous();
  const ScanGeometry g = geometry(x.shape(), dim);
  Widened wide(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
  Tensor gx32 = wide.output(gx);
  wide.kernels().cumprod_backward(wide.input(xs), wide.input(gs), g.outer, g.n, g.inner, gx32);
  wide.finish();
  return gx;
}

Tensor diff(const Tensor& x, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  MINIDL_CHECK(x.dim() > 0, "diff: expected a tensor of at least one dim, got a 0-d one");
  MINIDL_CHECK(n >= 0, "diff: expected a non-negative order n, got ", n);
  const int64_t d = wrap_dim(dim, x.dim(), "diff");
  std::vector<Tensor> parts;
  for (const Tensor& t : {prepend, x, append}) {
    if (!t.defined()) continue;
    MINIDL_CHECK(t.dim() == x.dim(), "diff: expected prepend and append of x's rank ", x.dim(), ", got shape ",
                 t.shape());
    parts.push_back(t);
  }
  Tensor out = parts.size() == 1 ? x : cat(parts, d);
  for (int64_t i = 0; i < n && out.size(d) > 0; ++i) {
    const int64_t len = out.size(d) - 1;
    const Tensor later = narrow(out, d, 1, len), earlier = narrow(out, d, 0, len);
    out = out.dtype() == kBool ? ne(later, earlier) : sub(later, earlier);
  }
  return out;
}

}  // namespace minidl
