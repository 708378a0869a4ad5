// im2col / col2im on the CPU.
//
// Each (image, channel) plane is independent: im2col reads one plane and writes only that
// channel's kh*kw rows of cols; col2im reads those rows and writes only that plane. OpenMP
// therefore splits the N*C planes across threads with no atomics and no shared writes.
//
// Inside a plane, one (ki, kj) kernel offset is one row of cols, laid out [out_h, out_w]. Its
// output positions that fall on padding form a band of whole rows (top and bottom) and a band of
// columns (left and right) that is the same for every row; computing those bands once leaves an
// inner loop along output width with no bounds checks. With stride 1 that loop is a plain copy
// (im2col) or a contiguous add (col2im), which the compiler vectorizes.
#include <algorithm>
#include <cstring>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

// ceil(a / b) for b > 0 and any sign of a.
int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The output positions o in [0, out) whose input position o * stride + offset lies in [0, size).
struct Span {
  int64_t begin, end;
};
Span valid_span(int64_t offset, int64_t stride, int64_t size, int64_t out) {
  int64_t begin = std::clamp<int64_t>(ceil_div(-offset, stride), 0, out);
  int64_t end = std::clamp<int64_t>(ceil_div(size - offset, stride), begin, out);
  return {begin, end};
}

template <class T>
void im2col_plane(const T* src, T* dst, const ConvGeometry& g) {
  const int64_t H = g.height, W = g.width, out_h = g.out_h, out_w = g.out_w, L = out_h * out_w;
  for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
    const int64_t h_off = ki * g.dilation_h - g.pad_h;
    const Span hs = valid_span(h_off, g.stride_h, H, out_h);
    for (int64_t kj = 0; kj < g.kernel_w; ++kj, dst += L) {
      const int64_t w_off = kj * g.dilation_w - g.pad_w;
      const Span ws = valid_span(w_off, g.stride_w, W, out_w);
      std::fill(dst, dst + hs.begin * out_w, T(0));
      for (int64_t oh = hs.begin; oh < hs.end; ++oh) {
        T* d = dst + oh * out_w;
        const T* s = src + (oh * g.stride_h + h_off) * W;
        std::fill(d, d + ws.begin, T(0));
        if (g.stride_w == 1) {
          if (ws.end > ws.begin) std::memcpy(d + ws.begin, s + ws.begin + w_off, (ws.end - ws.begin) * sizeof(T));
        } else {
          for (int64_t ow = ws.begin; ow < ws.end; ++ow) d[ow] = s[ow * g.stride_w + w_off];
        }
        std::fill(d + ws.end, d + out_w, T(0));
      }
      std::fill(dst + hs.end * out_w, dst + L, T(0));
    }
  }
}

template <class T>
void col2im_plane(const T* src, T* dst, const ConvGeometry& g) {
  const int64_t H = g.height, W = g.width, out_h = g.out_h, out_w = g.out_w, L = out_h * out_w;
  std::fill(dst, dst + H * W, T(0));
  for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
    const int64_t h_off = ki * g.dilation_h - g.pad_h;
    const Span hs = valid_span(h_off, g.stride_h, H, out_h);
    for (int64_t kj = 0; kj < g.kernel_w; ++kj, src += L) {
      const int64_t w_off = kj * g.dilation_w - g.pad_w;
      const Span ws = valid_span(w_off, g.stride_w, W, out_w);
      for (int64_t oh = hs.begin; oh < hs.end; ++oh) {
        const T* s = src + oh * out_w;
        T* d = dst + (oh * g.stride_h + h_off) * W;
        if (g.stride_w == 1) {
          for (int64_t ow = ws.begin; ow < ws.end; ++ow) d[ow + w_off] += s[ow];
        } else {
          for (int64_t ow = ws.begin; ow < ws.end; ++ow) d[ow * g.stride_w + w_off] += s[ow];
        }
      }
    }
  }
}

}  // namespace

void CpuKernels::im2col(const Tensor& x, const ConvGeometry& g, Tensor& cols) {
  const int64_t planes = x.size(0) * g.channels;
  const int64_t plane_in = g.height * g.width;
  const int64_t plane_cols = g.kernel_h * g.kernel_w * g.out_h * g.out_w;
  dispatch_floating(x.dtype(), "im2col", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = cols.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && cols.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) im2col_plane(in + p * plane_in, out + p * plane_cols, g);
  });
}

void CpuKernels::col2im(const Tensor& cols, const ConvGeometry& g, Tensor& x_grad) {
  const int64_t planes = x_grad.size(0) * g.channels;
  const int64_t plane_in = g.height * g.width;
  const int64_t plane_cols = g.kernel_h * g.kernel_w * g.out_h * g.out_w;
  dispatch_floating(cols.dtype(), "col2im", [&](auto tag) {
    using T = decltype(tag);
    const T* in = cols.data<T>();
    T* out = x_grad.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && cols.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) col2im_plane(in + p * plane_cols, out + p * plane_in, g);
  });
}

}  // namespace minidl
