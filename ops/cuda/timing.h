#pragma once
// Timing device work without the host in the measurement (ops/cuda/cublaslt.cpp times GEMM
// algorithms this way).
#include <cuda_runtime_api.h>

namespace minidl::cuda {

/// Queues a kernel that keeps the GPU busy for about `microseconds`. Work queued behind it while it
/// runs starts back to back, so events around that work time the GPU, not the host's launches
/// (a small GEMM runs faster than cuBLASLt can be called).
void busy_wait(cudaStream_t stream, unsigned microseconds);

}  // namespace minidl::cuda
