// Moving bytes between the host and devices. copy_bytes is synchronous by contract (it is the
// visible sync behind item(), to_vector() and to(cpu)); to_device_pinned is the asynchronous path a
// data loader takes, through pinned staging buffers on the copy stream.
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/cuda.h"
#include "core/cuda/context.h"

namespace minidl {

// Called by copy_bytes (core/allocator.cpp) whenever a CUDA device is involved.
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    // Between GPUs: the source's queued kernels must finish before its bytes are read.
    cuda::check_device(src_device.index);
    {
      cuda::DeviceGuard guard(src_device.index);
      cuda::join_side_stream(src_device.index);
      CUDA_CHECK(cudaStreamSynchronize(cuda::compute_stream(src_device.index)));
      cuda::check_device_errors(src_device.index);
    }
    cuda::DeviceGuard guard(dst_device.index);
    cudaStream_t stream = cuda::compute_stream(dst_device.index);
    CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    cuda::check_device_errors(dst_device.index);
    return;
  }
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  cuda::check_device(device);
  cuda::DeviceGuard guard(device);
  cudaStream_t stream = cuda::compute_stream(device);
  // On the compute stream, so the copy sees every kernel queued before it, side-stream work included
  // (cudaMemcpyDefault: the unified address space tells host from device pointers).
  cuda::join_side_stream(device);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cuda::check_device_errors(device);
}

namespace cuda {

namespace {

// A few pinned host buffers per device, used round-robin. A buffer is refilled only after the copy
// that last read it has finished (its `done` event), which with four of them is almost never a wait.
class PinnedStage {
 public:
  static constexpr int kSlots = 4;

  explicit PinnedStage(int device) : device_(device) {
    DeviceGuard guard(device);
    for (Slot& s : slots_) {
      CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming));
    }
  }

  void copy_to_device(void* dst, const void* src, size_t nbytes) {
    // The events below go on the compute stream: wait out another thread's graph capture.
    std::shared_lock<std::shared_mutex> no_capture;
    if (!this_thread_captures()) no_capture = std::shared_lock(capture_mutex(device_));
    std::lock_guard lock(mutex_);
    DeviceGuard guard(device_);
    Slot& s = slots_[next_++ % kSlots];
    if (s.used) CUDA_CHECK(cudaEventSynchronize(s.done));
    if (s.capacity < nbytes) {
      if (s.buffer) CUDA_CHECK(cudaFreeHost(s.buffer));
      s.buffer = nullptr;
      s.capacity = (nbytes + (1 << 20) - 1) / (1 << 20) * (1 << 20);
      CUDA_CHECK(cudaHostAlloc(&s.buffer, s.capacity, cudaHostAllocDefault));
    }
    std::memcpy(s.buffer, src, nbytes);
    cudaStream_t compute = compute_stream(device_), copy = copy_stream(device_);
    // The destination block may have been freed by tensors that kernels queued on the compute
    // stream still read (the caching allocator reuses blocks in compute-stream order): the copy
    // waits for the compute stream as it is now.
    CUDA_CHECK(cudaEventRecord(s.ready, compute));
    CUDA_CHECK(cudaStreamWaitEvent(copy, s.ready, 0));
    CUDA_CHECK(cudaMemcpyAsync(dst, s.buffer, nbytes, cudaMemcpyHostToDevice, copy));
    CUDA_CHECK(cudaEventRecord(s.done, copy));
    // Everything queued on the compute stream from now on sees the data.
    CUDA_CHECK(cudaStreamWaitEvent(compute, s.done, 0));
    s.used = true;
  }

 private:
  struct Slot {
    void* buffer = nullptr;
    size_t capacity = 0;
    cudaEvent_t done = nullptr, ready = nullptr;
    bool used = false;
  };
  const int device_;
  std::mutex mutex_;
  Slot slots_[kSlots];
  unsigned next_ = 0;
};

PinnedStage& stage(int device) {
  check_device(device);
  static auto* stages = new std::vector<std::unique_ptr<PinnedStage>>(static_cast<size_t>(device_count()));
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  auto& s = (*stages)[static_cast<size_t>(device)];
  if (!s) s = std::make_unique<PinnedStage>(device);
  return *s;
}

}  // namespace

Tensor to_device_pinned(const Tensor& host, Device device) {
  MINIDL_CHECK(host.device().is_cpu(), "to_device_pinned: expected a CPU tensor, got one on ", host.device());
  MINIDL_CHECK(device.is_cuda(), "to_device_pinned: expected a CUDA device, got ", device);
  Tensor src = host.is_contiguous() ? host : host.contiguous();
  Tensor out = Tensor::empty(src.shape(), src.dtype(), device);
  if (out.nbytes() > 0) stage(device.index).copy_to_device(out.raw_data(), src.raw_data(), out.nbytes());
  return out;
}

}  // namespace cuda

}  // namespace minidl
