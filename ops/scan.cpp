// cumsum, cumprod, logcumsumexp, cummax and cummin. Shapes: the output has x's shape. The kernels scan
// the middle axis of an [outer, n, inner] view of a contiguous tensor, `dim` being the middle, so no
// dim is moved.
#include "ops/scan.h"

#include <limits>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/kernels.h"
#include "ops/logical.h"
#include "ops/math.h"
#include "ops/pointwise.h"
#include "ops/slice.h"
#include "ops/view.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

struct ScanGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};

ScanGeometry scan_geometry(const Shape& shape, int64_t dim) {
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
  const ScanGeometry g = scan_geometry(x.shape(), dim);
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
    // A cumsum the other way: a recorded op, so a create_graph backward goes through it.
    autograd::record("CumsumBackward0", out, {x}, [dim, reverse](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{cumsum_impl(g, dim, !reverse)};
    }, true);
  }
  return out;
}

// logcumsumexp from the front, or from the back when `reverse` (its own gradient's direction).
Tensor logcumsumexp_impl(const Tensor& x, int64_t dim, bool reverse) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = scan_forward(ScanOp::LogAddExp, x, dim, reverse);
  }
  if (autograd::needs_recording({x})) {
    // grad_x[j] = sum over i >= j of g[i] exp(x[j] - out[i]), taken in log space with g's positive
    // and negative parts apart so that neither exp overflows: exp(x + reversed logcumsumexp(log|g| - out)).
    // -inf is log(0), as a log-space dynamic program uses it: an x[j] of -inf gets 0, and an out[i] of
    // -inf (a prefix of -infs) adds no term, where the bare formula would make -inf - -inf = NaN. The
    // same care makes the formula differentiable again: log|g| is taken only where it is used.
    autograd::record("LogcumsumexpBackward0", out, {x}, {x, out},
                     [sx = x, so = out.detach(), dim, reverse](const Tensor& g, const std::vector<bool>&) {
      const Tensor out_i = autograd::saved_output(so);
      const Tensor neg_inf = full_like(g, -std::numeric_limits<double>::infinity());
      const Tensor reached = gt(out_i, neg_inf);
      const Tensor pos = logical_and(gt(g, 0), reached), neg = logical_and(lt(g, 0), reached);
      const Tensor used = logical_or(pos, neg);
      const Tensor log_g = log(abs(where(used, g, ones_like(g)))) - where(used, out_i, zeros_like(out_i));
      const Tensor log_pos = where(pos, log_g, neg_inf), log_neg = where(neg, log_g, neg_inf);
      return std::vector<Tensor>{exp(sx + logcumsumexp_impl(log_pos, dim, !reverse)) -
                                 exp(sx + logcumsumexp_impl(log_neg, dim, !reverse))};
    }, true);
  }
  return out;
}

// cummax (Max) or cummin (Min): the running extreme and the last index that reached it (a later
// equal element, or a later NaN, takes over, as in PyTorch). The values are gathered from x at those
// indices, so the gradient goes back to the elements they came from.
std::tuple<Tensor, Tensor> running_extreme(const Tensor& x, int64_t dim, ScanOp op, const char* name) {
  MINIDL_CHECK(x.defined(), name, ": expected a defined tensor");
  if (x.dim() == 0) {
    wrap_dim(dim, 1, name);
    return {x.clone(), zeros({}, TensorOptions().dtype(kInt64).device(x.device()))};
  }
  dim = wrap_dim(dim, x.dim(), name);
  Tensor index;
  {
    NoGradGuard no_grad;
    const Tensor src = x.dtype() == kBool ? x.to(kInt64) : x;
    const Tensor extreme = scan_forward(op, src, dim, false);
    Tensor reached = eq(src, extreme);
    if (is_floating(x.dtype())) reached = logical_or(reached, isnan(src));
    Shape along(static_cast<size_t>(x.dim()), 1);
    along[static_cast<size_t>(dim)] = x.size(dim);
    const Tensor position = reshape(arange(x.size(dim), TensorOptions().dtype(kInt64).device(x.device())), along);
    index = scan_forward(ScanOp::Max, where(reached, position, -1), dim, false);
  }
  return {gather(x, dim, index), index};
}

}  // namespace

Tensor logcumsumexp(const Tensor& x_in, int64_t dim) {
  MINIDL_CHECK(x_in.defined(), "logcumsumexp: expected a defined tensor");
  const Tensor x = pointwise::floating(x_in);
  return logcumsumexp_impl(x, wrap_dim(dim, x.dim(), "logcumsumexp"), false);
}

std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  return running_extreme(x, dim, ScanOp::Max, "cummax");
}
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  return running_extreme(x, dim, ScanOp::Min, "cummin");
}

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
  const ScanGeometry g = scan_geometry(x.shape(), dim);
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
