// cuda::ElementwiseKernel in a build without CUDA: constructing one still parses and checks it
// (ops/elementwise_kernel.cpp); running or compiling it explains that it needs the CUDA build.
#ifndef MINIDL_WITH_CUDA
#include "core/cuda.h"
#include "ops/elementwise_kernel_impl.h"

namespace minidl::cuda {

std::vector<Tensor> ElementwiseKernel::call(const std::vector<Tensor>&) const {
  MINIDL_FAIL(impl_->what, ": run-time CUDA kernels need the CUDA build of minidl: ", unavailable_reason());
}

void ElementwiseKernel::compile(Device device) const {
  MINIDL_FAIL(impl_->what, ": cannot compile for ", device, ": run-time CUDA kernels need the CUDA build of minidl: ",
              unavailable_reason());
}

KernelCacheStats kernel_cache_stats() { return {}; }
void clear_kernel_memory_cache() {}
std::string kernel_cache_dir() { return ""; }

}  // namespace minidl::cuda
#endif
