// Placeholder until this op is written; replaced by its CPU kernels.
#include "ops/cpu/cpu_kernels.h"

namespace minidl {

#define MINIDL_TODO(name) MINIDL_FAIL(name, ": not implemented on the CPU yet")

void CpuKernels::softmax(const Tensor&, int64_t, int64_t, int64_t, bool, Tensor&) { MINIDL_TODO("softmax"); }
void CpuKernels::softmax_backward(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, bool, Tensor&) { MINIDL_TODO("softmax"); }

}  // namespace minidl
