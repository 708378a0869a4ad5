// Nearest-neighbour upsampling on the CPU: the source row and column of every output position are
// computed once per call, then each plane (in parallel) is a gather (forward) or a scatter-add
// into its own plane (backward, no atomics).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

// src(o) = min(floor(o * scale), in - 1) in float, as PyTorch's nearest_neighbor_compute_source_index.
std::vector<int64_t> nearest_sources(int64_t out, int64_t in, float scale) {
  std::vector<int64_t> src(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o)
    src[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * scale)), in - 1);
  return src;
}

}  // namespace

void CpuKernels::upsample_nearest2d(const Tensor& x, float scale_h, float scale_w, Tensor& out) {
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  const int64_t planes = x.size(0) * x.size(1);
  const std::vector<int64_t> rows = nearest_sources(OH, H, scale_h), cols = nearest_sources(OW, W, scale_w);
  dispatch_floating(x.dtype(), "upsample_nearest2d", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && out.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      const T* src = in + p * H * W;
      T* dst = o + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const T* row = src + rows[oh] * W;
        for (int64_t ow = 0; ow < OW; ++ow) dst[oh * OW + ow] = row[cols[ow]];
      }
    }
  });
}

void CpuKernels::upsample_nearest2d_backward(const Tensor& grad_out, float scale_h, float scale_w, Tensor& grad_in) {
  const int64_t H = grad_in.size(2), W = grad_in.size(3), OH = grad_out.size(2), OW = grad_out.size(3);
  const int64_t planes = grad_in.size(0) * grad_in.size(1);
  const std::vector<int64_t> rows = nearest_sources(OH, H, scale_h), cols = nearest_sources(OW, W, scale_w);
  dispatch_floating(grad_out.dtype(), "upsample_nearest2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* go = grad_out.data<T>();
    T* gi = grad_in.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && grad_out.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      T* dst = gi + p * H * W;
      std::fill(dst, dst + H * W, T(0));
      const T* src = go + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        T* row = dst + rows[oh] * W;
        for (int64_t ow = 0; ow < OW; ++ow) row[cols[ow]] += src[oh * OW + ow];
      }
    }
  });
}

}  // namespace minidl
