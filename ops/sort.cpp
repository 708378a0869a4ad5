// sort, argsort, topk. Shapes: values and indices have x's shape (topk: k along `dim`). The kernel
// sorts contiguous rows, so `dim` is swapped with the last dim first and back after.
#include "ops/sort.h"

#include "core/autograd.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace {

// x has at least one dim; dim is wrapped.
std::tuple<Tensor, Tensor> sort_dims(const Tensor& x, int64_t dim, bool descending) {
  const int64_t last = x.dim() - 1;
  Tensor xt = dim == last ? x : transpose(x, dim, last);
  const Shape& shape = xt.shape();
  const int64_t n = shape.back(), total = xt.numel();
  const int64_t rows = n == 0 ? 0 : total / n;
  Tensor values = Tensor::empty(shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(shape, kInt64, x.device());
  {
    NoGradGuard no_grad;
    // bool sorts as 0 and 1 (the kernels take arithmetic dtypes).
    Tensor keys = (x.dtype() == kBool ? xt.to(kInt64) : xt).contiguous();
    Tensor sorted = x.dtype() == kBool ? Tensor::empty(shape, kInt64, x.device()) : values;
    if (total > 0) kernels_for(x.device()).sort(keys, rows, n, descending, sorted, indices);
    if (x.dtype() == kBool) values = sorted.to(kBool);
  }
  if (autograd::needs_recording({x})) {
    // The values again, as a gather of x by flat position: index_select's gradient (index_add)
    // sends each value's gradient back where it came from.
    Tensor flat;
    {
      NoGradGuard no_grad;
      Shape row_shape = shape;
      row_shape.back() = 1;
      Tensor starts = view(arange(static_cast<double>(rows), kInt64, x.device()) * n, row_shape);
      flat = reshape(add(indices, starts), {total});
    }
    values = view(index_select(reshape(xt, {total}), 0, flat), shape);
  }
  if (dim == last) return {values, indices};
  return {transpose(values, dim, last).contiguous(), transpose(indices, dim, last).contiguous()};
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  dim = wrap_dim(dim, x.dim(), "sort");
  if (x.dim() == 0) {
    auto [v, i] = sort_dims(reshape(x, {1}), 0, descending);
    return {reshape(v, {}), reshape(i, {})};
  }
  return sort_dims(x, dim, descending);
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, std::optional<bool> /*stable*/, int64_t dim, bool descending) {
  return sort(x, dim, descending);
}

Tensor msort(const Tensor& x) { return std::get<0>(sort(x, 0)); }

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  NoGradGuard no_grad;
  return std::get<1>(sort(x, dim, descending));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  dim = wrap_dim(dim, x.dim(), "topk");
  const int64_t size = x.dim() == 0 ? 1 : x.size(dim);
  MINIDL_CHECK(k >= 0 && k <= size, "topk: k (", k, ") is out of range for dimension ", dim, " of size ", size,
               " (shape ", x.shape(), "); expected 0 <= k <= ", size);
  auto [values, indices] = sort(x, dim, largest);
  if (x.dim() == 0 || k == size) return {values, indices};
  return {narrow(values, dim, 0, k).contiguous(), narrow(indices, dim, 0, k).contiguous()};
}

}  // namespace minidl
