// Average pooling on the CPU. Planes (image, channel) are independent, so OpenMP splits them across
// threads; each backward writes only into its own plane, so overlapping windows need no atomics.
// Sums accumulate in double.
#include <algorithm>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

// One axis of a pooling window: the image positions [begin, end) it covers, and its length
// clipped to the padded image, which is what count_include_pad divides by (PyTorch's rule).
struct Window {
  int64_t begin, end, padded_len;
};
Window pool_window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in) {
  const int64_t start = o * stride - pad;
  const int64_t stop = std::min(start + k, in + pad);
  return {std::max<int64_t>(start, 0), std::min(stop, in), stop - start};
}

// One axis of an adaptive window: [floor(o * in / out), ceil((o + 1) * in / out)).
Window adaptive_window(int64_t o, int64_t in, int64_t out) {
  const int64_t begin = o * in / out, end = ((o + 1) * in + out - 1) / out;
  return {begin, end, end - begin};
}

double divisor(const Window& h, const Window& w, bool count_include_pad) {
  const int64_t n = count_include_pad ? h.padded_len * w.padded_len : (h.end - h.begin) * (w.end - w.begin);
  return static_cast<double>(n);
}

// Runs plane(p) for every plane, in parallel when the work is large enough.
template <class Fn>
void for_each_plane(int64_t planes, int64_t work, Fn&& plane) {
#pragma omp parallel for schedule(static) if (planes > 1 && work > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) plane(p);
}

// Mean of src over the window; an empty window (impossible for valid geometries) gives 0.
template <class T>
T window_mean(const T* src, int64_t W, const Window& h, const Window& w, double div) {
  double s = 0;
  for (int64_t ih = h.begin; ih < h.end; ++ih)
    for (int64_t iw = w.begin; iw < w.end; ++iw) s += static_cast<double>(src[ih * W + iw]);
  return div > 0 ? static_cast<T>(s / div) : T(0);
}

template <class T>
void add_to_window(T* dst, int64_t W, const Window& h, const Window& w, T value) {
  for (int64_t ih = h.begin; ih < h.end; ++ih)
    for (int64_t iw = w.begin; iw < w.end; ++iw) dst[ih * W + iw] += value;
}

}  // namespace

void CpuKernels::avg_pool2d(const Tensor& x, const ConvGeometry& g, bool count_include_pad, Tensor& out) {
  const int64_t planes = x.size(0) * g.channels, plane_in = g.height * g.width, plane_out = g.out_h * g.out_w;
  dispatch_floating(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    for_each_plane(planes, x.numel(), [&](int64_t p) {
      const T* src = in + p * plane_in;
      T* dst = o + p * plane_out;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const Window h = pool_window(oh, g.stride_h, g.pad_h, g.kernel_h, g.height);
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const Window w = pool_window(ow, g.stride_w, g.pad_w, g.kernel_w, g.width);
          dst[oh * g.out_w + ow] = window_mean(src, g.width, h, w, divisor(h, w, count_include_pad));
        }
      }
    });
  });
}

void CpuKernels::avg_pool2d_backward(const Tensor& grad_out, const ConvGeometry& g, bool count_include_pad,
                                     Tensor& grad_in) {
  const int64_t planes = grad_in.size(0) * g.channels, plane_in = g.height * g.width,
                plane_out = g.out_h * g.out_w;
  dispatch_floating(grad_out.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* go = grad_out.data<T>();
    T* gi = grad_in.data<T>();
    for_each_plane(planes, grad_in.numel(), [&](int64_t p) {
      T* dst = gi + p * plane_in;
      std::fill(dst, dst + plane_in, T(0));
      const T* src = go + p * plane_out;
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const Window h = pool_window(oh, g.stride_h, g.pad_h, g.kernel_h, g.height);
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const Window w = pool_window(ow, g.stride_w, g.pad_w, g.kernel_w, g.width);
          const double div = divisor(h, w, count_include_pad);
          if (div > 0) add_to_window(dst, g.width, h, w, static_cast<T>(src[oh * g.out_w + ow] / div));
        }
      }
    });
  });
}

void CpuKernels::adaptive_avg_pool2d(const Tensor& x, Tensor& out) {
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  const int64_t planes = x.size(0) * x.size(1);
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    for_each_plane(planes, x.numel() + out.numel(), [&](int64_t p) {
      const T* src = in + p * H * W;
      T* dst = o + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const Window h = adaptive_window(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const Window w = adaptive_window(ow, W, OW);
          dst[oh * OW + ow] = window_mean(src, W, h, w, divisor(h, w, false));
        }
      }
    });
  });
}

void CpuKernels::adaptive_avg_pool2d_backward(const Tensor& grad_out, Tensor& grad_in) {
  const int64_t H = grad_in.size(2), W = grad_in.size(3), OH = grad_out.size(2), OW = grad_out.size(3);
  const int64_t planes = grad_in.size(0) * grad_in.size(1);
  dispatch_floating(grad_out.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* go = grad_out.data<T>();
    T* gi = grad_in.data<T>();
    for_each_plane(planes, grad_in.numel() + grad_out.numel(), [&](int64_t p) {
      T* dst = gi + p * H * W;
      std::fill(dst, dst + H * W, T(0));
      const T* src = go + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const Window h = adaptive_window(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const Window w = adaptive_window(ow, W, OW);
          add_to_window(dst, W, h, w, static_cast<T>(src[oh * OW + ow] / divisor(h, w, false)));
        }
      }
    });
  });
}

}  // namespace minidl
