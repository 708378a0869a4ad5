// Per-device streams and cuBLAS handles. They are created on first use and deliberately never
// destroyed: tensors held in statics may free memory after the CUDA runtime has begun to unload, and
// destroying handles then fails. The process exit releases everything.
#include "core/cuda/context.h"

#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda.h"

namespace minidl::cuda {

namespace {

struct DeviceContext {
  std::once_flag streams_once, cublas_once;
  std::shared_mutex capture;
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t to_side = nullptr, to_compute = nullptr;  // fork and join events
  cublasHandle_t cublas = nullptr;
  // The kernels' error report (context.h): code and detail pinned and mapped, host pointers here
  // and their device aliases in `report`; the claim in device memory.
  int* error_code_host = nullptr;
  long long* error_detail_host = nullptr;
  DeviceErrorReport report;
};

DeviceContext& context(int index) {
  check_device(index);
  static auto* contexts = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceContext>>();
    for (int d = 0; d < device_count(); ++d) v->push_back(std::make_unique<DeviceContext>());
    return v;
  }();
  DeviceContext& ctx = *(*contexts)[static_cast<size_t>(index)];
  std::call_once(ctx.streams_once, [&] {
    DeviceGuard guard(index);
    // Non-blocking: the legacy default stream (used by plain cudaMemcpy elsewhere) does not
    // serialize with ours, so every ordering between our streams is an explicit event.
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.copy, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.side, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&ctx.to_side, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&ctx.to_compute, cudaEventDisableTiming));
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&ctx.error_code_host), sizeof(int), cudaHostAllocMapped));
    *ctx.error_code_host = kNoDeviceError;
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ctx.report.code), ctx.error_code_host, 0));
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&ctx.error_detail_host), 3 * sizeof(long long),
                             cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ctx.report.detail), ctx.error_detail_host, 0));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ctx.report.claim), sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(ctx.report.claim, 0, sizeof(unsigned)));
  });
  return ctx;
}

}  // namespace

DeviceGuard::DeviceGuard(int index) {
  CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) {
    CUDA_CHECK(cudaSetDevice(index));
  } else {
    previous_ = -1;  // nothing to restore
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // a destructor must not throw; this cannot fail after the set above
}

cudaStream_t compute_stream(int index) { return context(index).compute; }
cudaStream_t copy_stream(int index) { return context(index).copy; }
cudaStream_t side_stream(int index) { return context(index).side; }

int multiprocessor_count(int index) {
  static const std::vector<int> counts = [] {
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    std::vector<int> per_device(static_cast<size_t>(devices));
    for (int d = 0; d < devices; ++d)
      CUDA_CHECK(cudaDeviceGetAttribute(&per_device[static_cast<size_t>(d)], cudaDevAttrMultiProcessorCount, d));
    return per_device;
  }();
  return counts.at(static_cast<size_t>(index));
}

void stream_wait(int index, cudaStream_t waiter, cudaStream_t producer) {
  DeviceContext& ctx = context(index);
  // A wait takes the event's latest record, so one event per direction serves every fork and join.
  cudaEvent_t event = producer == ctx.side ? ctx.to_compute : ctx.to_side;
  CUDA_CHECK(cudaEventRecord(event, producer));
  CUDA_CHECK(cudaStreamWaitEvent(waiter, event, 0));
}

std::shared_mutex& capture_mutex(int index) { return context(index).capture; }

namespace {
thread_local bool capturing = false;
}  // namespace

bool this_thread_captures() { return capturing; }
void set_this_thread_captures(bool on) { capturing = on; }

cublasHandle_t cublas_handle(int index) {
  DeviceContext& ctx = context(index);
  std::call_once(ctx.cublas_once, [&] {
    DeviceGuard guard(index);
    CUBLAS_CHECK(cublasCreate(&ctx.cublas));
    CUBLAS_CHECK(cublasSetStream(ctx.cublas, ctx.compute));
    // Strict float32: the default math mode never uses TF32 tensor cores for float GEMMs (TF32 needs
    // CUBLAS_TF32_TENSOR_OP_MATH), so results match the CPU within float32 rounding.
    CUBLAS_CHECK(cublasSetMathMode(ctx.cublas, CUBLAS_DEFAULT_MATH));
  });
  return ctx.cublas;
}

DeviceErrorReport device_error_report(int index) { return context(index).report; }

void check_device_errors(int index) {
  DeviceContext& ctx = context(index);
  volatile int* code_flag = ctx.error_code_host;
  const int code = *code_flag;
  if (code == kNoDeviceError) return;
  volatile long long* detail = ctx.error_detail_host;
  const long long position = detail[0], value = detail[1], limit = detail[2];
  *code_flag = kNoDeviceError;
  {
    // On the compute stream, where the reporting kernels run: the next one sees the claim free.
    DeviceGuard guard(index);
    CUDA_CHECK(cudaMemsetAsync(ctx.report.claim, 0, sizeof(unsigned), ctx.compute));
  }
  const char* when = "; found by the kernel and reported at the next synchronization of the device";
  switch (code) {
    case kCrossEntropyTarget:
    case kNllLossTarget:
      MINIDL_FAIL(code == kCrossEntropyTarget ? "cross_entropy" : "nll_loss", " on cuda:", index, ": target ", value,
                  " of sample ", position, " is out of range (expected 0 <= target < ", limit,
                  " classes, or ignore_index); the loss counted that sample as 0", when);
    case kIndexSelectIndex:
      MINIDL_FAIL("index_select on cuda:", index, ": index ", value, " at position ", position,
                  " is out of range (expected 0 <= index < ", limit, "); its slice was filled with zeros", when);
    case kIndexAddIndex:
      MINIDL_FAIL("index_add (the backward of index_select) on cuda:", index, ": index ", value, " at position ",
                  position, " is out of range (expected 0 <= index < ", limit, "); its slice was skipped", when);
    default:
      MINIDL_FAIL("a kernel on cuda:", index, " reported error code ", code, when);
  }
}

}  // namespace minidl::cuda
