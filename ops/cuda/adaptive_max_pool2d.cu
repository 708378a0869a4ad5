// Adaptive max pooling on CUDA: one thread per output, scanning its window in the CPU kernel's
// order, so values and indices match it exactly. Index arithmetic is 32-bit where the sizes allow.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T, class I>
__global__ void adaptive_max_pool_kernel(const T* x, T* out, int64_t* indices, I H, I W, I OH, I OW, I total) {
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I plane = idx / (OH * OW), p = idx - plane * (OH * OW);
    const I oh = p / OW, ow = p - oh * OW;
    const I h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
    const I w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
    const T* src = x + int64_t(plane) * H * W;
    I best_i = h0 * W + w0;
    T best = src[best_i];
    for (I ih = h0; ih < h1; ++ih)
      for (I iw = w0; iw < w1; ++iw) {
        const T v = src[ih * W + iw];
        if (!d_isnan(best) && (v > best || d_isnan(v))) {
          best = v;
          best_i = ih * W + iw;
        }
      }
    out[idx] = best;
    indices[idx] = best_i;
  }
}

bool fits_int32(int64_t a, int64_t b) { return a <= INT32_MAX / 4 && b <= INT32_MAX / 4; }

}  // namespace

void CudaKernels::adaptive_max_pool2d(const Tensor& x, Tensor& out, Tensor& indices) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "adaptive_max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    // (o + 1) * in is the largest product the window arithmetic forms.
    if (fits_int32(x.numel(), total) && fits_int32((OH + 1) * H, (OW + 1) * W)) {
      adaptive_max_pool_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(x), ptr<T>(out), ptr<int64_t>(indices), int32_t(H), int32_t(W), int32_t(OH), int32_t(OW),
          static_cast<int32_t>(total));
    } else {
      adaptive_max_pool_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(x), ptr<T>(out), ptr<int64_t>(indices), H, W, OH, OW, total);
    }
    CUDA_LAUNCH_CHECK(adaptive_max_pool_kernel);
  });
}

}  // namespace minidl
