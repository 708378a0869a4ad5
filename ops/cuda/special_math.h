#pragma once
// The special functions of UnaryOp on CUDA (ops/cuda/special_math.cu).
#include <cuda_runtime.h>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace minidl::cuda {

/// The ops special_unary runs instead of the elementwise kernel.
inline bool is_special_unary(UnaryOp op) {
  switch (op) {
    case UnaryOp::Erfc:
    case UnaryOp::Erfinv:
    case UnaryOp::Lgamma:
    case UnaryOp::Digamma:
    case UnaryOp::Polygamma:
    case UnaryOp::Ndtri:
    case UnaryOp::I0:
    case UnaryOp::I0e:
    case UnaryOp::I1:
    case UnaryOp::I1e: return true;
    default: return false;
  }
}

/// out = op(x) for contiguous floating x and out of one dtype (16-bit computes in float32).
void special_unary(UnaryOp op, const Tensor& x, Tensor& out, double scalar, cudaStream_t stream);

}  // namespace minidl::cuda
