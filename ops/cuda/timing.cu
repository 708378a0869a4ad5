#include "ops/cuda/timing.h"

#include "core/cuda/check.h"

namespace minidl::cuda {

namespace {

// %globaltimer counts nanoseconds whatever the SM clock does.
__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void busy_wait_kernel(unsigned long long nanoseconds) {
  const unsigned long long start = now_ns();
  while (now_ns() - start < nanoseconds) {
  }
}

}  // namespace

void busy_wait(cudaStream_t stream, unsigned microseconds) {
  busy_wait_kernel<<<1, 1, 0, stream>>>(1000ull * microseconds);
  CUDA_LAUNCH_CHECK(busy_wait_kernel);
}

float time_per_call_us(cudaStream_t stream, const std::function<void()>& work, int calls, int bursts,
                       unsigned queue_us) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float best = -1;
  for (int burst = 0; burst < bursts; ++burst) {
    busy_wait(stream, queue_us);
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int c = 0; c < calls; ++c) work();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    const float us = ms * 1000 / static_cast<float>(calls);
    if (best < 0 || us < best) best = us;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace minidl::cuda
