// Average pooling on CUDA. Forward: one thread per output, summing its window. Backward: one thread
// per input element, gathering grad_out / divisor from every window that covers it, so overlapping
// windows need no atomics and the sum order is fixed. Sums accumulate in AccT (double for float),
// as on the CPU. Index arithmetic is 32-bit wherever the sizes allow (Geo<int32_t>, see
// ops/cuda/max_pool2d.cu for why).
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

// One axis of a window: image positions [begin, end) and the length clipped to the padded image
// (count_include_pad's divisor), as the CPU kernels define it.
template <class I>
struct Window {
  I begin, end, padded_len;
};

template <class I>
__device__ __forceinline__ Window<I> pool_window(I o, I stride, I pad, I k, I in) {
  const I start = o * stride - pad;
  const I stop = min(start + k, in + pad);
  return {max(start, I(0)), min(stop, in), stop - start};
}

template <class I>
__device__ __forceinline__ Window<I> adaptive_window(I o, I in, I out) {
  const I begin = o * in / out, end = ((o + 1) * in + out - 1) / out;
  return {begin, end, end - begin};
}

template <class I>
__device__ __forceinline__ I pool_divisor(const Window<I>& h, const Window<I>& w, bool count_include_pad) {
  return count_include_pad ? h.padded_len * w.padded_len : (h.end - h.begin) * (w.end - w.begin);
}

template <class T, class I>
__global__ void avg_pool_kernel(const T* x, T* out, Geo<I> g, bool count_include_pad, I total) {
  const I L = g.out_h * g.out_w;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I plane = idx / L, p = idx - plane * L;
    const I oh = p / g.out_w, ow = p - oh * g.out_w;
    const Window<I> h = pool_window(oh, g.stride_h, g.pad_h, g.kernel_h, g.height);
    const Window<I> w = pool_window(ow, g.stride_w, g.pad_w, g.kernel_w, g.width);
    const T* src = x + int64_t(plane) * g.height * g.width;
    AccT<T> s = 0;
    for (I ih = h.begin; ih < h.end; ++ih)
      for (I iw = w.begin; iw < w.end; ++iw) s += src[ih * g.width + iw];
    const I div = pool_divisor(h, w, count_include_pad);
    out[idx] = div > 0 ? T(s / AccT<T>(div)) : T(0);
  }
}

template <class T, class I>
__global__ void avg_pool_backward_kernel(const T* grad_out, T* grad_in, Geo<I> g, bool count_include_pad, I total) {
  const I L = g.out_h * g.out_w, HW = g.height * g.width;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I plane = idx / HW, self = idx - plane * HW;
    const I h = self / g.width, w = self - h * g.width;
    // Window oh covers h when oh * stride - pad <= h < oh * stride - pad + k.
    const I hh = h + g.pad_h, ww = w + g.pad_w;
    const I oh_lo = hh < g.kernel_h ? 0 : (hh - g.kernel_h) / g.stride_h + 1;
    const I oh_hi = min(hh / g.stride_h, g.out_h - 1);
    const I ow_lo = ww < g.kernel_w ? 0 : (ww - g.kernel_w) / g.stride_w + 1;
    const I ow_hi = min(ww / g.stride_w, g.out_w - 1);
    const T* go = grad_out + int64_t(plane) * L;
    AccT<T> s = 0;
    for (I oh = oh_lo; oh <= oh_hi; ++oh) {
      const Window<I> wh = pool_window(oh, g.stride_h, g.pad_h, g.kernel_h, g.height);
      for (I ow = ow_lo; ow <= ow_hi; ++ow) {
        const Window<I> ww_ = pool_window(ow, g.stride_w, g.pad_w, g.kernel_w, g.width);
        const I div = pool_divisor(wh, ww_, count_include_pad);
        if (div > 0) s += T(AccT<T>(go[oh * g.out_w + ow]) / AccT<T>(div));
      }
    }
    grad_in[idx] = T(s);
  }
}

template <class T, class I>
__global__ void adaptive_avg_pool_kernel(const T* x, T* out, I H, I W, I OH, I OW, I total) {
  const I L = OH * OW;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I plane = idx / L, p = idx - plane * L;
    const I oh = p / OW, ow = p - oh * OW;
    const Window<I> h = adaptive_window(oh, H, OH), w = adaptive_window(ow, W, OW);
    const T* src = x + int64_t(plane) * H * W;
    AccT<T> s = 0;
    for (I ih = h.begin; ih < h.end; ++ih)
      for (I iw = w.begin; iw < w.end; ++iw) s += src[ih * W + iw];
    out[idx] = T(s / AccT<T>(pool_divisor(h, w, false)));
  }
}

// Output row o covers input row i exactly when floor(i * OH / H) <= o < ceil((i + 1) * OH / H).
template <class T, class I>
__global__ void adaptive_avg_pool_backward_kernel(const T* grad_out, T* grad_in, I H, I W, I OH, I OW, I total) {
  const I L = OH * OW, HW = H * W;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I plane = idx / HW, self = idx - plane * HW;
    const I h = self / W, w = self - h * W;
    const I oh_lo = h * OH / H, oh_end = ((h + 1) * OH + H - 1) / H;
    const I ow_lo = w * OW / W, ow_end = ((w + 1) * OW + W - 1) / W;
    const T* go = grad_out + int64_t(plane) * L;
    AccT<T> s = 0;
    for (I oh = oh_lo; oh < oh_end; ++oh) {
      const Window<I> wh = adaptive_window(oh, H, OH);
      for (I ow = ow_lo; ow < ow_end; ++ow) {
        const Window<I> ww = adaptive_window(ow, W, OW);
        s += T(AccT<T>(go[oh * OW + ow]) / AccT<T>(pool_divisor(wh, ww, false)));
      }
    }
    grad_in[idx] = T(s);
  }
}

// 32-bit indices when every index (including the products inside the window arithmetic) fits.
bool fits_int32(int64_t a, int64_t b) { return a <= INT32_MAX / 4 && b <= INT32_MAX / 4; }

}  // namespace

void CudaKernels::avg_pool2d(const Tensor& x, const ConvGeometry& g, bool count_include_pad, Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    if (fits_int32(x.numel(), total)) {
      avg_pool_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(x), ptr<T>(out), Geo<int32_t>(g), count_include_pad, static_cast<int32_t>(total));
    } else {
      avg_pool_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(x), ptr<T>(out), Geo<int64_t>(g), count_include_pad, total);
    }
    CUDA_LAUNCH_CHECK(avg_pool_kernel);
  });
}

void CudaKernels::avg_pool2d_backward(const Tensor& grad_out, const ConvGeometry& g, bool count_include_pad,
                                      Tensor& grad_in) {
  const int64_t total = grad_in.numel();
  if (total == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_out.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    if (fits_int32(total, grad_out.numel())) {
      avg_pool_backward_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<T>(grad_in), Geo<int32_t>(g), count_include_pad, static_cast<int32_t>(total));
    } else {
      avg_pool_backward_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<T>(grad_in), Geo<int64_t>(g), count_include_pad, total);
    }
    CUDA_LAUNCH_CHECK(avg_pool_backward_kernel);
  });
}

void CudaKernels::adaptive_avg_pool2d(const Tensor& x, Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    // (o + 1) * in is the largest product the window arithmetic forms.
    if (fits_int32(x.numel(), total) && fits_int32((OH + 1) * H, (OW + 1) * W)) {
      adaptive_avg_pool_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(x), ptr<T>(out), int32_t(H), int32_t(W), int32_t(OH), int32_t(OW), static_cast<int32_t>(total));
    } else {
      adaptive_avg_pool_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(x), ptr<T>(out),
                                                                                         H, W, OH, OW, total);
    }
    CUDA_LAUNCH_CHECK(adaptive_avg_pool_kernel);
  });
}

void CudaKernels::adaptive_avg_pool2d_backward(const Tensor& grad_out, Tensor& grad_in) {
  const int64_t total = grad_in.numel();
  if (total == 0) return;
  const int64_t H = grad_in.size(2), W = grad_in.size(3), OH = grad_out.size(2), OW = grad_out.size(3);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_out.dtype(), "adaptive_avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    if (fits_int32(total, grad_out.numel()) && fits_int32((OH + 1) * H, (OW + 1) * W)) {
      adaptive_avg_pool_backward_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<T>(grad_in), int32_t(H), int32_t(W), int32_t(OH), int32_t(OW),
          static_cast<int32_t>(total));
    } else {
      adaptive_avg_pool_backward_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<T>(grad_in), H, W, OH, OW, total);
    }
    CUDA_LAUNCH_CHECK(adaptive_avg_pool_backward_kernel);
  });
}

}  // namespace minidl
