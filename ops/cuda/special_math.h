#pragma once
// The special functions of UnaryOp on CUDA (ops/cuda/special_math.cu).
#include <cuda_runtime.h>

#include "core/tensor.h"
#include "ops/special_unary.h"

namespace minidl::cuda {

/// out = op(x) for a special function (is_special_function, ops/special_unary.h), x and out contiguous,
/// floating and of one dtype (16-bit computes in float32).
void special_unary(UnaryOp op, const Tensor& x, Tensor& out, double scalar, cudaStream_t stream);

}  // namespace minidl::cuda
