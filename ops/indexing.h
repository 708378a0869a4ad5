#pragma once
// x.index({...}) and x.index_put_({...}, v) as libtorch's (Python's x[...] and x[...] = v), with
// the index types of core/tensor_index.h; masked_select and nonzero.
//
// Basic indices (integers, Slice, None, Ellipsis) give a view of x: no copy, shared memory.
// Advanced ones (integer tensors, bool masks) gather: the index tensors broadcast together; where
// they are adjacent their broadcast dims replace the indexed dims in place, where others stand
// between them they go first (x[:, i, :, j] has i's and j's broadcast shape first). Integers are
// basic, as in PyTorch (not NumPy): x.index({0, Slice(), idx}) selects dim 0, then gathers.
// Negative indices count from the end; one out of range is an error naming it, the dim and the
// size, found before any kernel runs (a device sync on CUDA for advanced indices, and bool masks
// always sync on CUDA: their count sets the result's size).
#include <initializer_list>
#include <optional>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"
#include "core/tensor_index.h"

namespace minidl {

/// x[indices]: a view for basic indices, a gathered copy with advanced ones. Differentiable: the
/// gradient of a gather adds into zeros (repeated indices add up).
///   using namespace minidl::indexing;
///   x.index({Slice(), 0});  x.index({"...", None});  x.index({mask});  x.index({idx, Slice(1, None)})
Tensor index(const Tensor& x, std::initializer_list<indexing::TensorIndex> indices);
Tensor index(const Tensor& x, const std::vector<indexing::TensorIndex>& indices);

/// x[indices] = value in place (value broadcast to x[indices]'s shape, of x's dtype and device),
/// through views of x too; bumps x's version. Recorded when x or value requires grad (value's
/// gradient: the output gradient at the written places, summed to value's shape; x's: the output
/// gradient with those places zeroed); a leaf that requires grad is refused. Repeated indices:
/// one write wins. The history recorded is x's own: a tensor that x is a view of does not see the
/// write in its gradient (take the gradient through x, or index_put the base).
///   x.index_put_({mask}, 0.0);  x.index_put_({Slice(), idx}, values);
Tensor& index_put_(Tensor& x, std::initializer_list<indexing::TensorIndex> indices, const Tensor& value);
Tensor& index_put_(Tensor& x, const std::vector<indexing::TensorIndex>& indices, const Tensor& value);
Tensor& index_put_(Tensor& x, std::initializer_list<indexing::TensorIndex> indices, const Scalar& value);
Tensor& index_put_(Tensor& x, const std::vector<indexing::TensorIndex>& indices, const Scalar& value);
/// libtorch's index_put_(indices, values, accumulate): one optional tensor per leading dim
/// (std::nullopt: the whole dim); with `accumulate`, repeated indices add up instead of one winning.
/// (accumulate has no default here, so that a braced list picks the TensorIndex forms above.)
///   x.index_put_({rows, cols}, ones({3}), /*accumulate=*/true)
Tensor& index_put_(Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                   bool accumulate);
/// The out-of-place form: a copy of x with the values put (torch.index_put).
Tensor index_put(const Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                 bool accumulate = false);

/// The elements of x where the bool mask is true (mask and x broadcast together), as a 1-D tensor in
/// row-major order. Differentiable in x. A device sync on CUDA (the count sets the size).
///   Tensor positives = masked_select(x, x > 0);
Tensor masked_select(const Tensor& x, const Tensor& mask);
/// The positions of x's nonzero elements, int64 [n, x.dim()] in row-major order. A device sync on
/// CUDA: n is known only after counting.   nonzero(mask).select(1, 0)  // the rows of the true ones
Tensor nonzero(const Tensor& x);
/// nonzero under NumPy's name.
Tensor argwhere(const Tensor& x);
/// The positions where condition is nonzero, one int64 1-D tensor per dim (a 0-d condition counts
/// as 1-D), as torch.where(condition) and nonzero(as_tuple=True).   auto rows_cols = where(mask);
std::vector<Tensor> where(const Tensor& condition);

}  // namespace minidl
