#include "ops/cuda/timing.h"

#include <mutex>
#include <shared_mutex>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/graph_memsets.h"

namespace minidl::cuda {

namespace {

// %globaltimer counts nanoseconds whatever the SM clock does.
__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void hold_kernel(const volatile uint64_t* released, uint64_t ticket, unsigned long long timeout_ns) {
  const unsigned long long start = now_ns();
  while (*released < ticket && now_ns() - start < timeout_ns) {
  }
}

// A flag per thread, so that threads timing on their own devices never release each other's holds.
// Holds count up: a release lets go of its own hold and of any older one still waiting.
struct HoldFlag {
  volatile uint64_t* flag = nullptr;
  uint64_t tickets = 0;
  HoldFlag() {
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable));
    flag = static_cast<volatile uint64_t*>(p);
    *flag = 0;
  }
  ~HoldFlag() { cudaFreeHost(const_cast<uint64_t*>(flag)); }
};

// Far longer than any timed burst takes to queue (the slowest seen, a cuDNN path, about 1.5 ms).
constexpr unsigned long long kHoldTimeoutNs = 100'000'000ull;

}  // namespace

StreamHold::StreamHold(cudaStream_t stream) {
  thread_local HoldFlag hold_flag;
  released_ = hold_flag.flag;
  ticket_ = ++hold_flag.tickets;
  hold_kernel<<<1, 1, 0, stream>>>(released_, ticket_, kHoldTimeoutNs);
  CUDA_LAUNCH_CHECK(hold_kernel);
}

void StreamHold::release() {
  if (!held_) return;
  held_ = false;
  if (*released_ < ticket_) *released_ = ticket_;  // never lowers the flag under a newer hold
}

float time_per_call_us(cudaStream_t stream, const std::function<void()>& work, int calls, int bursts) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float best = -1;
  for (int burst = 0; burst < bursts; ++burst) {
    {
      StreamHold hold(stream);
      CUDA_CHECK(cudaEventRecord(start, stream));
      for (int c = 0; c < calls; ++c) work();
      CUDA_CHECK(cudaEventRecord(stop, stream));
    }
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

float time_per_replay_us(cudaStream_t stream, const std::function<void()>& work, int calls, int replays) {
  // As cuda::Graph::capture_begin: other threads keep their work off the device's streams while
  // this one captures. A data loader's upload queued meanwhile would land in the timing graph,
  // never reach its batch, and leave its staging events recorded inside a capture.
  int device = 0;
  CUDA_CHECK(cudaStreamGetDevice(stream, &device));
  std::unique_lock<std::shared_mutex> others_off_stream;
  if (!this_thread_captures()) others_off_stream = std::unique_lock(capture_mutex(device));
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  try {
    for (int c = 0; c < calls; ++c) work();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);  // leave the stream usable
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  try {
    memset_nodes_to_kernels(graph);  // as cuda::Graph does: the replay is then the step's
  } catch (...) {
    cudaGraphDestroy(graph);
    throw;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(instantiated);
  float us = -1;
  try {
    CUDA_CHECK(cudaGraphUpload(exec, stream));
    us = time_per_call_us(stream, [&] { CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, 1, replays) /
         static_cast<float>(calls);
  } catch (...) {
    cudaGraphExecDestroy(exec);
    throw;
  }
  cudaGraphExecDestroy(exec);
  return us;
}

}  // namespace minidl::cuda
