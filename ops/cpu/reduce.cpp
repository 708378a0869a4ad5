#include <limits>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

void CpuKernels::reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out,
                        Tensor* argmax) {
  dispatch_all(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    // Accumulate float32 sums in double: a sum over 60,000 elements keeps its digits.
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const T* in = x.data<T>();
    T* o = out.data<T>();
    int64_t* idx = argmax ? argmax->data<int64_t>() : nullptr;
#pragma omp parallel for collapse(2) if (outer * n * inner > 32768)
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t c = 0; c < inner; ++c) {
        const T* p = in + a * n * inner + c;
        if (op == ReduceOp::Sum) {
          Acc s = 0;
          for (int64_t i = 0; i < n; ++i) s += p[i * inner];
          o[a * inner + c] = static_cast<T>(s);
        } else {
          T best = p[0];
          int64_t best_i = 0;
          for (int64_t i = 1; i < n; ++i) {
            // NaN wins, as in PyTorch: a NaN in the input must show in the output.
            if (p[i * inner] > best || (p[i * inner] != p[i * inner] && best == best)) {
              best = p[i * inner];
              best_i = i;
            }
          }
          o[a * inner + c] = best;
          if (idx) idx[a * inner + c] = best_i;
        }
      }
    }
  });
}

}  // namespace minidl
