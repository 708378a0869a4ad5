#include "ops/cpu/cpu_kernels.h"

namespace minidl {

Kernels& cpu_kernels() {
  static CpuKernels kernels;
  return kernels;
}

}  // namespace minidl
