// diagonal is a strided view: the two dims' strides added make one step along the diagonal. Its
// backward writes the gradient onto the same view of zeros; diag_embed is that in the forward, and
// its backward is diagonal.
#include "ops/diagonal.h"

#include <algorithm>
#include <vector>

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/kernels.h"
#include "ops/reduce.h"

namespace minidl {

namespace {

struct DiagonalDims {
  int64_t dim1, dim2;
};

DiagonalDims checked_dims(int64_t rank, int64_t dim1, int64_t dim2, const char* op) {
  MINIDL_CHECK(rank >= 2, op, ": expected a tensor with at least 2 dimensions, got ", rank);
  dim1 = wrap_dim(dim1, rank, op);
  dim2 = wrap_dim(dim2, rank, op);
  MINIDL_CHECK(dim1 != dim2, op, ": expected two different dimensions, got ", dim1, " twice");
  return {dim1, dim2};
}

// The diagonal's view of `t` (no recording).
Tensor diagonal_view(const Tensor& t, int64_t offset, DiagonalDims d) {
  const int64_t rows = t.size(d.dim1), cols = t.size(d.dim2);
  const int64_t length = std::max<int64_t>(0, offset >= 0 ? std::min(rows, cols - offset) : std::min(rows + offset, cols));
  int64_t start = t.offset();
  if (length > 0) start += offset >= 0 ? offset * t.stride(d.dim2) : -offset * t.stride(d.dim1);
  Shape shape;
  Strides strides;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i == d.dim1 || i == d.dim2) continue;
    shape.push_back(t.size(i));
    strides.push_back(t.stride(i));
  }
  shape.push_back(length);
  strides.push_back(t.stride(d.dim1) + t.stride(d.dim2));
  return Tensor::make_view(t, std::move(shape), std::move(strides), start);
}

}  // namespace

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const DiagonalDims d = checked_dims(x.dim(), dim1, dim2, "diagonal");
  Tensor out = diagonal_view(x, offset, d);
  if (autograd::needs_recording({x})) {
    autograd::record("diagonal", out, {x}, [in_shape = x.shape(), offset, d](const Tensor& g, const std::vector<bool>&) {
      Tensor grad = zeros(in_shape, g.dtype(), g.device());
      Tensor place = diagonal_view(grad, offset, d);
      kernels_for(g.device()).copy(g, place);
      return std::vector<Tensor>{grad};
    });
  }
  return out;
}

Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  MINIDL_CHECK(x.dim() >= 1, "diag_embed: expected a tensor with at least 1 dimension, got a scalar");
  const int64_t rank = x.dim() + 1;
  const DiagonalDims d = checked_dims(rank, dim1, dim2, "diag_embed");
  const int64_t n = x.size(-1) + (offset >= 0 ? offset : -offset);
  // x's leading dims fill the output's other dims in order.
  Shape shape;
  int64_t next = 0;
  for (int64_t i = 0; i < rank; ++i) shape.push_back(i == d.dim1 || i == d.dim2 ? n : x.size(next++));
  Tensor out = zeros(shape, x.dtype(), x.device());
  Tensor place = diagonal_view(out, offset, d);
  kernels_for(x.device()).copy(x, place);
  if (autograd::needs_recording({x})) {
    autograd::record("diag_embed", out, {x}, [offset, d](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{diagonal(g, offset, d.dim1, d.dim2)};
    }, true);
  }
  return out;
}

Tensor diag(const Tensor& x, int64_t diagonal_offset) {
  MINIDL_CHECK(x.dim() == 1 || x.dim() == 2, "diag: expected a 1-D or 2-D tensor, got ", x.dim(), "-D of shape ",
               x.shape());
  if (x.dim() == 1) return diag_embed(x, diagonal_offset, 0, 1);
  return diagonal(x, diagonal_offset, 0, 1).contiguous();
}

Tensor trace(const Tensor& x) {
  MINIDL_CHECK(x.dim() == 2, "trace: expected a 2-D tensor, got ", x.dim(), "-D of shape ", x.shape());
  return sum(diagonal(x));
}

namespace {

Tensor triangle_indices(int64_t row, int64_t col, int64_t offset, TensorOptions options, bool upper, const char* op) {
  MINIDL_CHECK(row >= 0 && col >= 0, op, ": expected row and col >= 0, got ", row, " and ", col);
  std::vector<int64_t> rows, cols;
  for (int64_t r = 0; r < row; ++r)
    for (int64_t c = 0; c < col; ++c)
      if (upper ? c - r >= offset : c - r <= offset) rows.push_back(r), cols.push_back(c);
  const int64_t n = static_cast<int64_t>(rows.size());
  rows.insert(rows.end(), cols.begin(), cols.end());
  return Tensor::from_vector<int64_t>(rows, {2, n}).to(options.device(), options.dtype_or(kInt64));
}

}  // namespace

Tensor triu_indices(int64_t row, int64_t col, int64_t offset, TensorOptions options) {
  return triangle_indices(row, col, offset, options, true, "triu_indices");
}

Tensor tril_indices(int64_t row, int64_t col, int64_t offset, TensorOptions options) {
  return triangle_indices(row, col, offset, options, false, "tril_indices");
}

}  // namespace minidl
