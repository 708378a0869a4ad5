#pragma once
// Diagonals, as PyTorch's: diagonal is a view of one diagonal of two dimensions; diag_embed writes a
// tensor's last dimension onto a diagonal of a new one; diag does either for 1-D and 2-D tensors;
// trace sums a matrix's diagonal; triu_indices / tril_indices list a triangle's coordinates.
#include "core/tensor.h"
#include "core/tensor_options.h"

namespace minidl {

/// The view of the diagonal of dims dim1 and dim2 (offset > 0: above the main one, < 0: below),
/// those dims dropped and the diagonal appended last.   diagonal(scores, 0, -2, -1)  // [B, L]
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
/// A new tensor, zero but for the diagonal of dims dim1 and dim2, which holds x's last dimension.
///   diag_embed(variances)  // [B, n] -> [B, n, n]
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
/// 1-D x: the square matrix with x on its `diagonal`-th diagonal. 2-D x: a copy of that diagonal.
///   diag(ones({3}))  // eye(3)
Tensor diag(const Tensor& x, int64_t diagonal = 0);
/// The sum of a 2-D tensor's main diagonal, 0-d.   trace(m)
Tensor trace(const Tensor& x);
/// [2, N]: the row and column of each element of the upper (triu) or lower (tril) triangle of a
/// row x col matrix, row by row; offset as triu's and tril's diagonal. int64 unless options say.
///   Tensor upper = triu_indices(4, 4, 1);  x.index({upper[0], upper[1]})
Tensor triu_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = kInt64);
Tensor tril_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = kInt64);

}  // namespace minidl
