// Placeholder until this op is written; replaced by its CPU kernels.
#include "ops/cpu/cpu_kernels.h"

namespace minidl {

#define MINIDL_TODO(name) MINIDL_FAIL(name, ": not implemented on the CPU yet")

void CpuKernels::im2col(const Tensor&, const ConvGeometry&, Tensor&) { MINIDL_TODO("im2col"); }
void CpuKernels::col2im(const Tensor&, const ConvGeometry&, Tensor&) { MINIDL_TODO("col2im"); }

}  // namespace minidl
