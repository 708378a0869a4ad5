#pragma once
// GEMMs on cuBLASLt (float32, bfloat16, float16), with the bias (and a ReLU) in the epilogue, each
// shape on the algorithm that ran fastest when it first came (ops/cuda/cublaslt.cpp). Column-major,
// like cuBLAS.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace minidl::cuda {

enum class LtEpilogue { None, Bias, BiasRelu };

/// `count` products of the same shape, the i-th at a + i * stride_a, b + i * stride_b and
/// d + i * stride_d (elements): the slices of a split along k, for one. ld_a and ld_b are the
/// leading dimensions of A and B where they are slices of wider matrices (0: packed).
struct LtBatch {
  int64_t count = 1, stride_a = 0, stride_b = 0, stride_d = 0, ld_a = 0, ld_b = 0;
};

/// The element type of A, B and the bias (float32, bfloat16 or float16; accumulation is float32
/// always), for float32 whether TF32 may compute it (CUBLAS_COMPUTE_32F_FAST_TF32), and D's type:
/// dtype's, or float32 for 16-bit A and B (a master weight's gradient under autocast). Part of the
/// key of the timed choices.
struct LtTypes {
  DType dtype = DType::Float32;
  bool tf32 = false;
  DType out = DType::Float32;
};

/// D (m x n, leading dimension m) = alpha * op(A) op(B) + beta * D, then for Bias the vector
/// bias [m] added to every column, for BiasRelu that and max(., 0). A is stored as
/// (trans_a ? k x m : m x k), B as (trans_b ? n x k : k x n), packed unless `batch` gives their
/// leading dimensions. Returns false, doing nothing, where cuBLASLt has no algorithm for it; the
/// caller then composes the result from other kernels.
/// max_blocks > 0: once timed, the fastest configuration of at most that many thread blocks, where
/// one exists (a product that runs beside others and should leave them the rest of the GPU).
bool lt_matmul(int device, cudaStream_t stream, int64_t m, int64_t n, int64_t k, bool trans_a, const void* a,
               bool trans_b, const void* b, void* d, float alpha, float beta, LtEpilogue epilogue, const void* bias,
               int64_t max_blocks = 0, const LtBatch& batch = {}, const LtTypes& types = {});

/// Whether lt_matmul with these arguments (no epilogue) has been timed and runs a configuration of at
/// most max_blocks thread blocks (never in deterministic mode, which runs the heuristic's pick).
bool lt_keeps_within(int device, int64_t m, int64_t n, int64_t k, bool trans_a, const void* a, bool trans_b,
                     const void* b, const void* d, int64_t max_blocks, const LtTypes& types = {});

/// The side stream's share of a device in thread blocks, for lt_matmul's max_blocks: about a fifth
/// of its SMs (29 of 132).
int64_t side_stream_blocks(int device);

/// MINIDL_GEMM_TUNE: whether shapes are timed (not "0"), and whether each choice is printed ("verbose").
bool gemm_tuning_enabled();
bool gemm_tuning_verbose();

}  // namespace minidl::cuda
