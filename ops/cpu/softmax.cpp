// Softmax kernels over the middle axis of an [outer, n, inner] view. With inner == 1 (softmax over
// the last dim, the classifier case) each row is contiguous and runs as one Eigen array expression.
// Otherwise a slab of up to kChunk inner columns is walked over n, so the contiguous inner axis is
// the vectorized one and each input element is read from memory once per pass.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

template <class T>
using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

constexpr int64_t kChunk = 256;
constexpr int64_t kParallelWork = 16384;  // exp is dear: worth a thread team sooner than a copy

template <class T>
void softmax_row(const T* x, int64_t n, bool log, T* out) {
  ConstVec<T> in(x, n);
  Vec<T> o(out, n);
  // Subtracting the max keeps exp() from overflowing; the result is unchanged mathematically.
  const T m = in.maxCoeff();
  if (log) {
    o = in - m;
    o -= std::log(o.exp().sum());
  } else {
    o = (in - m).exp();
    o *= T(1) / o.sum();
  }
}

template <class T>
void softmax_backward_row(const T* g, const T* y, int64_t n, bool log, T* gin) {
  ConstVec<T> go(g, n), yo(y, n);
  Vec<T> gi(gin, n);
  if (log) gi = go - yo.exp() * go.sum();
  else gi = yo * (go - (go * yo).sum());
}

// Columns [0, len) of one slab: element (i, c) sits at base[i * inner + c].
template <class T>
void softmax_slab(const T* x, int64_t n, int64_t inner, int64_t len, bool log, T* out) {
  T max_buf[kChunk], sum_buf[kChunk];
  Vec<T> mx(max_buf, len), sum(sum_buf, len);
  mx = ConstVec<T>(x, len);
  for (int64_t i = 1; i < n; ++i) mx = mx.max(ConstVec<T>(x + i * inner, len));
  sum.setZero();
  for (int64_t i = 0; i < n; ++i) {
    Vec<T> o(out + i * inner, len);
    o = (ConstVec<T>(x + i * inner, len) - mx).exp();
    sum += o;
  }
  if (log) {
    mx += sum.log();  // log-softmax = x - (max + log sum exp)
    for (int64_t i = 0; i < n; ++i) Vec<T>(out + i * inner, len) = ConstVec<T>(x + i * inner, len) - mx;
  } else {
    sum = sum.inverse();
    for (int64_t i = 0; i < n; ++i) Vec<T>(out + i * inner, len) *= sum;
  }
}

template <class T>
void softmax_backward_slab(const T* g, const T* y, int64_t n, int64_t inner, int64_t len, bool log, T* gin) {
  T dot_buf[kChunk];
  Vec<T> dot(dot_buf, len);
  dot.setZero();
  for (int64_t i = 0; i < n; ++i) {
    if (log) dot += ConstVec<T>(g + i * inner, len);
    else dot += ConstVec<T>(g + i * inner, len) * ConstVec<T>(y + i * inner, len);
  }
  for (int64_t i = 0; i < n; ++i) {
    ConstVec<T> go(g + i * inner, len), yo(y + i * inner, len);
    Vec<T> gi(gin + i * inner, len);
    if (log) gi = go - yo.exp() * dot;
    else gi = yo * (go - dot);
  }
}

// Calls row(a) for each contiguous row when inner == 1, else slab(base offset, len) per chunk.
template <class Row, class Slab>
void for_each_softmax_part(int64_t outer, int64_t n, int64_t inner, Row&& row, Slab&& slab) {
  if (n == 0) return;
  const bool parallel = outer * n * inner > kParallelWork;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t a = 0; a < outer; ++a) row(a * n);
    return;
  }
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t c0 = ch * kChunk;
      slab(a * n * inner + c0, std::min(kChunk, inner - c0));
    }
  }
}

}  // namespace

void CpuKernels::softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out) {
  dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    for_each_softmax_part(
        outer, n, inner, [&](int64_t off) { softmax_row(in + off, n, log, o + off); },
        [&](int64_t off, int64_t len) { softmax_slab(in + off, n, inner, len, log, o + off); });
  });
}

void CpuKernels::softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t outer, int64_t n, int64_t inner,
                                  bool log, Tensor& grad_in) {
  dispatch_floating(out.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = grad_out.data<T>();
    const T* y = out.data<T>();
    T* gi = grad_in.data<T>();
    for_each_softmax_part(
        outer, n, inner, [&](int64_t off) { softmax_backward_row(g + off, y + off, n, log, gi + off); },
        [&](int64_t off, int64_t len) { softmax_backward_slab(g + off, y + off, n, inner, len, log, gi + off); });
  });
}

}  // namespace minidl
