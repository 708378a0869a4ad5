#pragma once
// Timing device work without the host in the measurement (ops/cuda/cublaslt.cpp times GEMM
// algorithms this way, ops/cuda/matmul.cpp the splits of k, ops/cuda/cudnn_autotune.cpp the
// convolutions' paths).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

namespace minidl::cuda {

/// Holds `stream` from construction until release() (or destruction): the work queued meanwhile
/// starts back to back once released, so events around it time the GPU however long the host took
/// to queue it. A fixed busy wait cannot promise that: cuDNN's calls take longer to queue than to
/// run, and in some processes many times longer. The GPU waits on a flag in pinned host memory that
/// release() sets, and gives up after 100 ms, so a host that never releases cannot stall it.
///   { cuda::StreamHold hold(stream); record(start); work(); record(stop); }   // then synchronize
class StreamHold {
 public:
  explicit StreamHold(cudaStream_t stream);
  ~StreamHold() { release(); }
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  void release();

 private:
  volatile uint64_t* released_;  // this thread's flag; the hold ends once it reaches ticket_
  uint64_t ticket_;
  bool held_ = true;
};

/// Microseconds of GPU time per call of `work`, which queues its kernels on `stream`: `bursts`
/// bursts of `calls` calls, each queued under a StreamHold, the best of them. Synchronizes with the
/// stream.
float time_per_call_us(cudaStream_t stream, const std::function<void()>& work, int calls = 8, int bursts = 3);

/// Microseconds per call of `work` as a captured step runs it: `calls` calls captured on `stream`
/// into one CUDA graph, its memset nodes made kernels as cuda::Graph makes them
/// (core/cuda/graph_memsets.h), the best of `replays` timed replays. A call that queues more than
/// one node (a library's memset before its kernel, say) pays there for each. Not inside a capture;
/// synchronizes with the stream.
float time_per_replay_us(cudaStream_t stream, const std::function<void()>& work, int calls = 8, int replays = 3);

}  // namespace minidl::cuda
