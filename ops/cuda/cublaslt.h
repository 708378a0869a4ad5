#pragma once
// Float32 GEMMs on cuBLASLt, with the bias (and a ReLU) in the epilogue, each shape on the algorithm
// that ran fastest when it first came (ops/cuda/cublaslt.cpp). Column-major, like cuBLAS.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace minidl::cuda {

enum class LtEpilogue { None, Bias, BiasRelu };

/// D (m x n, leading dimension m) = alpha * op(A) op(B) + beta * D, then for Bias the vector
/// bias [m] added to every column, for BiasRelu that and max(., 0). A is stored packed as
/// (trans_a ? k x m : m x k), B as (trans_b ? n x k : k x n). Returns false, doing nothing, where
/// cuBLASLt has no algorithm for it; the caller then composes the result from other kernels.
bool lt_matmul(int device, cudaStream_t stream, int64_t m, int64_t n, int64_t k, bool trans_a, const float* a,
               bool trans_b, const float* b, float* d, float alpha, float beta, LtEpilogue epilogue,
               const float* bias);

/// MINIDL_GEMM_TUNE: whether shapes are timed (not "0"), and whether each choice is printed ("verbose").
bool gemm_tuning_enabled();
bool gemm_tuning_verbose();

}  // namespace minidl::cuda
