#pragma once
// Copies between layouts, dtypes and devices; Tensor::to / contiguous / clone are defined here.
#include "core/tensor.h"

namespace minidl {

/// Writes `src` into `dst` in place (same shape; dtype and device may differ). Not recorded on the
/// tape: for loading weights and optimizer state.   copy_(param, loaded);
void copy_(Tensor& dst, const Tensor& src);

/// Rows of `src` picked by int64 `index` along dim 0: the batch gather of a data loader.
///   Tensor batch = index_select(images, index);
Tensor index_select(const Tensor& src, const Tensor& index);

}  // namespace minidl
