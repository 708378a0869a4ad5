// Reductions. Shapes: sum/mean over `dims` drop them (or keep size 1 with keepdim); max over one
// dim returns values and int64 indices of that shape. The kernel reduces the middle axis of an
// [outer, n, inner] view, so a contiguous run of reduced dims needs no copy; scattered dims are
// permuted to the end first.
#include "ops/reduce.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/autocast_policy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/copy.h"
#include "ops/kernels.h"
#include "ops/reduce_dims.h"
#include "ops/scan.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace detail {

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

std::vector<int64_t> all_dims(int64_t rank) {
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

}  // namespace detail

namespace {

using detail::all_dims;
using detail::normalize_dims;
using detail::reduced_shape;

// Reduces sorted `dims` of x; returns the result with keepdim shape, in x's dtype or (a sum of 16-bit
// values) in `out_dtype`.
Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, Tensor* argmax,
                     std::optional<DType> out_dtype = std::nullopt) {
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
  Tensor out = Tensor::empty(reduced_shape(x.shape(), dims, true), out_dtype.value_or(x.dtype()), x.device());
  auto prod = [&](int64_t from, int64_t to) {
    return shape_numel(Shape(src.shape().begin() + from, src.shape().begin() + to));
  };
  int64_t outer = prod(0, first), n = prod(first, last + 1), inner = prod(last + 1, src.dim());
  if (argmax) *argmax = Tensor::empty(out.shape(), kInt64, x.device());
  MINIDL_CHECK(n > 0 || op != ReduceOp::Max, "max: cannot reduce over an empty dimension of shape ", x.shape());
  if (out.numel() == 0) return out;  // nothing to compute, and outer * n * inner may not be countable
  if (n == 0) {                      // a sum (0) or product (1) over nothing
    fill_(out, op == ReduceOp::Prod ? 1.0 : 0.0);
    return out;
  }
  kernels_for(x.device()).reduce(op, src, outer, n, inner, out, argmax);
  return out;
}

// With `widen`, a 16-bit x is summed into float32 without a float32 copy of it (a 16-bit mean's sum,
// and sum(x, kFloat32)); its gradient comes back in x's dtype.
Tensor sum_impl(const Tensor& x, std::vector<int64_t> dims, bool keepdim, bool widen = false) {
  // bool and the narrow integers sum as int64 (counts, pixel totals), as PyTorch's do.
  if (is_integral(x.dtype(), true) && x.dtype() != kInt64) return sum_impl(x.to(kInt64), std::move(dims), keepdim);
  MINIDL_CHECK(x.dtype() != kInt64 || !x.requires_grad(), "sum: int64 tensors cannot require grad");
  widen = widen && is_reduced_floating(x.dtype());
  Shape in_shape = x.shape();
  Tensor out;
  if (dims.empty()) {
    NoGradGuard no_grad;  // the copy of a 0-d x; the sum's own entry below is its history
    out = widen ? x.to(kFloat32) : x.clone();
  } else {
    NoGradGuard no_grad;
    out = reduce_kernel(ReduceOp::Sum, x, dims, nullptr, widen ? std::optional<DType>(kFloat32) : std::nullopt);
    if (!keepdim) out = view(out, reduced_shape(in_shape, dims, false));
  }
  if (autograd::needs_recording({x})) {
    autograd::record("sum", out, {x}, [in_shape, dims, keepdim, dtype = x.dtype()](const Tensor& g,
                                                                                 const std::vector<bool>&) {
      Tensor gk = keepdim ? g : view(g, reduced_shape(in_shape, dims, true));
      return std::vector<Tensor>{expand(gk, in_shape).to(dtype).contiguous()};
    }, true);
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) {
  MINIDL_AUTOCAST(sum, sum, x);
  return sum_impl(x, all_dims(x.dim()), false);
}

// An empty dim list reduces every dim, as torch.sum(x, dim=[]) does: never a silent no-op.
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim) {
  MINIDL_AUTOCAST(sum, sum, x, dims, keepdim);
  return sum_impl(x, dims.empty() ? all_dims(x.dim()) : normalize_dims(dims, x.dim(), "sum"), keepdim);
}

Tensor mean(const Tensor& x) { return mean(x, all_dims(x.dim()), false); }

// The reduction runs in the dtype asked for, also under autocast (PyTorch leaves an explicit dtype
// alone there).
Tensor sum(const Tensor& x, DType dtype) { return sum(x, all_dims(x.dim()), false, dtype); }
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, DType dtype) {
  autocast::ExcludeGuard as_asked;
  if (is_reduced_floating(x.dtype()) && dtype == kFloat32)  // no float32 copy of x
    return sum_impl(x, dims.empty() ? all_dims(x.dim()) : normalize_dims(dims, x.dim(), "sum"), keepdim, true);
  return sum(x.to(dtype), dims, keepdim);
}
Tensor mean(const Tensor& x, DType dtype) { return mean(x, all_dims(x.dim()), false, dtype); }
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, DType dtype) {
  autocast::ExcludeGuard as_asked;
  return mean(x.to(dtype), dims, keepdim);
}

Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim) {
  MINIDL_CHECK(is_floating(x.dtype()), "mean(): could not infer output dtype. Input dtype must be either a floating "
               "point or complex dtype. Got: ", x.dtype(), " (convert with .to(kFloat32) first)");
  std::vector<int64_t> d = dims.empty() ? all_dims(x.dim()) : normalize_dims(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t i : d) count *= x.shape()[i];
  Tensor out;
  {
    NoGradGuard no_grad;  // one entry for the mean (MeanBackward), not a sum and a division
    // A 16-bit x is summed and divided in float32, rounded once (ops/reduce.h), since in float16 a
    // sum past 65,504 is infinite and in either 16-bit dtype a count rounds (257 to 256 in bfloat16);
    // other dtypes are summed and divided in their own.
    out = div(sum_impl(x, d, keepdim, /*widen=*/true), Scalar(static_cast<double>(count))).to(x.dtype());
  }
  if (autograd::needs_recording({x})) {
    // The count as a number, which a 16-bit gradient divides by in float32 (scalar_operand).
    autograd::record("mean", out, {x}, [in_shape = x.shape(), d, keepdim, count](const Tensor& g, const std::vector<bool>&) {
      Tensor gk = keepdim ? g : view(g, reduced_shape(in_shape, d, true));
      return std::vector<Tensor>{div(expand(gk, in_shape), Scalar(static_cast<double>(count)))};
    }, true);
  }
  return out;
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

namespace {
// An index of the flattened x, with keepdim shaped as x with every dim 1.
Tensor flat_index(const Tensor& index, const Tensor& x, bool keepdim) {
  return keepdim ? index.reshape(Shape(x.dim(), 1)) : index;
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  NoGradGuard no_grad;
  if (!dim) return flat_index(max(x.reshape({-1}), 0).indices, x, keepdim);
  return max(x, *dim, keepdim).indices;
}

// min and var are compositions: the Max kernel on -x, and mean / sub / mul / sum, whose backwards
// give their gradients.
MaxResult min(const Tensor& x, int64_t dim, bool keepdim) {
  MaxResult m = max(neg(x), dim, keepdim);
  return {neg(m.values), m.indices};
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  NoGradGuard no_grad;
  if (!dim) return flat_index(min(x.reshape({-1}), 0).indices, x, keepdim);
  return min(x, *dim, keepdim).indices;
}

Tensor var(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  autocast::ExcludeGuard one_op;  // one op for autocast, as PyTorch's: its sum must not widen it to float32
  MINIDL_CHECK(is_floating(x.dtype()), "var: expected a floating tensor, got ", x.dtype());
  // A 16-bit x in float32, rounded once (the rule of ops/reduce.h).
  if (is_reduced_floating(x.dtype())) return var(x.to(kFloat32), dims, unbiased, keepdim).to(x.dtype());
  std::vector<int64_t> d = dims.empty() ? all_dims(x.dim()) : normalize_dims(dims, x.dim(), "var");
  int64_t count = 1;
  for (int64_t i : d) count *= x.shape()[i];
  MINIDL_CHECK(!unbiased || count > 1, "var: the unbiased variance of ", count,
               " element(s) divides by zero; pass unbiased=false");
  Tensor centered = sub(x, mean(x, d, true));
  Tensor squares = sum(mul(centered, centered), d, keepdim);
  return div(squares, scalar_like(static_cast<double>(unbiased ? count - 1 : count), x));
}

// prod multiplies bool and integral tensors as int64, as PyTorch's does.
Tensor prod(const Tensor& x) { return reshape(prod(reshape(x, {x.numel()}), 0, false), {}); }

Tensor prod(const Tensor& x_in, int64_t dim, bool keepdim) {
  MINIDL_AUTOCAST(prod, prod, x_in, dim, keepdim);
  Tensor x = is_floating(x_in.dtype()) || x_in.dtype() == kInt64 ? x_in : x_in.to(kInt64);
  dim = wrap_dim(dim, x.dim(), "prod");
  if (x.dim() == 0) return reshape(prod(reshape(x, {1}), 0, false), {});
  Tensor out;
  {
    NoGradGuard no_grad;
    out = reduce_kernel(ReduceOp::Prod, x, {dim}, nullptr);
    if (!keepdim) out = view(out, reduced_shape(x.shape(), {dim}, false));
  }
  if (autograd::needs_recording({x})) {
    // d prod / d x_i is the product of the others: cumprod's gradient for an output gradient that
    // is g at the last position and 0 before it, computed without dividing by x, so that zeros in
    // x give PyTorch's values (one zero: the product of the rest there, 0 elsewhere; two: all 0).
    autograd::record("ProdBackward1", out, {x}, {x}, [sx = x.detach(), dim, keepdim](const Tensor& g, const std::vector<bool>&) {
      const int64_t n = sx.size(dim);
      Shape keep = sx.shape();
      keep[static_cast<size_t>(dim)] = 1;
      Tensor grad_out = zeros(sx.shape(), g.dtype(), g.device());
      if (n == 0) return std::vector<Tensor>{grad_out};
      {
        NoGradGuard no_grad;
        Tensor last = narrow(grad_out, dim, n - 1, 1);
        copy_(last, keepdim ? g : view(g, keep));
      }
      return std::vector<Tensor>{cumprod_backward(grad_out, sx, dim)};
    });
  }
  return out;
}

namespace {

Tensor nonzero_mask(const Tensor& x) { return x.dtype() == kBool ? x : ne(x, 0); }

// any and all count the nonzero (or zero) elements with sum, which counts bools as int64.
Tensor count_over(const Tensor& mask, int64_t dim, bool keepdim, const char* op) {
  dim = wrap_dim(dim, mask.dim(), op);
  if (mask.dim() == 0) return sum(mask);
  return sum(mask, {dim}, keepdim);
}

}  // namespace

Tensor any(const Tensor& x) {
  NoGradGuard no_grad;
  return gt(sum(nonzero_mask(x)), 0);
}

Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return gt(count_over(nonzero_mask(x), dim, keepdim, "any"), 0);
}

Tensor all(const Tensor& x) {
  NoGradGuard no_grad;
  return eq(sum(eq(nonzero_mask(x), false)), 0);
}

Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return eq(count_over(eq(nonzero_mask(x), false), dim, keepdim, "all"), 0);
}

namespace {

// The gradient of a max or min over `dims` shared evenly among the elements equal to the result;
// `nan_ties`: a NaN result also goes to the NaN elements (max() and min(), as PyTorch's), else it
// gives NaN gradients (amax and amin, whose masks compare equal nowhere there).
Tensor evenly_distributed(const Tensor& g, const Tensor& x, const Tensor& value, const Shape& keep_shape,
                          const std::vector<int64_t>& dims, bool nan_ties) {
  Tensor vk = view(value, keep_shape);
  Tensor mask = eq(x, vk).to(g.dtype());
  if (nan_ties) mask = add(mask, mul(ne(x, x).to(g.dtype()), ne(vk, vk).to(g.dtype())));
  Tensor count = sum(mask, dims, true);
  return mul(div(view(g, keep_shape), count), mask);
}

// amax over sorted, non-empty `dims`; amin is amax of -x, except for the dtypes whose negation
// wraps around or does not exist (bool, the unsigned and narrow integers), which go through int64.
Tensor extremum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim, bool largest, bool nan_ties,
                const char* op, const char* node) {
  if (x.dtype() != kInt64 && !is_floating(x.dtype())) {
    NoGradGuard no_grad;
    return extremum(x.to(kInt64), dims_in, keepdim, largest, nan_ties, op, node).to(x.dtype());
  }
  std::vector<int64_t> dims = dims_in.empty() ? all_dims(x.dim()) : normalize_dims(dims_in, x.dim(), op);
  for (int64_t d : dims) {
    MINIDL_CHECK(x.size(d) > 0, op, ": cannot reduce over dimension ", d, " of size 0 (shape ", x.shape(),
                 "): the maximum or minimum of nothing is undefined");
  }
  Tensor out;
  {
    NoGradGuard no_grad;
    if (dims.empty()) {  // a 0-d tensor: its own extremum
      out = x.clone();
    } else {
      out = reduce_kernel(ReduceOp::Max, largest ? x : neg(x), dims, nullptr);
      if (!largest) out = neg(out);
      if (!keepdim) out = view(out, reduced_shape(x.shape(), dims, false));
    }
  }
  if (autograd::needs_recording({x})) {
    autograd::record(node, out, {x}, {x, out},
                     [sx = x.detach(), so = out.detach(), dims, nan_ties](const Tensor& g, const std::vector<bool>&) {
                       return std::vector<Tensor>{
                           evenly_distributed(g, sx, so, reduced_shape(sx.shape(), dims, true), dims, nan_ties)};
                     });
  }
  return out;
}

}  // namespace

Tensor max(const Tensor& x) { return extremum(x, {}, false, true, true, "max", "MaxBackward1"); }
Tensor min(const Tensor& x) { return extremum(x, {}, false, false, true, "min", "MinBackward1"); }
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extremum(x, dims, keepdim, true, false, "amax", "AmaxBackward0");
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extremum(x, dims, keepdim, false, false, "amin", "AminBackward0");
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
