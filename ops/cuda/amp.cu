// GradScaler's passes on CUDA (PyTorch's _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_): the inf/NaN check and the unscale in one multi-tensor pass, and the scale
// update in one single-thread kernel. Neither syncs with the host, so a scaled step can be captured.
#include <cstddef>

#include "core/half.h"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

// Up to kMaxTensors gradients per launch: block b works on the gradient whose block range holds b,
// kChunk elements of it. The list travels by value as the kernel's argument (under 4 KB).
constexpr int kMaxTensors = 48;
constexpr int kPerThread = 4;
constexpr int64_t kChunk = kPerThread * kThreads;

template <class T>
struct GradList {
  T* p[kMaxTensors];
  int64_t n[kMaxTensors];
  unsigned block_start[kMaxTensors + 1];
  int count;
};

template <class T>
__global__ void unscale_kernel(GradList<T> list, float* found_inf, const float* inv_scale) {
  int t = 0;
  while (t + 1 < list.count && blockIdx.x >= list.block_start[t + 1]) ++t;
  T* __restrict__ p = list.p[t];
  const int64_t n = list.n[t];
  const int64_t begin = (blockIdx.x - list.block_start[t]) * kChunk + threadIdx.x;
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
      GradList<T> list{};
      unsigned blocks = 0;
      auto flush = [&] {
        if (list.count == 0) return;
        list.block_start[list.count] = blocks;
        unscale_kernel<T><<<blocks, kThreads, 0, stream_>>>(list, ptr<float>(found_inf), ptr<const float>(inv_scale));
        CUDA_LAUNCH_CHECK(unscale_kernel);
        list = GradList<T>{};
        blocks = 0;
      };
      for (const Tensor& g : grads) {
        if (g.dtype() != dtype || g.numel() == 0) continue;
        MINIDL_CHECK(g.is_contiguous(), "amp_non_finite_check_and_unscale: expected contiguous gradients");
        const int k = list.count++;
        list.p[k] = ptr<T>(g);
        list.n[k] = g.numel();
        list.block_start[k] = blocks;
        blocks += static_cast<unsigned>((g.numel() + kChunk - 1) / kChunk);
        if (list.count == kMaxTensors) flush();
      }
      flush();
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

}  // namespace minidl
