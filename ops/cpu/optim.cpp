// Placeholder until this op is written; replaced by its CPU kernels.
#include "ops/cpu/cpu_kernels.h"

namespace minidl {

#define MINIDL_TODO(name) MINIDL_FAIL(name, ": not implemented on the CPU yet")

void CpuKernels::sgd_step(Tensor&, const Tensor&, Tensor*, const SgdConfig&) { MINIDL_TODO("sgd_step"); }
void CpuKernels::adam_step(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamConfig&) { MINIDL_TODO("adam_step"); }

}  // namespace minidl
