// GradScaler's passes on CUDA (PyTorch's _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_): the inf/NaN check and the unscale in one multi-tensor pass, and the scale
// update in one single-thread kernel. Neither syncs with the host, so a scaled step can be captured.
#include <cstddef>

#include "core/half.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/multi_tensor.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::multi_tensor;

// Gradients per launch (one list: under 1 KB of kernel argument).
constexpr int kMaxTensors = 48;
using GradLists = TensorLists<1, kMaxTensors>;

template <class T>
__global__ void unscale_kernel(GradLists list, float* found_inf, const float* inv_scale) {
  const int t = tensor_of_block(list);
  T* __restrict__ p = static_cast<T*>(list.ptr[0][t]);
  const int64_t n = list.numel[t];
  const int64_t begin = chunk_begin(list, t) + threadIdx.x;
  using C = compute_t<T>;
  const C inv = static_cast<C>(*inv_scale);
  bool bad = false;
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = begin + int64_t(u) * blockDim.x;
    if (i < n) {
      const C v = static_cast<C>(p[i]);
      bad |= !isfinite(v);
      p[i] = static_cast<T>(v * inv);
    }
  }
  // One store per block that saw an inf or NaN; every writer stores the same 1, so no atomics.
  if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;
}

// Master weights to their 16-bit copies: list 0 the float32 sources, list 1 the destinations.
constexpr int kMaxCopies = 24;
using CopyLists = TensorLists<2, kMaxCopies>;

template <class T>
__global__ void copy_to_16bit_kernel(CopyLists list) {
  const int t = tensor_of_block(list);
  const float* __restrict__ src = static_cast<const float*>(list.ptr[0][t]);
  T* __restrict__ dst = static_cast<T*>(list.ptr[1][t]);
  const int64_t n = list.numel[t];
  const int64_t begin = chunk_begin(list, t) + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = begin + int64_t(u) * blockDim.x;
    if (i < n) dst[i] = static_cast<T>(src[i]);
  }
}

__global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                                    double backoff_factor, int64_t growth_interval) {
  if (*found_inf != 0.0f) {
    *scale = static_cast<float>(*scale * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  const int32_t successful = *growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(*scale * growth_factor);
    if (isfinite(grown)) *scale = grown;  // as PyTorch: the scale grows only while it stays finite
    *growth_tracker = 0;
  } else {
    *growth_tracker = successful;
  }
}

}  // namespace

void CudaKernels::amp_non_finite_check_and_unscale(std::vector<Tensor>& grads, Tensor& found_inf,
                                                   const Tensor& inv_scale) {
  cuda::DeviceGuard guard(device_);
  // Launched per dtype present (float32 alone, usually: one launch per kMaxTensors gradients).
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    dispatch_floating_and_half(dtype, "amp_non_finite_check_and_unscale", [&](auto tag) {
      using T = decltype(tag);
      for_each_list<1, kMaxTensors>(
          grads.size(),
          [&](size_t i) -> TensorEntry<1> {
            const Tensor& g = grads[i];
            if (g.dtype() != dtype || g.numel() == 0) return {};
            MINIDL_CHECK(g.is_contiguous(), "amp_non_finite_check_and_unscale: expected contiguous gradients");
            return {{ptr<T>(g)}, g.numel()};
          },
          [&](const GradLists& list, unsigned blocks) {
            unscale_kernel<T><<<blocks, kThreads, 0, stream_>>>(list, ptr<float>(found_inf), ptr<const float>(inv_scale));
            CUDA_LAUNCH_CHECK(unscale_kernel);
          });
    });
  }
}

void CudaKernels::amp_update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                                   double backoff_factor, int64_t growth_interval) {
  cuda::DeviceGuard guard(device_);
  update_scale_kernel<<<1, 1, 0, stream_>>>(ptr<float>(scale), ptr<int32_t>(growth_tracker), ptr<const float>(found_inf),
                                            growth_factor, backoff_factor, growth_interval);
  CUDA_LAUNCH_CHECK(update_scale_kernel);
}

void CudaKernels::copy_multi(const std::vector<Tensor>& src, std::vector<Tensor>& dst) {
  MINIDL_CHECK(src.size() == dst.size(), "copy_multi: ", src.size(), " sources for ", dst.size(), " destinations");
  for (size_t i = 0; i < dst.size(); ++i)
    MINIDL_CHECK(is_reduced_floating(dst[i].dtype()), "copy_multi: expected 16-bit destinations, got ", dst[i].dtype());
  cuda::DeviceGuard guard(device_);
  for (DType dtype : {kBFloat16, kFloat16}) {
    dispatch_floating_and_half(dtype, "copy_multi", [&](auto tag) {
      using T = decltype(tag);
      if constexpr (is_16bit_float_v<T>) {
        for_each_list<2, kMaxCopies>(
            src.size(),
            [&](size_t i) -> TensorEntry<2> {  // the other dtype's tensors take no place
              const Tensor &s = src[i], &d = dst[i];
              if (d.dtype() != dtype || d.numel() == 0) return {};
              MINIDL_CHECK(s.dtype() == kFloat32 && s.shape() == d.shape() && s.is_contiguous() && d.is_contiguous(),
                           "copy_multi: expected contiguous float32 sources of their destinations' shapes, got ",
                           s.dtype(), " ", s.shape(), " for ", d.dtype(), " ", d.shape());
              return {{const_cast<void*>(s.raw_data()), d.raw_data()}, d.numel()};
            },
            [&](const CopyLists& list, unsigned blocks) {
              copy_to_16bit_kernel<T><<<blocks, kThreads, 0, stream_>>>(list);
              CUDA_LAUNCH_CHECK(copy_to_16bit_kernel);
            });
      }
    });
  }
}

}  // namespace minidl
