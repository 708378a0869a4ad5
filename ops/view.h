#pragma once
// Views: new shapes and strides over the same storage, no copy (reshape copies only when it must).
// Each is differentiable; Tensor's view methods call these.
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// One dimension may be -1 (inferred). Requires a layout that a view can express.
Tensor view(const Tensor& x, Shape shape);
/// Like view, but copies when the layout needs it.
Tensor reshape(const Tensor& x, Shape shape);
/// flatten(x, 1) turns [N, C, H, W] into [N, C*H*W].
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
/// Splits dim into `sizes` (one of them may be -1), flatten's inverse.   unflatten(x, 1, {3, 4})  // [N, 12] -> [N, 3, 4]
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
/// Removes dimension `dim` if its size is 1.
Tensor squeeze(const Tensor& x, int64_t dim);
/// Removes every dimension of size 1.   squeeze(zeros({2, 1, 3, 1}))  // [2, 3]
Tensor squeeze(const Tensor& x);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
/// The dims `source` moved to the positions `destination`, the others keeping their order (a
/// permute).   movedim(x, 1, -1)  // [N, C, H, W] -> [N, H, W, C]
Tensor movedim(const Tensor& x, const std::vector<int64_t>& source, const std::vector<int64_t>& destination);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
/// Broadcasts size-1 (or missing leading) dimensions to `shape` with stride 0.
Tensor expand(const Tensor& x, const Shape& shape);

/// Every window of `size` elements along `dim`, `step` apart, as a view: dim becomes the number of
/// windows and a last dim of `size` is added (x.unfold in PyTorch). The gradient adds the windows
/// back, overlaps included.   unfold(signal, -1, 16, 8)  // [..., L] -> [..., (L - 16) / 8 + 1, 16]
Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step);

// In place (ops/view_inplace.cpp): x itself, every handle to it, takes the view's shape and strides;
// nothing is copied. Recorded for autograd like other in-place ops (a leaf that requires grad is
// refused).   x.unsqueeze_(0);  w.t_();
Tensor& transpose_(Tensor& x, int64_t dim0, int64_t dim1);
/// transpose_(x, 0, 1) for 2 dims; a tensor of fewer dims is left as it is.
Tensor& t_(Tensor& x);
Tensor& squeeze_(Tensor& x, int64_t dim);
Tensor& squeeze_(Tensor& x);
Tensor& unsqueeze_(Tensor& x, int64_t dim);

}  // namespace minidl
