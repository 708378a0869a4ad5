#pragma once
// Copies between layouts, dtypes and devices; Tensor::to / contiguous / clone are defined here.
#include "core/tensor.h"

namespace minidl {

/// Writes `src` into `dst` in place: src broadcast to dst's shape, converted to its dtype and moved
/// to its device; dst may be any view (strided). Not recorded on the tape: for loading weights and
/// optimizer state. Bumps dst's version counter.   copy_(param, loaded);  x.select(1, 0).copy_(y)
Tensor& copy_(Tensor& dst, const Tensor& src);

/// x in `dtype` on `device`: x itself when both match, else a copy (differentiable; a conversion
/// to an integral dtype ends the graph). Tensor::to forwards here.   to(x, Device::cuda(), kFloat64)
Tensor to(const Tensor& x, Device device, DType dtype);
/// x itself when contiguous, else a contiguous copy.
Tensor contiguous(const Tensor& x);
/// x itself when laid out as `format`, else a copy that is (differentiable), as PyTorch's
/// x.contiguous(memory_format=...).   contiguous(x, MemoryFormat::ChannelsLast)
Tensor contiguous(const Tensor& x, MemoryFormat format);
/// A copy with its own memory, in the graph (its gradient passes through).
Tensor clone(const Tensor& x);

/// The slices of `src` along `dim` picked by the 1-D int64 `index` (repeats allowed), as
/// torch.index_select; the gradient adds back into the picked slices, accumulating over repeats.
///   Tensor cols = index_select(x, 1, Tensor::from_vector<int64_t>({2, 0, 2}));
Tensor index_select(const Tensor& src, int64_t dim, const Tensor& index);
/// index_select along dim 0: the batch gather of a data loader.   Tensor batch = index_select(images, index);
Tensor index_select(const Tensor& src, const Tensor& index);

}  // namespace minidl
