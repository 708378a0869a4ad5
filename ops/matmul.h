#pragma once
// Matrix products on the GEMM kernel (Eigen on the CPU, cuBLAS on CUDA).
#include "core/tensor.h"

namespace minidl {

/// [M, K] @ [K, N] -> [M, N]; batched [B, M, K] @ [B, K, N] (or a 2-D side shared by the batch)
/// -> [B, M, N]. Transposed views are passed to the kernel as transposes, without copies.
Tensor matmul(const Tensor& a, const Tensor& b);

/// x @ weight^T + bias, as nn::Linear computes it; bias may be undefined.   linear(x, w, b)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace minidl
