#pragma once
// Float32 GEMM on oneDNN's JIT kernels (ops/cpu/onednn_gemm.cpp), where minidl was built with oneDNN.
// Internal to ops/cpu/.
#include <cstdint>

namespace minidl {

/// Row-major C [m, n] = alpha * op(A) op(B) + beta * C, op(X) = X^T where trans_x; lda, ldb and ldc
/// are the row strides. Returns false, doing nothing, in a build without oneDNN.
bool onednn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace minidl
