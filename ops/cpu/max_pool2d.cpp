// Placeholder until this op is written; replaced by its CPU kernels.
#include "ops/cpu/cpu_kernels.h"

namespace minidl {

#define MINIDL_TODO(name) MINIDL_FAIL(name, ": not implemented on the CPU yet")

void CpuKernels::max_pool2d(const Tensor&, const ConvGeometry&, Tensor&, Tensor&) { MINIDL_TODO("max_pool2d"); }
void CpuKernels::max_pool2d_backward(const Tensor&, const Tensor&, const ConvGeometry&, Tensor&) { MINIDL_TODO("max_pool2d"); }

}  // namespace minidl
