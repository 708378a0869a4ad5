#include <random>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/random.h"

namespace minidl {

void CpuKernels::dropout(const Tensor& x, double keep_prob, Tensor& out, Tensor& mask) {
  bool* m = mask.data<bool>();
  cpu::for_each_random(
      mask.numel(), [keep_prob] { return std::bernoulli_distribution(keep_prob); },
      [m](int64_t i, bool keep) { m[i] = keep; });
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    const T scale = static_cast<T>(1.0 / keep_prob);
    const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) dst[i] = m[i] ? src[i] * scale : T(0);
  });
}

void CpuKernels::dropout_backward(const Tensor& grad_out, const Tensor& mask, double keep_prob, Tensor& grad_in) {
  const bool* m = mask.data<bool>();
  dispatch_floating(grad_out.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = grad_out.data<T>();
    T* d = grad_in.data<T>();
    const T scale = static_cast<T>(1.0 / keep_prob);
    const int64_t n = grad_out.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) d[i] = m[i] ? g[i] * scale : T(0);
  });
}

}  // namespace minidl
