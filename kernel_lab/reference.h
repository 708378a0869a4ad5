#pragma once
// The float64 reference the kernel lab measures its rungs against (apps/bench_ops): a plain tiled
// GEMM in double on the GPU, independent of cuBLAS, and the error metric the table reports.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace minidl::kernel_lab {

/// c = a * b and c_abs = |a| * |b| in float64 (a: m x k, b: k x n float32, row-major, device memory).
/// c_abs bounds the rounding error of a float32 product: a float32 GEMM that accumulates K terms is
/// off by at most about K * 2^-24 * c_abs entrywise, and typically by sqrt(K) * 2^-24 * c_abs.
void reference_matmul_f64(const float* a, const float* b, double* c, double* c_abs, int m, int n, int k,
                          cudaStream_t stream);

/// max over all `count` entries of |c - ref| / ref_abs (a NaN or infinite c counts as +infinity),
/// the "max rel err" column of apps/bench_ops. Waits for `stream`.
double max_relative_error(const float* c, const double* ref, const double* ref_abs, int64_t count,
                          cudaStream_t stream);

}  // namespace minidl::kernel_lab
