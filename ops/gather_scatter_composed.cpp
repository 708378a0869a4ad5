// take, take_along_dim, index_fill, index_copy and masked_scatter (declared in ops/gather_scatter.h):
// gather, scatter and index_select with the index laid out along the other dims, so their gradients
// are those ops'.
#include "core/shape.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/view.h"

namespace minidl {

namespace {

// `index` (1-D or 0-d, checked against x's size at dim) laid along dim and expanded to `shape`.
Tensor index_along(const Tensor& x, int64_t dim, const Tensor& index, Shape shape, const char* op, bool wrap) {
  MINIDL_CHECK(index.dim() <= 1, op, ": expected a 1-D index, got shape ", index.shape());
  const Tensor idx = detail::checked_index(index.reshape({index.numel()}), x.size(dim), x.device(), op, dim, wrap);
  Shape along(static_cast<size_t>(x.dim()), 1);
  along[static_cast<size_t>(dim)] = idx.numel();
  shape[static_cast<size_t>(dim)] = idx.numel();
  return idx.reshape(along).expand(shape);
}

}  // namespace

Tensor take(const Tensor& x, const Tensor& index) {
  const Tensor flat = detail::checked_index(index.reshape({index.numel()}), x.numel(), x.device(), "take", 0, true);
  return index_select(x.reshape({x.numel()}), 0, flat).reshape(index.shape());
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  if (!dim) return gather(x.reshape({x.numel()}), 0, indices.reshape({indices.numel()}));
  MINIDL_CHECK(x.dim() == indices.dim(), "take_along_dim: expected indices with as many dims as x (", x.dim(),
               "), got shape ", indices.shape());
  const int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  Shape xs = x.shape(), is = indices.shape();
  xs[static_cast<size_t>(d)] = 1;
  is[static_cast<size_t>(d)] = 1;
  Shape common = broadcast_shapes(xs, is, "take_along_dim");
  Shape x_shape = common, index_shape = common;
  x_shape[static_cast<size_t>(d)] = x.size(d);
  index_shape[static_cast<size_t>(d)] = indices.size(d);
  return gather(x.expand(x_shape), d, indices.expand(index_shape));
}

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  MINIDL_CHECK(x.dim() > 0, "index_fill: expected a tensor with at least one dimension, got a scalar");
  dim = wrap_dim(dim, x.dim(), "index_fill");
  return scatter(x, dim, index_along(x, dim, index, x.shape(), "index_fill", true), value);
}

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  MINIDL_CHECK(x.dim() > 0, "index_fill: expected a tensor with at least one dimension, got a scalar");
  MINIDL_CHECK(value.dim() == 0, "index_fill: expected a 0-d value tensor, got shape ", value.shape());
  dim = wrap_dim(dim, x.dim(), "index_fill");
  const Tensor idx = index_along(x, dim, index, x.shape(), "index_fill", true);
  return scatter(x, dim, idx, value.to(x.dtype()).expand(idx.shape()));
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  MINIDL_CHECK(x.dim() > 0, "index_copy: expected a tensor with at least one dimension, got a scalar");
  dim = wrap_dim(dim, x.dim(), "index_copy");
  Shape expected = x.shape();
  expected[static_cast<size_t>(dim)] = index.numel();
  MINIDL_CHECK(source.shape() == expected, "index_copy: expected source of shape ", expected, " (x's with ",
               index.numel(), " at dim ", dim, "), got ", source.shape());
  MINIDL_CHECK(source.dtype() == x.dtype(), "index_copy: expected source of x's dtype ", x.dtype(), ", got ",
               source.dtype());
  return scatter(x, dim, index_along(x, dim, index, x.shape(), "index_copy", false), source);
}

Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  MINIDL_CHECK(mask.dtype() == kBool, "masked_scatter: expected a bool mask, got ", mask.dtype());
  MINIDL_CHECK(broadcasts_to(mask.shape(), x.shape()), "masked_scatter: expected a mask that broadcasts to ",
               x.shape(), ", got shape ", mask.shape());
  MINIDL_CHECK(source.dtype() == x.dtype(), "masked_scatter: expected source of x's dtype ", x.dtype(), ", got ",
               source.dtype());
  const Tensor m = mask.to(x.device()).expand(x.shape()).reshape({x.numel()});
  const int64_t count = sum(m).item<int64_t>();
  MINIDL_CHECK(source.numel() >= count, "masked_scatter: expected a source of at least ", count,
               " elements (the mask's true count), got ", source.numel());
  if (count == 0) return x.clone();
  // The k-th true position takes source's k-th element: k = (running count of trues) - 1.
  const Tensor k = clamp(cumsum(m.to(kInt64), 0) - 1, Scalar(0));
  const Tensor taken = index_select(source.reshape({source.numel()}), 0, k).reshape(x.shape());
  return where(m.reshape(x.shape()), taken, x);
}

}  // namespace minidl
