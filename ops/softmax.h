#pragma once
#include "core/tensor.h"

namespace minidl {

/// softmax(x, 1) over the classes of [N, C] logits.
Tensor softmax(const Tensor& x, int64_t dim);
/// log(softmax(x, dim)), computed stably in one pass.
Tensor log_softmax(const Tensor& x, int64_t dim);
/// softmax and log_softmax in `dtype` (x converted first), libtorch's dtype argument: attention's
/// float16 scores normalized in float32.   softmax(scores, -1, kFloat32)
Tensor softmax(const Tensor& x, int64_t dim, DType dtype);
Tensor log_softmax(const Tensor& x, int64_t dim, DType dtype);
/// softmax(-x, dim), torch's softmin.
Tensor softmin(const Tensor& x, int64_t dim);

}  // namespace minidl
