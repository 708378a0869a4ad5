// Nearest-neighbour upsampling on CUDA. Forward: one thread per output, copying its source. Backward:
// one thread per input element, summing the run of outputs that read it (src is non-decreasing, so
// the readers of row h are [first(h), first(h + 1))): no atomics, a fixed sum order. The source
// index is computed in float exactly as on the CPU (floor(o * scale), clamped), so both devices
// pick the same rows.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class I>
__device__ __forceinline__ I nearest_source(I o, float scale, I in) {
  return min(static_cast<I>(floorf(static_cast<float>(o) * scale)), in - 1);
}

// The first output o in [0, out] whose source is >= h (out when none): a float estimate, then
// corrected by the exact source function.
template <class I>
__device__ __forceinline__ I first_reader(I h, float scale, I in, I out) {
  if (h <= 0) return 0;
  if (h >= in) return out;
  const float estimate = ceilf(static_cast<float>(h) / scale);
  I o = estimate >= static_cast<float>(out) ? out : static_cast<I>(estimate);
  while (o > 0 && nearest_source(o - 1, scale, in) >= h) --o;
  while (o < out && nearest_source(o, scale, in) < h) ++o;
  return o;
}

template <class T, class I>
__global__ void upsample_nearest_kernel(const T* x, T* out, I H, I W, I OH, I OW, float scale_h, float scale_w,
                                        I total) {
  const I L = OH * OW;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I plane = idx / L, p = idx - plane * L;
    const I oh = p / OW, ow = p - oh * OW;
    out[idx] = x[int64_t(plane) * H * W + nearest_source(oh, scale_h, H) * W + nearest_source(ow, scale_w, W)];
  }
}

template <class T, class I>
__global__ void upsample_nearest_backward_kernel(const T* grad_out, T* grad_in, I H, I W, I OH, I OW, float scale_h,
                                                 float scale_w, I total) {
  const I HW = H * W;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I plane = idx / HW, self = idx - plane * HW;
    const I h = self / W, w = self - h * W;
    const I oh0 = first_reader(h, scale_h, H, OH), oh1 = first_reader(h + 1, scale_h, H, OH);
    const I ow0 = first_reader(w, scale_w, W, OW), ow1 = first_reader(w + 1, scale_w, W, OW);
    const T* go = grad_out + int64_t(plane) * OH * OW;
    AccT<T> s = 0;
    for (I oh = oh0; oh < oh1; ++oh)
      for (I ow = ow0; ow < ow1; ++ow) s += go[oh * OW + ow];
    grad_in[idx] = T(s);
  }
}

bool fits_int32(int64_t a, int64_t b) { return a <= INT32_MAX && b <= INT32_MAX; }

}  // namespace

void CudaKernels::upsample_nearest2d(const Tensor& x, float scale_h, float scale_w, Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "upsample_nearest2d", [&](auto tag) {
    using T = decltype(tag);
    if (fits_int32(x.numel(), total)) {
      upsample_nearest_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(x), ptr<T>(out), int32_t(H), int32_t(W), int32_t(OH), int32_t(OW), scale_h, scale_w,
          static_cast<int32_t>(total));
    } else {
      upsample_nearest_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(x), ptr<T>(out), H, W, OH, OW, scale_h, scale_w, total);
    }
    CUDA_LAUNCH_CHECK(upsample_nearest_kernel);
  });
}

void CudaKernels::upsample_nearest2d_backward(const Tensor& grad_out, float scale_h, float scale_w, Tensor& grad_in) {
  const int64_t total = grad_in.numel();
  if (total == 0) return;
  const int64_t H = grad_in.size(2), W = grad_in.size(3), OH = grad_out.size(2), OW = grad_out.size(3);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_out.dtype(), "upsample_nearest2d_backward", [&](auto tag) {
    using T = decltype(tag);
    if (fits_int32(total, grad_out.numel())) {
      upsample_nearest_backward_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<T>(grad_in), int32_t(H), int32_t(W), int32_t(OH), int32_t(OW), scale_h, scale_w,
          static_cast<int32_t>(total));
    } else {
      upsample_nearest_backward_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<T>(grad_in), H, W, OH, OW, scale_h, scale_w, total);
    }
    CUDA_LAUNCH_CHECK(upsample_nearest_backward_kernel);
  });
}

}  // namespace minidl
