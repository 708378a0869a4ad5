#pragma once
// Per-device CUDA state shared by the allocator and the kernels: one compute stream per device (all
// kernels, cuBLAS and cuDNN calls of that device run on it, in order), one copy stream for pinned
// host-to-device transfers, and lazily created library handles bound to the compute stream.
// Nothing here is created before its first use: loading minidl never touches the driver.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <shared_mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/tensor.h"

namespace minidl::cuda {

/// Throws a clear error when CUDA is unusable (why, and what to do) or `index` names no device.
void check_device(int index);

/// Makes `index` this thread's current device for its lifetime, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// The stream every kernel of device `index` runs on. Created on first use, never destroyed.
cudaStream_t compute_stream(int index);
/// The streaming multiprocessors of device `index`, asked of the runtime once per process (launch
/// sizes that fill one wave ask at every launch).
int multiprocessor_count(int index);
/// The stream host-to-device batch transfers run on (core/cuda/transfer.cpp).
cudaStream_t copy_stream(int index);
/// A second stream for kernels that may overlap the compute stream's (two independent GEMMs of a
/// backward): work forks onto it with stream_wait(side, compute) and joins back with
/// stream_wait(compute, side) before anything reads its results. Graph capture follows the fork
/// and join as graph edges, so the captured branches run in parallel on every replay.
cudaStream_t side_stream(int index);
/// Makes `waiter` wait for everything queued on `producer` so far (one of the device's two events,
/// recorded and waited on at once). Both streams belong to device `index`.
void stream_wait(int index, cudaStream_t waiter, cudaStream_t producer);
/// Instead of stream_wait(compute, side) at the end of an op: the compute stream waits for the side
/// stream's work so far only when something needs it (core/cuda/side_stream.cpp says where). `reads`
/// are kept alive until then; `writes` are the storage addresses of the tensors the work writes.
void join_side_stream_later(int index, std::vector<Tensor> reads, const std::vector<const void*>& writes);
/// True when `ptr`, a block's start, is written by side work not joined yet (the allocator joins
/// before such a block can be reused).
bool side_stream_writes(int index, const void* ptr);
/// Where side work that joins later starts: join_side_stream_if_holding_much, then the side stream
/// waits for what `compute` has queued so far. Returns the side stream.
cudaStream_t fork_side_stream(int index, cudaStream_t compute);
/// Makes the compute stream of `index` wait for its side stream's unjoined work; no-op when none.
void join_side_stream(int index);
/// join_side_stream where the unjoined work holds more than kMaxUnjoinedReadBytes of reads alive:
/// called before new side work is queued, so that a backward without other joins does not keep
/// every layer's inputs and gradients to its end.
void join_side_stream_if_holding_much(int index);
/// Keeps other threads' work off the compute stream while a graph captures it (core/cuda/graph.cu):
/// in relaxed capture mode, what another thread queued there would land in the graph. The
/// capturing thread holds it exclusively; to_device_pinned holds it shared.
std::shared_mutex& capture_mutex(int index);
/// True on the thread that is capturing a graph now (it must not wait for its own lock).
bool this_thread_captures();
void set_this_thread_captures(bool on);

/// cuBLAS handle of device `index`, bound to its compute stream, strict float32 math (no TF32).
cublasHandle_t cublas_handle(int index);

/// Errors that kernels find in their data (a class target or a gather index out of range), by the
/// op that found them. A kernel cannot throw and the host must not wait for it, so it skips the bad
/// element and reports it here; the next synchronization of the device (copy_bytes, synchronize,
/// item) reads the report and throws an Error naming the op, the element and the range, as
/// PyTorch's device-side asserts do.
enum DeviceError : int {
  kNoDeviceError = 0,
  kCrossEntropyTarget = 1,  // cross_entropy (forward or backward): a class target out of range
  kNllLossTarget = 2,       // nll_loss (forward or backward)
  kIndexSelectIndex = 3,    // index_select: an index out of range
  kIndexAddIndex = 4,       // index_add (index_select's backward)
};
/// Where kernels report: the first reporter claims it (an atomic on `claim`, device memory), writes
/// the bad element's position, value and the exclusive upper bound it broke into `detail`, then the
/// op's code into `code` (both pinned, mapped host memory: the host reads them without a copy).
struct DeviceErrorReport {
  int* code = nullptr;
  long long* detail = nullptr;
  unsigned* claim = nullptr;
};
/// The report of device `index`, as kernels take it.
DeviceErrorReport device_error_report(int index);
/// After a synchronization of device `index`: throws if a kernel reported an error, and clears it.
void check_device_errors(int index);

}  // namespace minidl::cuda
