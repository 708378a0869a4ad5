// Placeholder until this op is written; replaced by its CPU kernels.
#include "ops/cpu/cpu_kernels.h"

namespace minidl {

#define MINIDL_TODO(name) MINIDL_FAIL(name, ": not implemented on the CPU yet")

void CpuKernels::nll_loss(const Tensor&, const Tensor&, Tensor&) { MINIDL_TODO("nll_loss"); }
void CpuKernels::nll_loss_backward(const Tensor&, const Tensor&, Tensor&) { MINIDL_TODO("nll_loss"); }
void CpuKernels::cross_entropy(const Tensor&, const Tensor&, Tensor&, Tensor&) { MINIDL_TODO("cross_entropy"); }
void CpuKernels::cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, Tensor&) { MINIDL_TODO("cross_entropy"); }

}  // namespace minidl
