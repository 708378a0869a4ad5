// The per-device counters of reductions finished by their last block (ops/cuda/common.cuh).
#include <map>
#include <mutex>

#include "ops/cuda/common.cuh"

namespace minidl::cuda {

unsigned* block_counters(int device, cudaStream_t stream) {
  static std::mutex mutex;
  static auto* counters = new std::map<int, unsigned*>();  // never freed: kernels may use them until exit
  std::lock_guard lock(mutex);
  unsigned*& c = (*counters)[device];
  if (!c) {
    CUDA_CHECK(cudaMalloc(&c, kReservedCounterEnd * sizeof(unsigned)));
    CUDA_CHECK(cudaMemsetAsync(c, 0, kReservedCounterEnd * sizeof(unsigned), stream));
  }
  return c;
}

}  // namespace minidl::cuda
