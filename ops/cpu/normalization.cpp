// Batch and group (and so layer) normalization on the CPU, x viewed as [N, C, L].
//
// Statistics take two passes in double for float (mean, then squared deviations), which keeps
// digits that a one-pass sum of squares would cancel away. Per-channel sums walk the batch in the
// outer loop over a chunk of channels, so [N, C] inputs (L = 1) stream their rows instead of
// striding down columns. The elementwise passes use the same formulas as the CUDA kernels:
//   out  = (x - mean) * invstd * w + b
//   gx   = invstd * (g*w - s1 / m - (x - mean) * invstd * s2 / m)
// with s1 = sum g*w, s2 = sum g*w*xhat over the m elements that share the statistic (s1 = s2 = 0
// where the statistics were constants).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

constexpr int64_t kColumnChunk = 64;  // channels per task when L == 1: a row's run stays in cache

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;

template <class T>
const T* ptr_or_null(const Tensor* t) {
  return t ? t->data<T>() : nullptr;
}

// [N, C, L] and where each (sample, channel) plane finds its statistic: n * stat_per_sample +
// c / channels_per_stat (batch norm: 0 and 1, the channel; group norm: G and C / G).
struct Layout {
  int64_t n, c, l;
  int64_t stat_per_sample, channels_per_stat;
  int64_t stat(int64_t i, int64_t ch) const { return i * stat_per_sample + ch / channels_per_stat; }
};

// Calls fn(c0, c1) on chunks of channels, in parallel when the tensor is large: single channels
// when planes are long (L > 1), runs of kColumnChunk adjacent columns when L == 1.
template <class Fn>
void for_channel_chunks(const Layout& s, Fn&& fn) {
  const int64_t chunk = s.l == 1 ? kColumnChunk : 1;
  const int64_t chunks = (s.c + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && s.n * s.c * s.l > kParallelGrain)
  for (int64_t k = 0; k < chunks; ++k) fn(k * chunk, std::min(s.c, (k + 1) * chunk));
}

// out = (x - mean) * invstd * w + b, plane by plane.
template <class T>
void normalize(const T* x, const T* mean, const T* invstd, const T* w, const T* b, T* out, const Layout& s) {
  const int64_t planes = s.n * s.c;
#pragma omp parallel for schedule(static) if (planes > 1 && planes * s.l > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t ch = p % s.c, st = s.stat(p / s.c, ch);
    const T m = mean[st], r = invstd[st], wc = w ? w[ch] : T(1), bc = b ? b[ch] : T(0);
    const T* src = x + p * s.l;
    T* dst = out + p * s.l;
    for (int64_t j = 0; j < s.l; ++j) dst[j] = (src[j] - m) * r * wc + bc;
  }
}

// gx = invstd * (g*w - s1 / m - (x - mean) * invstd * s2 / m); s1, s2 null: gx = invstd * g*w.
template <class T>
void normalize_backward(const T* g, const T* x, const T* mean, const T* invstd, const T* w, const T* s1,
                        const T* s2, T inv_count, T* gx, const Layout& s) {
  const int64_t planes = s.n * s.c;
#pragma omp parallel for schedule(static) if (planes > 1 && planes * s.l > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t ch = p % s.c, st = s.stat(p / s.c, ch);
    const T m = mean[st], r = invstd[st], wc = w ? w[ch] : T(1);
    const T* gp = g + p * s.l;
    T* dst = gx + p * s.l;
    if (!s1) {
      for (int64_t j = 0; j < s.l; ++j) dst[j] = r * gp[j] * wc;
      continue;
    }
    const T* xp = x + p * s.l;
    const T a = s1[st] * inv_count, k = r * s2[st] * inv_count;
    for (int64_t j = 0; j < s.l; ++j) dst[j] = r * (gp[j] * wc - a - (xp[j] - m) * k);
  }
}

// Per channel, over N and L: sum g and sum g * xhat, xhat from the plane's statistic.
template <class T>
void channel_grad_sums(const T* g, const T* x, const T* mean, const T* invstd, const Layout& s,
                       std::vector<Acc<T>>& sum_g, std::vector<Acc<T>>& sum_gxhat) {
  sum_g.assign(static_cast<size_t>(s.c), 0);
  sum_gxhat.assign(static_cast<size_t>(s.c), 0);
  for_channel_chunks(s, [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        const int64_t st = s.stat(i, ch), base = (i * s.c + ch) * s.l;
        const Acc<T> m = mean[st], r = invstd[st];
        Acc<T> a = 0, b = 0;
        for (int64_t j = 0; j < s.l; ++j) {
          a += g[base + j];
          b += Acc<T>(g[base + j]) * (Acc<T>(x[base + j]) - m);
        }
        sum_g[static_cast<size_t>(ch)] += a;
        sum_gxhat[static_cast<size_t>(ch)] += b * r;
      }
    }
  });
}

template <class T>
void batch_norm_impl(const Tensor& x, const Tensor* weight, const Tensor* bias, Tensor* running_mean,
                     Tensor* running_var, bool training, double momentum, double eps, Tensor& out, Tensor& save_mean,
                     Tensor& save_invstd) {
  const Layout s{x.size(0), x.size(1), x.size(2), 0, 1};
  const T* xp = x.data<T>();
  T* mean = save_mean.data<T>();
  T* invstd = save_invstd.data<T>();
  T* rm = running_mean ? running_mean->data<T>() : nullptr;
  T* rv = running_var ? running_var->data<T>() : nullptr;
  if (training) {
    const double count = static_cast<double>(s.n * s.l);
    for_channel_chunks(s, [&](int64_t c0, int64_t c1) {
      const size_t width = static_cast<size_t>(c1 - c0);
      std::vector<Acc<T>> sum(width, 0), sq(width, 0);
      for (int64_t i = 0; i < s.n; ++i)
        for (int64_t ch = c0; ch < c1; ++ch) {
          const T* p = xp + (i * s.c + ch) * s.l;
          Acc<T> a = 0;
          for (int64_t j = 0; j < s.l; ++j) a += p[j];
          sum[static_cast<size_t>(ch - c0)] += a;
        }
      for (size_t k = 0; k < width; ++k) sum[k] /= count;  // now the mean
      for (int64_t i = 0; i < s.n; ++i)
        for (int64_t ch = c0; ch < c1; ++ch) {
          const T* p = xp + (i * s.c + ch) * s.l;
          const Acc<T> m = sum[static_cast<size_t>(ch - c0)];
          Acc<T> a = 0;
          for (int64_t j = 0; j < s.l; ++j) a += (p[j] - m) * (p[j] - m);
          sq[static_cast<size_t>(ch - c0)] += a;
        }
      for (int64_t ch = c0; ch < c1; ++ch) {
        const Acc<T> m = sum[static_cast<size_t>(ch - c0)], m2 = sq[static_cast<size_t>(ch - c0)];
        mean[ch] = static_cast<T>(m);
        invstd[ch] = static_cast<T>(1 / std::sqrt(m2 / count + eps));
        if (rm) {
          rm[ch] = static_cast<T>((1 - momentum) * rm[ch] + momentum * m);
          rv[ch] = static_cast<T>((1 - momentum) * rv[ch] + momentum * (m2 / (count - 1)));
        }
      }
    });
  } else {
    for (int64_t ch = 0; ch < s.c; ++ch) {
      mean[ch] = rm[ch];
      invstd[ch] = static_cast<T>(1 / std::sqrt(Acc<T>(rv[ch]) + eps));
    }
  }
  normalize<T>(xp, mean, invstd, ptr_or_null<T>(weight), ptr_or_null<T>(bias), out.data<T>(), s);
}

template <class T>
void batch_norm_backward_impl(const Tensor& grad_out, const Tensor& x, const Tensor* weight, const Tensor& save_mean,
                              const Tensor& save_invstd, bool training, Tensor* grad_x, Tensor* grad_weight,
                              Tensor* grad_bias) {
  const Layout s{x.size(0), x.size(1), x.size(2), 0, 1};
  const T* g = grad_out.data<T>();
  const T* xp = x.data<T>();
  const T* mean = save_mean.data<T>();
  const T* invstd = save_invstd.data<T>();
  const T* w = ptr_or_null<T>(weight);
  std::vector<T> s1, s2;
  if (grad_weight || grad_bias || (grad_x && training)) {
    std::vector<Acc<T>> sum_g, sum_gxhat;
    channel_grad_sums<T>(g, xp, mean, invstd, s, sum_g, sum_gxhat);
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const size_t k = static_cast<size_t>(ch);
      if (grad_bias) grad_bias->data<T>()[ch] = static_cast<T>(sum_g[k]);
      if (grad_weight) grad_weight->data<T>()[ch] = static_cast<T>(sum_gxhat[k]);
    }
    if (grad_x && training) {
      // w is one number per channel, so sum g*w = w * sum g and likewise for s2.
      s1.resize(static_cast<size_t>(s.c));
      s2.resize(static_cast<size_t>(s.c));
      for (int64_t ch = 0; ch < s.c; ++ch) {
        const size_t k = static_cast<size_t>(ch);
        const Acc<T> wc = w ? Acc<T>(w[ch]) : Acc<T>(1);
        s1[k] = static_cast<T>(wc * sum_g[k]);
        s2[k] = static_cast<T>(wc * sum_gxhat[k]);
      }
    }
  }
  if (grad_x) {
    normalize_backward<T>(g, xp, mean, invstd, w, training ? s1.data() : nullptr, training ? s2.data() : nullptr,
                          T(1) / static_cast<T>(s.n * s.l), grad_x->data<T>(), s);
  }
}

template <class T>
void group_norm_impl(const Tensor& x, int64_t groups, const Tensor* weight, const Tensor* bias, double eps, Tensor& out,
                     Tensor& save_mean, Tensor& save_invstd) {
  const int64_t per_group = x.size(1) / groups;
  const Layout s{x.size(0), x.size(1), x.size(2), groups, per_group};
  const int64_t rows = s.n * groups, d = per_group * s.l;
  const T* xp = x.data<T>();
  T* mean = save_mean.data<T>();
  T* invstd = save_invstd.data<T>();
#pragma omp parallel for schedule(static) if (rows > 1 && rows * d > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = xp + r * d;
    Acc<T> sum = 0, sq = 0;
    for (int64_t j = 0; j < d; ++j) sum += p[j];
    const Acc<T> m = sum / static_cast<Acc<T>>(d);
    for (int64_t j = 0; j < d; ++j) sq += (p[j] - m) * (p[j] - m);
    mean[r] = static_cast<T>(m);
    invstd[r] = static_cast<T>(1 / std::sqrt(sq / static_cast<Acc<T>>(d) + eps));
  }
  normalize<T>(xp, mean, invstd, ptr_or_null<T>(weight), ptr_or_null<T>(bias), out.data<T>(), s);
}

template <class T>
void group_norm_backward_impl(const Tensor& grad_out, const Tensor& x, int64_t groups, const Tensor* weight,
                              const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_x, Tensor* grad_weight,
                              Tensor* grad_bias) {
  const int64_t per_group = x.size(1) / groups;
  const Layout s{x.size(0), x.size(1), x.size(2), groups, per_group};
  const int64_t rows = s.n * groups, d = per_group * s.l;
  const T* g = grad_out.data<T>();
  const T* xp = x.data<T>();
  const T* mean = save_mean.data<T>();
  const T* invstd = save_invstd.data<T>();
  const T* w = ptr_or_null<T>(weight);
  if (grad_x) {
    // s1 = sum g*w and s2 = sum g*w*xhat over each row (sample and group).
    std::vector<T> s1(static_cast<size_t>(rows)), s2(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) if (rows > 1 && rows * d > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const Acc<T> m = mean[r];
      Acc<T> a = 0, b = 0;
      for (int64_t cc = 0; cc < per_group; ++cc) {
        const int64_t ch = (r % groups) * per_group + cc, base = r * d + cc * s.l;
        const Acc<T> wc = w ? Acc<T>(w[ch]) : Acc<T>(1);
        Acc<T> ga = 0, gb = 0;
        for (int64_t j = 0; j < s.l; ++j) {
          ga += g[base + j];
          gb += Acc<T>(g[base + j]) * (Acc<T>(xp[base + j]) - m);
        }
        a += wc * ga;
        b += wc * gb;
      }
      s1[static_cast<size_t>(r)] = static_cast<T>(a);
      s2[static_cast<size_t>(r)] = static_cast<T>(b * invstd[r]);
    }
    normalize_backward<T>(g, xp, mean, invstd, w, s1.data(), s2.data(), T(1) / static_cast<T>(d),
                          grad_x->data<T>(), s);
  }
  if (grad_weight || grad_bias) {
    std::vector<Acc<T>> sum_g, sum_gxhat;
    channel_grad_sums<T>(g, xp, mean, invstd, s, sum_g, sum_gxhat);
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const size_t k = static_cast<size_t>(ch);
      if (grad_bias) grad_bias->data<T>()[ch] = static_cast<T>(sum_g[k]);
      if (grad_weight) grad_weight->data<T>()[ch] = static_cast<T>(sum_gxhat[k]);
    }
  }
}

}  // namespace

void CpuKernels::batch_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, Tensor* running_mean,
                            Tensor* running_var, bool training, double momentum, double eps, Tensor& out,
                            Tensor& save_mean, Tensor& save_invstd) {
  dispatch_floating(x.dtype(), "batch_norm", [&](auto tag) {
    batch_norm_impl<decltype(tag)>(x, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean,
                                   save_invstd);
  });
}

void CpuKernels::batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor* weight,
                                     const Tensor& save_mean, const Tensor& save_invstd, bool training, Tensor* grad_x,
                                     Tensor* grad_weight, Tensor* grad_bias) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&](auto tag) {
    batch_norm_backward_impl<decltype(tag)>(grad_out, x, weight, save_mean, save_invstd, training, grad_x, grad_weight,
                                            grad_bias);
  });
}

void CpuKernels::group_norm(const Tensor& x, int64_t groups, const Tensor* weight, const Tensor* bias, double eps,
                            Tensor& out, Tensor& save_mean, Tensor& save_invstd) {
  dispatch_floating(x.dtype(), "group_norm", [&](auto tag) {
    group_norm_impl<decltype(tag)>(x, groups, weight, bias, eps, out, save_mean, save_invstd);
  });
}

void CpuKernels::group_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t groups, const Tensor* weight,
                                     const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_x,
                                     Tensor* grad_weight, Tensor* grad_bias) {
  dispatch_floating(x.dtype(), "group_norm_backward", [&](auto tag) {
    group_norm_backward_impl<decltype(tag)>(grad_out, x, groups, weight, save_mean, save_invstd, grad_x, grad_weight,
                                            grad_bias);
  });
}

}  // namespace minidl
