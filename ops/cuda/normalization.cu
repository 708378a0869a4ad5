// Batch and group (and so layer) normalization on CUDA, x viewed as [N, C, L]: one reduction pass
// for the statistics (or the backward's sums, normalization_reduce.cuh), then one elementwise pass.
// Layer norm (one group over L == 1) holds each row in a warp's registers where it fits
// (layer_norm_rows.cuh): one kernel each way. The elementwise passes use the CPU's formulas
// (ops/cpu/normalization.cpp). The transformer's fused seam is dropout_add_layer_norm.cu.
#include "ops/cuda/layer_norm_rows.cuh"
#include "ops/cuda/normalization_reduce.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::norm;

// Batch norm in training: a channel's moments; saves mean and invstd, updates the running statistics.
template <class T, class I>
struct BatchStats {
  using A = AccT<T>;
  const T* x;
  I channels, l;
  T *mean, *invstd, *running_mean, *running_var;
  double momentum, eps;
  __device__ Moments<A> load(I s, I c, I j) const { return moments_of(A(x[(s * channels + c) * l + j])); }
  __device__ void finish(I c, const Moments<A>& m) const {
    mean[c] = T(m.mean);
    invstd[c] = T(A(1) / d_sqrt(m.m2 / m.n + A(eps)));
    if (running_mean) {
      running_mean[c] = T((1 - momentum) * A(running_mean[c]) + momentum * m.mean);
      running_var[c] = T((1 - momentum) * A(running_var[c]) + momentum * (m.m2 / (m.n - A(1))));
    }
  }
};

// Group norm: a row's moments.
template <class T, class I>
struct RowStats {
  using A = AccT<T>;
  const T* x;
  I d;
  T *mean, *invstd;
  double eps;
  __device__ Moments<A> load(I row, I j) const { return moments_of(A(x[row * d + j])); }
  __device__ void finish(I row, const Moments<A>& m) const {
    mean[row] = T(m.mean);
    invstd[row] = T(A(1) / d_sqrt(m.m2 / m.n + A(eps)));
  }
};

// Per channel over N and L: sum g and sum g * xhat. The statistic of sample s, channel c is
// s * stat_per_sample + c / channels_per_stat (batch norm: the channel; group norm: s's group).
// Writes the bias and weight gradients, and for batch norm's grad_x also s1 = w * sum g and
// s2 = w * sum g * xhat (w is constant over a channel).
template <class T, class I>
struct ChannelGradSums {
  using A = AccT<T>;
  const T *g, *x, *mean, *invstd, *weight;
  I channels, l, stat_per_sample, channels_per_stat;
  T *grad_weight, *grad_bias, *s1, *s2;
  __device__ Sums<A> load(I s, I c, I j) const {
    const I at = (s * channels + c) * l + j, st = s * stat_per_sample + c / channels_per_stat;
    const A gv = A(g[at]);
    return {gv, gv * (A(x[at]) - A(mean[st])) * A(invstd[st])};
  }
  __device__ void finish(I c, const Sums<A>& v) const {
    if (grad_bias) grad_bias[c] = T(v.a);
    if (grad_weight) grad_weight[c] = T(v.b);
    if (s1) {
      const A w = weight ? A(weight[c]) : A(1);
      s1[c] = T(w * v.a);
      s2[c] = T(w * v.b);
    }
  }
};

// Group norm's grad_x: per row (sample and group), s1 = sum g*w and s2 = sum g*w*xhat.
template <class T, class I>
struct RowGradSums {
  using A = AccT<T>;
  const T *g, *x, *mean, *invstd, *weight;
  I d, l, groups, per_group;
  T *s1, *s2;
  __device__ Sums<A> load(I row, I j) const {
    const I c = (row % groups) * per_group + j / l, at = row * d + j;
    const A gw = A(g[at]) * (weight ? A(weight[c]) : A(1));
    return {gw, gw * (A(x[at]) - A(mean[row]))};
  }
  __device__ void finish(I row, const Sums<A>& v) const {
    s1[row] = T(v.a);
    s2[row] = T(v.b * A(invstd[row]));
  }
};

// ---- elementwise passes ----

// Element i of [N, C, L] has channel (i / l) % channels and statistic (i / stat_div) % stat_mod:
// batch norm (l, channels), group norm (d, N * G).
template <class I>
struct NormIndex {
  I l, channels, stat_div, stat_mod;
  __device__ __forceinline__ I channel(I i) const { return (i / l) % channels; }
  __device__ __forceinline__ I stat(I i) const { return (i / stat_div) % stat_mod; }
};

template <class T, class I>
__global__ void normalize_kernel(const T* x, const T* mean, const T* invstd, const T* w, const T* b, T* out,
                                 NormIndex<I> ix, I total) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I c = ix.channel(i), s = ix.stat(i);
    out[i] = (x[i] - mean[s]) * invstd[s] * (w ? w[c] : T(1)) + (b ? b[c] : T(0));
  }
}

// gx = invstd * (g*w - s1 / m - (x - mean) * invstd * s2 / m); s1 null: gx = invstd * g*w.
template <class T, class I>
__global__ void normalize_backward_kernel(const T* g, const T* x, const T* mean, const T* invstd, const T* w,
                                          const T* s1, const T* s2, T inv_count, T* gx, NormIndex<I> ix, I total) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I c = ix.channel(i), s = ix.stat(i);
    const T r = invstd[s];
    T v = g[i] * (w ? w[c] : T(1));
    if (s1) v = v - s1[s] * inv_count - (x[i] - mean[s]) * r * s2[s] * inv_count;
    gx[i] = r * v;
  }
}

template <class T>
__global__ void running_stats_kernel(const T* running_mean, const T* running_var, double eps, T* mean, T* invstd,
                                     int64_t channels) {
  using A = AccT<T>;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    mean[c] = running_mean[c];
    invstd[c] = T(A(1) / d_sqrt(A(running_var[c]) + A(eps)));
  }
}

// Calls fn(T{}, I{}) with the element type and the narrowest index type that holds every offset.
template <class Fn>
void dispatch_index(const Tensor& x, const char* what, Fn&& fn) {
  dispatch_floating(x.dtype(), what, [&](auto tag) {
    if (x.numel() <= INT32_MAX) fn(tag, int32_t{});
    else fn(tag, int64_t{});
  });
}

}  // namespace

void CudaKernels::batch_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, Tensor* running_mean,
                             Tensor* running_var, bool training, double momentum, double eps, Tensor& out,
                             Tensor& save_mean, Tensor& save_invstd) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  if (channels == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_index(x, "batch_norm", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    T* mean = ptr<T>(save_mean);
    T* invstd = ptr<T>(save_invstd);
    if (training) {
      BatchStats<T, I> op{ptr<const T>(x), I(channels), I(l), mean, invstd, ptr_or_null<T>(running_mean),
                          ptr_or_null<T>(running_var), momentum, eps};
      reduce_channels<Moments<AccT<T>>, I>(I(n), I(channels), I(l), op, x.device(), stream_);
    } else {
      running_stats_kernel<T><<<blocks_for(channels), kThreads, 0, stream_>>>(
          ptr<const T>(*running_mean), ptr<const T>(*running_var), eps, mean, invstd, channels);
      CUDA_LAUNCH_CHECK(running_stats_kernel);
    }
    const int64_t total = x.numel();
    if (total == 0) return;
    normalize_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(x), mean, invstd, cptr_or_null<T>(weight), cptr_or_null<T>(bias), ptr<T>(out),
        NormIndex<I>{I(l), I(channels), I(l), I(channels)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_kernel);
  });
}

void CudaKernels::batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor* weight,
                                      const Tensor& save_mean, const Tensor& save_invstd, bool training,
                                      Tensor* grad_x, Tensor* grad_weight, Tensor* grad_bias) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  if (channels == 0) return;
  cuda::DeviceGuard guard(device_);
  const bool sums_for_x = grad_x && training;
  Tensor s1, s2;
  if (sums_for_x) {
    s1 = Tensor::empty({channels}, x.dtype(), x.device());
    s2 = Tensor::empty({channels}, x.dtype(), x.device());
  }
  dispatch_index(x, "batch_norm_backward", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    if (grad_weight || grad_bias || sums_for_x) {
      ChannelGradSums<T, I> op{ptr<const T>(grad_out), ptr<const T>(x), ptr<const T>(save_mean),
                               ptr<const T>(save_invstd), cptr_or_null<T>(weight), I(channels), I(l), I(0), I(1),
                               ptr_or_null<T>(grad_weight), ptr_or_null<T>(grad_bias),
                               sums_for_x ? ptr<T>(s1) : nullptr, sums_for_x ? ptr<T>(s2) : nullptr};
      reduce_channels<Sums<AccT<T>>, I>(I(n), I(channels), I(l), op, x.device(), stream_);
    }
    const int64_t total = x.numel();
    if (!grad_x || total == 0) return;
    normalize_backward_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const T>(x), ptr<const T>(save_mean), ptr<const T>(save_invstd),
        cptr_or_null<T>(weight), sums_for_x ? ptr<const T>(s1) : nullptr, sums_for_x ? ptr<const T>(s2) : nullptr,
        T(1) / T(n * l), ptr<T>(*grad_x), NormIndex<I>{I(l), I(channels), I(l), I(channels)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_backward_kernel);
  });
}

void CudaKernels::group_norm(const Tensor& x, int64_t groups, const Tensor* weight, const Tensor* bias, double eps,
                             Tensor& out, Tensor& save_mean, Tensor& save_invstd) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  const int64_t rows = n * groups, d = channels / groups * l;
  if (rows == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_index(x, "group_norm", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    T* mean = ptr<T>(save_mean);
    T* invstd = ptr<T>(save_invstd);
    const T *xp = ptr<const T>(x), *w = cptr_or_null<T>(weight), *b = cptr_or_null<T>(bias);
    T* o = ptr<T>(out);
    if (l == 1 && groups == 1 &&
        dispatch_row_layout<T>(d, {xp, w, b, o}, [&](auto per_lane, auto pack) {
          layer_norm_rows<T, per_lane(), pack()><<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream_>>>(
              xp, w, b, o, mean, invstd, rows, static_cast<int>(d), eps);
          CUDA_LAUNCH_CHECK(layer_norm_rows);
        }))
      return;
    RowStats<T, I> op{ptr<const T>(x), I(d), mean, invstd, eps};
    reduce_rows<Moments<AccT<T>>, I>(I(rows), I(d), op, stream_);
    const int64_t total = x.numel();
    if (total == 0) return;
    normalize_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(x), mean, invstd, cptr_or_null<T>(weight), cptr_or_null<T>(bias), ptr<T>(out),
        NormIndex<I>{I(l), I(channels), I(d), I(rows)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_kernel);
  });
}

void CudaKernels::group_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t groups, const Tensor* weight,
                                      const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_x,
                                      Tensor* grad_weight, Tensor* grad_bias) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  const int64_t per_group = channels / groups, rows = n * groups, d = per_group * l;
  cuda::DeviceGuard guard(device_);
  const bool rows_in_registers = l == 1 && groups == 1 && d <= 32 * kMaxPerLane;
  // The weight and bias gradients from grad_x's pass over g and x, where that pass runs.
  const bool param_sums_with_x = rows_in_registers && grad_x && x.numel() > 0 && d <= 32 * kMaxPerLaneWithSums;
  Tensor s1, s2;
  if (grad_x && rows > 0 && !rows_in_registers) {
    s1 = Tensor::empty({rows}, x.dtype(), x.device());
    s2 = Tensor::empty({rows}, x.dtype(), x.device());
  }
  dispatch_index(x, "group_norm_backward", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    const T* g = ptr<const T>(grad_out);
    const T* xp = ptr<const T>(x);
    const T* mean = ptr<const T>(save_mean);
    const T* invstd = ptr<const T>(save_invstd);
    const T* w = cptr_or_null<T>(weight);
    if ((grad_weight || grad_bias) && !param_sums_with_x) {
      ChannelGradSums<T, I> op{g, xp, mean, invstd, w, I(channels), I(l), I(groups), I(per_group),
                               ptr_or_null<T>(grad_weight), ptr_or_null<T>(grad_bias), nullptr, nullptr};
      reduce_channels<Sums<AccT<T>>, I>(I(n), I(channels), I(l), op, x.device(), stream_);
    }
    const int64_t total = x.numel();
    if (!grad_x || total == 0) return;
    if (rows_in_registers) {
      layer_norm_rows_backward_launch<T, I>(g, xp, mean, invstd, w, ptr<T>(*grad_x),
                                            param_sums_with_x ? ptr_or_null<T>(grad_weight) : nullptr,
                                            param_sums_with_x ? ptr_or_null<T>(grad_bias) : nullptr, rows, d,
                                            x.device(), stream_);
      return;
    }
    RowGradSums<T, I> op{g, xp, mean, invstd, w, I(d), I(l), I(groups), I(per_group), ptr<T>(s1), ptr<T>(s2)};
    reduce_rows<Sums<AccT<T>>, I>(I(rows), I(d), op, stream_);
    normalize_backward_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        g, xp, mean, invstd, w, ptr<const T>(s1), ptr<const T>(s2), T(1) / T(d), ptr<T>(*grad_x),
        NormIndex<I>{I(l), I(channels), I(d), I(rows)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_backward_kernel);
  });
}

}  // namespace minidl
