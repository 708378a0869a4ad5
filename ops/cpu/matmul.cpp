// Placeholder until this op is written; replaced by its CPU kernels.
#include "ops/cpu/cpu_kernels.h"

namespace minidl {

#define MINIDL_TODO(name) MINIDL_FAIL(name, ": not implemented on the CPU yet")

void CpuKernels::gemm(const Tensor&, bool, const Tensor&, bool, Tensor&, double, double) { MINIDL_TODO("gemm"); }

}  // namespace minidl
