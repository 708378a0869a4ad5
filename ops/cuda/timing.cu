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

}  // namespace minidl::cuda
