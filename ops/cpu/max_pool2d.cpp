// Max pooling on the CPU. Planes (image, channel) are independent, so OpenMP splits them across
// threads; the backward writes only into its own plane, so overlapping windows need no atomics.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

template <class T>
void pool_plane(const T* src, T* dst, int64_t* idx, const ConvGeometry& g) {
  const int64_t H = g.height, W = g.width;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const int64_t h0 = oh * g.stride_h - g.pad_h;
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const int64_t w0 = ow * g.stride_w - g.pad_w;
      // Padding is -infinity: skipping it is the same. The index starts at the window's first real
      // element, so a window of -inf values still points inside the image.
      T best = -std::numeric_limits<T>::infinity();
      int64_t best_i = -1;
      for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
        const int64_t ih = h0 + ki * g.dilation_h;
        if (ih < 0 || ih >= H) continue;
        for (int64_t kj = 0; kj < g.kernel_w; ++kj) {
          const int64_t iw = w0 + kj * g.dilation_w;
          if (iw < 0 || iw >= W) continue;
          const T v = src[ih * W + iw];
          // The first maximum wins; a NaN wins over numbers, as in PyTorch, so it shows in the output.
          if (best_i < 0 || v > best || std::isnan(v)) {
            best = v;
            best_i = ih * W + iw;
          }
        }
      }
      dst[oh * g.out_w + ow] = best;
      idx[oh * g.out_w + ow] = best_i;
    }
  }
}

}  // namespace

void CpuKernels::max_pool2d(const Tensor& x, const ConvGeometry& g, Tensor& out, Tensor& indices) {
  if (is_reduced_floating(x.dtype())) {  // computed in float32 (ops/widen_16bit.h)
    Widened w(*this);
    Tensor out32 = w.output(out);
    max_pool2d(w.input(x), g, out32, indices);
    return w.finish();
  }
  const int64_t planes = x.size(0) * g.channels;
  const int64_t plane_in = g.height * g.width, plane_out = g.out_h * g.out_w;
  dispatch_floating(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    int64_t* idx = indices.data<int64_t>();
#pragma omp parallel for schedule(static) if (planes > 1 && x.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) pool_plane(in + p * plane_in, o + p * plane_out, idx + p * plane_out, g);
  });
}

void CpuKernels::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const ConvGeometry& g,
                                     Tensor& grad_in) {
  if (is_reduced_floating(grad_out.dtype())) {  // computed in float32 (ops/widen_16bit.h)
    Widened w(*this);
    Tensor grad32 = w.output(grad_in);
    max_pool2d_backward(w.input(grad_out), indices, g, grad32);
    return w.finish();
  }
  const int64_t planes = grad_in.size(0) * g.channels;
  const int64_t plane_in = g.height * g.width, plane_out = g.out_h * g.out_w;
  dispatch_floating(grad_out.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* go = grad_out.data<T>();
    const int64_t* idx = indices.data<int64_t>();
    T* gi = grad_in.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && grad_in.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      T* d = gi + p * plane_in;
      std::fill(d, d + plane_in, T(0));
      const T* s = go + p * plane_out;
      const int64_t* ix = idx + p * plane_out;
      for (int64_t j = 0; j < plane_out; ++j)
        if (ix[j] >= 0) d[ix[j]] += s[j];  // -1: a dilated window of padding only
    }
  });
}

}  // namespace minidl
