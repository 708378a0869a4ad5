#include "ops/cuda/cuda_kernels.h"

#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda.h"

namespace minidl {

CudaKernels::CudaKernels(int device) : device_(device), stream_(cuda::compute_stream(device)) {}

// Called by kernels_for (ops/dispatch.cpp). Made per device on first use; never destroyed.
Kernels& cuda_kernels(int device_index) {
  cuda::check_device(device_index);
  static auto* all = new std::vector<std::unique_ptr<CudaKernels>>(static_cast<size_t>(cuda::device_count()));
  static auto* onces = new std::vector<std::once_flag>(static_cast<size_t>(cuda::device_count()));
  auto& slot = (*all)[static_cast<size_t>(device_index)];
  std::call_once((*onces)[static_cast<size_t>(device_index)],
                 [&] { slot = std::make_unique<CudaKernels>(device_index); });
  return *slot;
}

}  // namespace minidl
