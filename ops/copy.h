#pragma once
// Copies between layouts, dtypes and devices; Tensor::to / contiguous / clone are defined here.
#include "core/tensor.h"

namespace minidl {

/// Writes `src` into `dst` in place (same shape; dtype and device may differ). Not recorded on the
/// tape: for loading weights and optimizer state.   copy_(param, loaded);
void copy_(Tensor& dst, const Tensor& src);

/// The slices of `src` along `dim` picked by the 1-D int64 `index` (repeats allowed), as
/// torch.index_select; the gradient adds back into the picked slices, accumulating over repeats.
///   Tensor cols = index_select(x, 1, Tensor::from_vector<int64_t>({2, 0, 2}));
Tensor index_select(const Tensor& src, int64_t dim, const Tensor& index);
/// index_select along dim 0: the batch gather of a data loader.   Tensor batch = index_select(images, index);
Tensor index_select(const Tensor& src, const Tensor& index);

}  // namespace minidl
