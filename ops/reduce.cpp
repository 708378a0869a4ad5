// Reductions. Shapes: sum/mean over `dims` drop them (or keep size 1 with keepdim); max over one
// dim returns values and int64 indices of that shape. The kernel reduces the middle axis of an
// [outer, n, inner] view, so a contiguous run of reduced dims needs no copy; scattered dims are
// permuted to the end first.
#include "ops/reduce.h"

#include <algorithm>
#include <numeric>

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/view.h"

namespace minidl {

namespace {

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t rank, const char* op) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, rank, op));
  std::sort(out.begin(), out.end());
  MINIDL_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, ": a dimension repeats in ", Shape(dims));
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Reduces sorted `dims` of x; returns the result with keepdim shape.
Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, Tensor* argmax) {
  Tensor src = x;
  int64_t first = dims.front(), last = dims.back();
  bool adjacent = last - first + 1 == static_cast<int64_t>(dims.size());
  if (!adjacent) {
    std::vector<int64_t> order;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (!std::binary_search(dims.begin(), dims.end(), d)) order.push_back(d);
    first = static_cast<int64_t>(order.size());
    order.insert(order.end(), dims.begin(), dims.end());
    last = x.dim() - 1;
    src = permute(x, order);
  }
  src = src.contiguous();
  // The result first: a result too large to count is an error that names its shape. The products
  // below are checked too, because a zero elsewhere (an empty input) may follow huge dimensions.
  Tensor out = Tensor::empty(reduced_shape(x.shape(), dims, true), x.dtype(), x.device());
  auto prod = [&](int64_t from, int64_t to) {
    return shape_numel(Shape(src.shape().begin() + from, src.shape().begin() + to));
  };
  int64_t outer = prod(0, first), n = prod(first, last + 1), inner = prod(last + 1, src.dim());
  if (argmax) *argmax = Tensor::empty(out.shape(), kInt64, x.device());
  MINIDL_CHECK(n > 0 || op == ReduceOp::Sum, "max: cannot reduce over an empty dimension of shape ", x.shape());
  if (out.numel() == 0) return out;  // nothing to compute, and outer * n * inner may not be countable
  if (n == 0) return out.zero_();    // a sum over nothing
  kernels_for(x.device()).reduce(op, src, outer, n, inner, out, argmax);
  return out;
}

Tensor sum_impl(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  if (x.dtype() == kBool) return sum_impl(x.to(kInt64), std::move(dims), keepdim);  // counts, as PyTorch's
  MINIDL_CHECK(x.dtype() != kInt64 || !x.requires_grad(), "sum: int64 tensors cannot require grad");
  Shape in_shape = x.shape();
  Tensor out;
  if (dims.empty()) {
    NoGradGuard no_grad;  // the copy of a 0-d x; the sum's own entry below is its history
    out = x.clone();
  } else {
    NoGradGuard no_grad;
    out = reduce_kernel(ReduceOp::Sum, x, dims, nullptr);
    if (!keepdim) out = view(out, reduced_shape(in_shape, dims, false));
  }
  if (autograd::needs_recording({x})) {
    autograd::record("sum", out, {x}, [in_shape, dims, keepdim](const Tensor& g, const std::vector<bool>&) {
      Tensor gk = keepdim ? g : view(g, reduced_shape(in_shape, dims, true));
      return std::vector<Tensor>{expand(gk, in_shape).contiguous()};
    });
  }
  return out;
}

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_impl(x, all_dims(x.dim()), false); }

// An empty dim list reduces every dim, as torch.sum(x, dim=[]) does: never a silent no-op.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return sum_impl(x, dims.empty() ? all_dims(x.dim()) : normalize_dims(dims, x.dim(), "sum"), keepdim);
}

Tensor mean(const Tensor& x) { return mean(x, all_dims(x.dim()), false); }

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  MINIDL_CHECK(is_floating(x.dtype()), "mean: expected a floating tensor, got ", x.dtype());
  std::vector<int64_t> d = dims.empty() ? all_dims(x.dim()) : normalize_dims(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t i : d) count *= x.shape()[i];
  return div(sum_impl(x, d, keepdim), scalar_like(static_cast<double>(count), x));
}

MaxResult max(const Tensor& x, int64_t dim, bool keepdim) {
  dim = wrap_dim(dim, x.dim(), "max");
  std::vector<int64_t> dims = x.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{dim};
  if (dims.empty()) return {x, zeros({}, kInt64, x.device())};
  Tensor indices;
  Tensor values;
  {
    NoGradGuard no_grad;
    values = reduce_kernel(ReduceOp::Max, x, dims, &indices);
    if (!keepdim) {
      Shape s = reduced_shape(x.shape(), dims, false);
      values = view(values, s);
      indices = view(indices, s);
    }
  }
  if (autograd::needs_recording({x})) {
    // Gradient goes to the argmax: one-hot along `dim`, built by comparing positions with indices.
    autograd::record("max", values, {x}, [in_shape = x.shape(), dim, keepdim, indices](const Tensor& g, const std::vector<bool>&) {
      Shape keep = in_shape;
      keep[dim] = 1;
      Shape pos_shape(in_shape.size(), 1);
      pos_shape[dim] = in_shape[dim];
      Tensor positions = view(arange(static_cast<double>(in_shape[dim]), kInt64, g.device()), pos_shape);
      Tensor hit = eq(expand(positions, in_shape), expand(view(indices, keep), in_shape)).to(g.dtype());
      Tensor gk = keepdim ? g : view(g, keep);
      return std::vector<Tensor>{mul(hit, gk)};
    });
  }
  return {values, indices};
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return max(x, dim, keepdim).indices;
}

// min and var are compositions: the Max kernel on -x, and mean / sub / mul / sum, whose backwards
// give their gradients.
MaxResult min(const Tensor& x, int64_t dim, bool keepdim) {
  MaxResult m = max(neg(x), dim, keepdim);
  return {neg(m.values), m.indices};
}

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return min(x, dim, keepdim).indices;
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  MINIDL_CHECK(is_floating(x.dtype()), "var: expected a floating tensor, got ", x.dtype());
  std::vector<int64_t> d = normalize_dims(dims, x.dim(), "var");
  int64_t count = 1;
  for (int64_t i : d) count *= x.shape()[i];
  MINIDL_CHECK(!unbiased || count > 1, "var: the unbiased variance of ", count,
               " element(s) divides by zero; pass unbiased=false");
  Tensor centered = sub(x, mean(x, d, true));
  Tensor squares = sum(mul(centered, centered), d, keepdim);
  return div(squares, scalar_like(static_cast<double>(unbiased ? count - 1 : count), x));
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  MINIDL_CHECK(x.dim() >= static_cast<int64_t>(shape.size()), "sum_to_shape: cannot reduce ", x.shape(), " to ", shape);
  size_t lead = x.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < x.shape().size(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1)) dims.push_back(static_cast<int64_t>(d));
  }
  Tensor out = dims.empty() ? x : sum(x, dims, true);
  return reshape(out, shape);
}

Tensor Tensor::sum() const { return minidl::sum(*this); }
Tensor Tensor::mean() const { return minidl::mean(*this); }

}  // namespace minidl
