// Adaptive max pooling on the CPU. Planes (image, channel) are independent, so OpenMP splits them
// across threads.
#include <cmath>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

void CpuKernels::adaptive_max_pool2d(const Tensor& x, Tensor& out, Tensor& indices) {
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  const int64_t planes = x.size(0) * x.size(1);
  dispatch_floating(x.dtype(), "adaptive_max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    int64_t* idx = indices.data<int64_t>();
#pragma omp parallel for schedule(static) if (planes > 1 && x.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      const T* src = in + p * H * W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        // PyTorch's adaptive windows: [floor(o * in / out), ceil((o + 1) * in / out)), never empty.
        const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
          int64_t best_i = h0 * W + w0;
          T best = src[best_i];
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) {
              const T v = src[ih * W + iw];
              // The first maximum wins; a NaN wins over numbers (and stays), as in PyTorch.
              if (!std::isnan(best) && (v > best || std::isnan(v))) {
                best = v;
                best_i = ih * W + iw;
              }
            }
          o[(p * OH + oh) * OW + ow] = best;
          idx[(p * OH + oh) * OW + ow] = best_i;
        }
      }
    }
  });
}

}  // namespace minidl
