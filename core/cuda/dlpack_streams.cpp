// Stream ordering for DLPack exchange. minidl's compute streams are non-blocking, so nothing orders
// them with another framework's streams (not even with the legacy default stream): every exchange
// of CUDA memory needs an explicit event, or a wait on the host when the memory goes back.
#include "core/cuda/dlpack_streams.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "core/cuda/context.h"

namespace minidl::cuda {

int64_t dlpack_compute_stream(int index) {
  static_assert(sizeof(cudaStream_t) <= sizeof(int64_t));
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(compute_stream(index)));
}

void dlpack_stream_wait(int index, int64_t stream) {
  cudaStream_t compute = compute_stream(index);
  cudaStream_t waiter = stream == 1   ? cudaStreamLegacy
                        : stream == 2 ? cudaStreamPerThread
                                      : reinterpret_cast<cudaStream_t>(static_cast<intptr_t>(stream));
  if (waiter == compute) return;
  // The record goes on the compute stream: wait out another thread's graph capture (as transfers do).
  std::shared_lock<std::shared_mutex> no_capture;
  if (!this_thread_captures()) no_capture = std::shared_lock(capture_mutex(index));
  DeviceGuard guard(index);  // the default streams named by 1 and 2 are the current device's
  // An event of its own: the call may come from any thread, and it is rare.
  cudaEvent_t done = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  // Destroying it at once is allowed: its resources go once the wait is satisfied.
  std::unique_ptr<CUevent_st, decltype(&cudaEventDestroy)> destroy(done, cudaEventDestroy);
  CUDA_CHECK(cudaEventRecord(done, compute));
  CUDA_CHECK(cudaStreamWaitEvent(waiter, done, 0));
}

void finish_before_release(int index) noexcept {
  // A capturing thread cannot wait (it would invalidate its capture); a graph that captured kernels
  // on this memory must not outlive it anyway, as with any memory the graph uses.
  if (this_thread_captures()) return;
  try {
    std::shared_lock no_capture(capture_mutex(index));
    const cudaError_t status = cudaStreamSynchronize(compute_stream(index));
    if (status != cudaSuccess) {
      // The release must still happen; the error stays sticky for the next checked call to report.
      std::fprintf(stderr, "minidl: waiting for cuda:%d before releasing DLPack memory failed: %s\n", index,
                   cudaGetErrorString(status));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minidl: before releasing DLPack memory on cuda:%d: %s\n", index, e.what());
  }
}

}  // namespace minidl::cuda
