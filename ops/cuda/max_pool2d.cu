// Max pooling on CUDA. Forward: one thread per output, padding as -infinity, the index of the
// window's first maximum (a NaN wins), as the CPU kernel. Backward: one thread per input element,
// gathering grad_out from every window whose recorded index is that element: overlapping windows
// need no atomics and the sum order is fixed.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T>
__global__ void max_pool_kernel(const T* x, T* out, int64_t* indices, ConvGeometry g, int64_t total) {
  const int64_t L = g.out_h * g.out_w;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = idx / L, p = idx - plane * L;
    const int64_t oh = p / g.out_w, ow = p - oh * g.out_w;
    const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    const T* src = x + plane * g.height * g.width;
    T best = -d_infinity<T>();
    int64_t best_i = -1;
    for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
      const int64_t ih = h0 + ki * g.dilation_h;
      if (ih < 0 || ih >= g.height) continue;
      for (int64_t kj = 0; kj < g.kernel_w; ++kj) {
        const int64_t iw = w0 + kj * g.dilation_w;
        if (iw < 0 || iw >= g.width) continue;
        const T v = src[ih * g.width + iw];
        if (best_i < 0 || v > best || d_isnan(v)) {
          best = v;
          best_i = ih * g.width + iw;
        }
      }
    }
    out[idx] = best;
    indices[idx] = best_i;
  }
}

template <class T>
__global__ void max_pool_backward_kernel(const T* grad_out, const int64_t* indices, T* grad_in, ConvGeometry g,
                                         int64_t total) {
  const int64_t L = g.out_h * g.out_w;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t w = idx % g.width;
    const int64_t h = (idx / g.width) % g.height;
    const int64_t plane = idx / (g.width * g.height);
    const int64_t self = h * g.width + w;
    const T* go = grad_out + plane * L;
    const int64_t* ix = indices + plane * L;
    T s = 0;
    for (int64_t ki = 0; ki < g.kernel_h; ++ki) {
      const int64_t hh = h + g.pad_h - ki * g.dilation_h;
      if (hh < 0 || hh % g.stride_h != 0) continue;
      const int64_t oh = hh / g.stride_h;
      if (oh >= g.out_h) continue;
      for (int64_t kj = 0; kj < g.kernel_w; ++kj) {
        const int64_t ww = w + g.pad_w - kj * g.dilation_w;
        if (ww < 0 || ww % g.stride_w != 0) continue;
        const int64_t ow = ww / g.stride_w;
        if (ow >= g.out_w) continue;
        const int64_t o = oh * g.out_w + ow;
        if (ix[o] == self) s += go[o];
      }
    }
    grad_in[idx] = s;
  }
}

}  // namespace

void CudaKernels::max_pool2d(const Tensor& x, const ConvGeometry& g, Tensor& out, Tensor& indices) {
  const int64_t total = out.numel();
  if (total == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    max_pool_kernel<T><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(x), ptr<T>(out),
                                                                    ptr<int64_t>(indices), g, total);
    CUDA_LAUNCH_CHECK(max_pool_kernel);
  });
}

void CudaKernels::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const ConvGeometry& g,
                                      Tensor& grad_in) {
  const int64_t total = grad_in.numel();
  if (total == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_out.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward_kernel<T><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const int64_t>(indices), ptr<T>(grad_in), g, total);
    CUDA_LAUNCH_CHECK(max_pool_backward_kernel);
  });
}

}  // namespace minidl
