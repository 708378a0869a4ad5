#include "ops/kernels.h"

namespace minidl {

Kernels& cpu_kernels();  // ops/cpu/cpu_kernels.cpp
#ifdef MINIDL_WITH_CUDA
Kernels& cuda_kernels(int device_index);  // ops/cuda/cuda_kernels.cpp
#endif

Kernels& kernels_for(Device device) {
  if (device.is_cpu()) return cpu_kernels();
#ifdef MINIDL_WITH_CUDA
  return cuda_kernels(device.index);
#else
  MINIDL_FAIL("no kernels for ", device, ": minidl was built without CUDA; rebuild with -DMINIDL_CUDA=ON where the "
              "CUDA toolkit is installed, or use Device::cpu()");
#endif
}

void check_same_device(const char* op, std::initializer_list<Tensor> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!first) {
      first = &t;
      continue;
    }
    MINIDL_CHECK(t.device() == first->device(), op, ": expected all tensors on one device, but found tensors on ",
                 first->device(), " and ", t.device(), "; move them with .to(device)");
  }
}

}  // namespace minidl
