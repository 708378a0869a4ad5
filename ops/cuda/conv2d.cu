// im2col / col2im on CUDA; conv2d itself is these plus cuBLAS GEMM (ops/conv2d.cpp).
// im2col: one thread per element of cols [N, C*kh*kw, out_h*out_w]; adjacent threads write adjacent
// output positions. col2im: one thread per image element, gathering the (at most kh*kw) columns that
// read it, so no atomics are needed and the sum order is fixed (deterministic).
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T, class I>
__global__ void im2col_kernel(const T* x, T* cols, Geo<I> g, I total) {
  const I L = g.out_h * g.out_w, K = g.kernel_h * g.kernel_w;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I p = idx % L;
    const I row = idx / L;  // n * C*K + c * K + k
    const I k = row % K;
    const I plane = row / K;  // n * C + c
    const I ki = k / g.kernel_w, kj = k - ki * g.kernel_w;
    const I oh = p / g.out_w, ow = p - oh * g.out_w;
    const I h = oh * g.stride_h - g.pad_h + ki * g.dilation_h;
    const I w = ow * g.stride_w - g.pad_w + kj * g.dilation_w;
    cols[idx] = (h >= 0 && h < g.height && w >= 0 && w < g.width) ? x[(plane * g.height + h) * g.width + w] : T(0);
  }
}

template <class T, class I>
__global__ void col2im_kernel(const T* cols, T* x, Geo<I> g, I total) {
  const I L = g.out_h * g.out_w, K = g.kernel_h * g.kernel_w;
  for (I idx = blockIdx.x * I(blockDim.x) + threadIdx.x; idx < total; idx += I(gridDim.x) * blockDim.x) {
    const I w = idx % g.width;
    const I h = (idx / g.width) % g.height;
    const I plane = idx / (g.width * g.height);  // n * C + c
    const T* src = cols + static_cast<int64_t>(plane) * K * L;
    T s = 0;
    for (I ki = 0; ki < g.kernel_h; ++ki) {
      const I hh = h + g.pad_h - ki * g.dilation_h;  // = oh * stride_h
      if (hh < 0 || hh % g.stride_h != 0) continue;
      const I oh = hh / g.stride_h;
      if (oh >= g.out_h) continue;
      for (I kj = 0; kj < g.kernel_w; ++kj) {
        const I ww = w + g.pad_w - kj * g.dilation_w;
        if (ww < 0 || ww % g.stride_w != 0) continue;
        const I ow = ww / g.stride_w;
        if (ow >= g.out_w) continue;
        s += src[(ki * g.kernel_w + kj) * L + oh * g.out_w + ow];
      }
    }
    x[idx] = s;
  }
}

// Both buffers must be indexable in 32 bits for the 32-bit kernels, with room for the grid-stride
// step past the end (at most 65535 * 256) without overflow.
bool fits32(int64_t a, int64_t b) { return a < (int64_t{1} << 30) && b < (int64_t{1} << 30); }

}  // namespace

void CudaKernels::im2col(const Tensor& x, const ConvGeometry& g, Tensor& cols) {
  const int64_t total = cols.numel();
  if (total == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "im2col", [&](auto tag) {
    using T = decltype(tag);
    if (fits32(total, x.numel())) {
      im2col_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(x), ptr<T>(cols),
                                                                             Geo<int32_t>(g), int32_t(total));
    } else {
      im2col_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(x), ptr<T>(cols),
                                                                             Geo<int64_t>(g), total);
    }
    CUDA_LAUNCH_CHECK(im2col_kernel);
  });
}

void CudaKernels::col2im(const Tensor& cols, const ConvGeometry& g, Tensor& x_grad) {
  const int64_t total = x_grad.numel();
  if (total == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(cols.dtype(), "col2im", [&](auto tag) {
    using T = decltype(tag);
    if (fits32(total, cols.numel())) {
      col2im_kernel<T, int32_t><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(cols), ptr<T>(x_grad),
                                                                             Geo<int32_t>(g), int32_t(total));
    } else {
      col2im_kernel<T, int64_t><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(cols), ptr<T>(x_grad),
                                                                             Geo<int64_t>(g), total);
    }
    CUDA_LAUNCH_CHECK(col2im_kernel);
  });
}

}  // namespace minidl
