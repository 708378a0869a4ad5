// The device code of the diagnostics: a kernel small enough that its failure can only mean the GPU,
// the driver or the compiled architectures are wrong, and the architecture lists nvcc was given.
#include "core/cuda/diagnostics.h"

namespace minidl::diagnostics::detail {

namespace {

__global__ void probe_kernel(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 2.0f * x[i] + 1.0f;
}

}  // namespace

std::string architectures_spec() {
#ifdef MINIDL_CUDA_ARCHITECTURES
  return MINIDL_CUDA_ARCHITECTURES;
#else
  return "";
#endif
}

std::vector<int> nvcc_architectures() {
#ifdef __CUDA_ARCH_LIST__
  return {__CUDA_ARCH_LIST__};
#else
  return {};
#endif
}

cudaError_t launch_probe_kernel(const float* x, float* y, int n) {
  probe_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t probe_kernel_attributes(cudaFuncAttributes* attributes) {
  return cudaFuncGetAttributes(attributes, probe_kernel);
}

}  // namespace minidl::diagnostics::detail
