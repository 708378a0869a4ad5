#pragma once
// Timing device work without the host in the measurement (ops/cuda/cublaslt.cpp times GEMM
// algorithms this way, ops/cuda/matmul.cpp the splits of k).
#include <cuda_runtime_api.h>

#include <functional>

namespace minidl::cuda {

/// Queues a kernel that keeps the GPU busy for about `microseconds`. Work queued behind it while it
/// runs starts back to back, so events around that work time the GPU, not the host's launches
/// (a small GEMM runs faster than cuBLASLt can be called).
void busy_wait(cudaStream_t stream, unsigned microseconds);

/// Microseconds of GPU time per call of `work`, which queues its kernels on `stream`: `bursts`
/// bursts of `calls` calls, each queued behind a busy wait of `queue_us`, the best of them.
/// Synchronizes with the stream.
float time_per_call_us(cudaStream_t stream, const std::function<void()>& work, int calls = 8, int bursts = 3,
                       unsigned queue_us = 250);

}  // namespace minidl::cuda
