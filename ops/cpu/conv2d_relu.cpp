// A convolution's fused epilogues on the CPU (ops/conv2d_relu.cpp). Planes (image, channel) are
// independent, so OpenMP splits them across threads; the bias gradient sums each plane into its own
// slot, then the planes of a channel in image order, so the result does not depend on the threads.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

template <class T>
T bias_of(const T* bias, int64_t plane, int64_t channels) {
  return bias ? bias[plane % channels] : T(0);
}

// grad_bias[c] = sum over images n of plane_sums[n * C + c].
template <class T>
void sum_planes(const std::vector<double>& plane_sums, int64_t images, int64_t channels, T* grad_bias) {
  for (int64_t c = 0; c < channels; ++c) {
    double s = 0;
    for (int64_t n = 0; n < images; ++n) s += plane_sums[static_cast<size_t>(n * channels + c)];
    grad_bias[c] = static_cast<T>(s);
  }
}

// The common 2 x 2 window of one plane, without the general window loops, so that the compiler
// vectorizes it: the maximum of four, then the bias (the same value as the maximum of the four
// sums: rounding is monotonic), then the ReLU; a NaN in the window is passed on.
template <class T>
void bias_relu_max_pool2x2(const T* s, T* d, int64_t W, int64_t oh, int64_t ow, T shift) {
  for (int64_t i = 0; i < oh; ++i) {
    const T* r0 = s + 2 * i * W;
    const T* r1 = r0 + W;
    T* o = d + i * ow;
    for (int64_t j = 0; j < ow; ++j) {
      const T a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], e = r1[2 * j + 1];
      const T best = std::max(std::max(a, b), std::max(c, e)) + shift;
      const bool nan = a != a || b != b || c != c || e != e;
      o[j] = nan ? a + b + c + e : std::max(best, T(0));
    }
  }
}

// gp = g where out > 0, else 0, over [begin, begin + n); returns its sum, in double. The sum runs
// in kLanes fixed partial sums (element i into lane i % kLanes, the tail into lane 0), added in
// order at the end: an order the compiler can vectorize, and the same whatever the threads. Two
// loops, not one: GCC 12 at -O3 with AVX-512 miscompiled the fused loop (wrong values in gp,
// which Conv2dRelu.Gradcheck caught).
template <class T>
double relu_backward_sum(const T* g, const T* out, T* gp, int64_t begin, int64_t n) {
  constexpr int kLanes = 16;
  const int64_t end = begin + n;
  for (int64_t i = begin; i < end; ++i) gp[i] = out[i] > T(0) ? g[i] : T(0);
  double lanes[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] += gp[i + j];
  for (; i < end; ++i) lanes[0] += gp[i];
  double sum = 0;
  for (double lane : lanes) sum += lane;
  return sum;
}

}  // namespace

void CpuKernels::conv_bias_act(const Tensor& x, const Tensor* bias, bool relu, Tensor& y) {
  const int64_t channels = x.size(1), planes = x.size(0) * channels, area = x.size(2) * x.size(3);
  dispatch_floating(x.dtype(), "conv_bias_act", [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    const T* b = bias ? bias->data<T>() : nullptr;
    T* dst = y.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && x.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      const T shift = bias_of(b, p, channels);
      const T* s = src + p * area;
      T* d = dst + p * area;
      if (relu) {
        for (int64_t i = 0; i < area; ++i) d[i] = std::max(s[i] + shift, T(0));
      } else {
        for (int64_t i = 0; i < area; ++i) d[i] = s[i] + shift;
      }
    }
  });
}

void CpuKernels::conv_bias_relu_backward(const Tensor& grad_out, const Tensor& y, Tensor& grad_pre,
                                         Tensor* grad_bias) {
  const int64_t images = y.size(0), channels = y.size(1), planes = images * channels, area = y.size(2) * y.size(3);
  std::vector<double> plane_sums(static_cast<size_t>(planes));
  dispatch_floating(y.dtype(), "conv_bias_relu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = grad_out.data<T>();
    const T* out = y.data<T>();
    T* gp = grad_pre.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && y.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p)
      plane_sums[static_cast<size_t>(p)] = relu_backward_sum(g, out, gp, p * area, area);
    if (grad_bias) sum_planes(plane_sums, images, channels, grad_bias->data<T>());
  });
}

void CpuKernels::bias_relu_max_pool2d(const Tensor& x, const Tensor* bias, int64_t k, Tensor& out) {
  const int64_t channels = x.size(1), planes = x.size(0) * channels, H = x.size(2), W = x.size(3);
  const int64_t oh = out.size(2), ow = out.size(3);
  dispatch_floating(x.dtype(), "bias_relu_max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    const T* b = bias ? bias->data<T>() : nullptr;
    T* dst = out.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && x.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      const T shift = bias_of(b, p, channels);
      const T* s = src + p * H * W;
      T* d = dst + p * oh * ow;
      if (k == 2) {
        bias_relu_max_pool2x2(s, d, W, oh, ow, shift);
        continue;
      }
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          // As max_pool2d over relu(x + b): the first maximum wins and a NaN wins over numbers.
          T best = s[i * k * W + j * k] + shift;
          for (int64_t di = 0; di < k; ++di)
            for (int64_t dj = 0; dj < k; ++dj) {
              const T v = s[(i * k + di) * W + j * k + dj] + shift;
              if (v > best || std::isnan(v)) best = v;
            }
          d[i * ow + j] = std::isnan(best) ? best : std::max(best, T(0));
        }
      }
    }
  });
}

void CpuKernels::bias_relu_max_pool2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor* bias,
                                               const Tensor& out, int64_t k, Tensor& grad_pre, Tensor* grad_bias) {
  const int64_t images = x.size(0), channels = x.size(1), planes = images * channels, H = x.size(2), W = x.size(3);
  const int64_t oh = out.size(2), ow = out.size(3);
  std::vector<double> plane_sums(static_cast<size_t>(planes));
  dispatch_floating(x.dtype(), "bias_relu_max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    const T* b = bias ? bias->data<T>() : nullptr;
    const T* pooled = out.data<T>();
    const T* g = grad_out.data<T>();
    T* gp = grad_pre.data<T>();
#pragma omp parallel for schedule(static) if (planes > 1 && x.numel() > kParallelGrain)
    for (int64_t p = 0; p < planes; ++p) {
      const T shift = bias_of(b, p, channels);
      const T* s = src + p * H * W;
      T* d = gp + p * H * W;
      std::fill(d, d + H * W, T(0));
      double sum = 0;
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t o = p * oh * ow + i * ow + j;
          if (!(pooled[o] > T(0))) continue;  // ReLU passes no gradient where its output is 0 (or NaN)
          int64_t best_at = i * k * W + j * k;
          T best = s[best_at] + shift;
          for (int64_t di = 0; di < k; ++di)
            for (int64_t dj = 0; dj < k; ++dj) {
              const int64_t at = (i * k + di) * W + j * k + dj;
              const T v = s[at] + shift;
              if (v > best) best = v, best_at = at;
            }
          d[best_at] = g[o];
          sum += g[o];
        }
      }
      plane_sums[static_cast<size_t>(p)] = sum;
    }
    if (grad_bias) sum_planes(plane_sums, images, channels, grad_bias->data<T>());
  });
}

}  // namespace minidl
