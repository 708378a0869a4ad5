// A convolution's fused epilogues on CUDA (ops/conv2d_relu.cpp), over [N, C, H, W] tensors.
//
// The forwards are elementwise: one thread per output, with 32-bit indices where they fit.
// The backwards also sum the bias gradient per channel: block (c, s) covers channel c of the images
// in slice s, leaves its sum in a scratch row, and the last block of the channel adds the slices in
// order (last_block_of_group), so one launch does it all and the result is deterministic. Sums of
// float accumulate in double, as the reductions do.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kBlock = 256;
constexpr int64_t kMaxSlices = 64;

template <class T>
__device__ __forceinline__ T relu_of(T v) {
  return v > T(0) || d_isnan(v) ? v : T(0);  // NaN stays NaN, as relu passes it on
}

// y may be x (in place).
template <class T, bool Relu, class I>
__global__ void conv_bias_act_kernel(const T* x, const T* __restrict__ bias, T* y, I n, I area, I channels) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    T v = x[i] + (bias ? bias[(i / area) % channels] : T(0));
    y[i] = Relu ? relu_of(v) : v;
  }
}

// Adds the block's `sum` for channel blockIdx.x into grad_bias, through the slices' scratch row when
// the images are split over several blocks (gridDim.y).
template <class T>
__device__ void finish_channel_sum(AccT<T> sum, T* grad_bias, AccT<T>* slice_sums, unsigned* counters) {
  __shared__ AccT<T> warp_sums[kBlock / 32];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    sum = 0;
    for (int w = 0; w < kBlock / 32; ++w) sum += warp_sums[w];
  }
  const unsigned c = blockIdx.x, channels = gridDim.x;
  if (gridDim.y == 1) {
    if (threadIdx.x == 0) grad_bias[c] = static_cast<T>(sum);
    return;
  }
  if (threadIdx.x == 0) slice_sums[blockIdx.y * channels + c] = sum;
  if (!last_block_of_group(counters, c, gridDim.y)) return;
  if (threadIdx.x == 0) {
    AccT<T> total = 0;
    for (unsigned s = 0; s < gridDim.y; ++s) total += __ldcg(&slice_sums[s * channels + c]);
    grad_bias[c] = static_cast<T>(total);
  }
}

template <class T>
__global__ void conv_bias_relu_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ y,
                                               T* __restrict__ grad_pre, T* grad_bias, int64_t images,
                                               int64_t images_per_slice, int64_t area, AccT<T>* slice_sums,
                                               unsigned* counters) {
  const int64_t c = blockIdx.x, channels = gridDim.x;
  const int64_t begin = blockIdx.y * images_per_slice, end = min(images, begin + images_per_slice);
  AccT<T> sum = 0;
  for (int64_t n = begin; n < end; ++n) {
    const int64_t plane = (n * channels + c) * area;
    for (int64_t i = threadIdx.x; i < area; i += kBlock) {
      const T g = y[plane + i] > T(0) ? grad_out[plane + i] : T(0);
      grad_pre[plane + i] = g;
      sum += g;
    }
  }
  if (grad_bias) finish_channel_sum(sum, grad_bias, slice_sums, counters);
}

template <class T>
__global__ void bias_relu_max_pool2d_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                                            int64_t n, int64_t channels, int H, int W, int oh, int ow, int k) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n; o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = o / (int64_t(oh) * ow);
    const int r = static_cast<int>(o - plane * oh * ow), i = r / ow, j = r - i * ow;
    const T shift = bias ? bias[plane % channels] : T(0);
    const T* s = x + plane * H * W + int64_t(i * k) * W + j * k;
    // As max_pool2d over relu(x + b): the first maximum wins and a NaN wins over numbers.
    T best = s[0] + shift;
    for (int di = 0; di < k; ++di)
      for (int dj = 0; dj < k; ++dj) {
        const T v = s[di * W + dj] + shift;
        if (v > best || d_isnan(v)) best = v;
      }
    out[o] = relu_of(best);
  }
}

template <class T>
__global__ void bias_relu_max_pool2d_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                                                     const T* __restrict__ bias, const T* __restrict__ pooled,
                                                     T* __restrict__ grad_pre, T* grad_bias, int64_t images,
                                                     int64_t images_per_slice, int H, int W, int oh, int ow, int k,
                                                     AccT<T>* slice_sums, unsigned* counters) {
  const int64_t c = blockIdx.x, channels = gridDim.x;
  const int64_t begin = blockIdx.y * images_per_slice, end = min(images, begin + images_per_slice);
  const T shift = bias ? bias[c] : T(0);
  const int pooled_area = oh * ow;
  const bool ragged = oh * k != H || ow * k != W;  // rows or columns outside every window
  AccT<T> sum = 0;
  for (int64_t n = begin; n < end; ++n) {
    const int64_t plane = n * channels + c;
    const T* s = x + plane * H * W;
    T* d = grad_pre + plane * H * W;
    for (int r = threadIdx.x; r < pooled_area; r += kBlock) {
      const int i = r / ow, j = r - i * ow;
      const int64_t o = plane * pooled_area + r;
      const T g = pooled[o] > T(0) ? grad_out[o] : T(0);  // ReLU passes nothing where its output is 0
      int best_at = 0;
      if (g != T(0)) {
        T best = s[(i * k) * W + j * k] + shift;
        for (int di = 0; di < k; ++di)
          for (int dj = 0; dj < k; ++dj) {
            const T v = s[(i * k + di) * W + j * k + dj] + shift;
            if (v > best) best = v, best_at = di * k + dj;
          }
      }
      for (int di = 0; di < k; ++di)
        for (int dj = 0; dj < k; ++dj) d[(i * k + di) * W + j * k + dj] = di * k + dj == best_at ? g : T(0);
      sum += g;
    }
    if (ragged) {
      for (int e = threadIdx.x; e < H * W; e += kBlock) {
        const int h = e / W, w = e - h * W;
        if (h >= oh * k || w >= ow * k) d[e] = T(0);
      }
    }
  }
  if (grad_bias) finish_channel_sum(sum, grad_bias, slice_sums, counters);
}

// Blocks per channel: enough blocks in all to fill the GPU, each with some images to loop over.
int64_t slices_for(int64_t images, int64_t channels) {
  const int64_t wanted = (1024 + channels - 1) / channels;
  return std::clamp<int64_t>(std::min(wanted, images), 1, kMaxSlices);
}

}  // namespace

void CudaKernels::conv_bias_act(const Tensor& x, const Tensor* bias, bool relu, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  const int64_t area = x.size(2) * x.size(3), channels = x.size(1);
  dispatch_floating(x.dtype(), "conv_bias_act", [&](auto tag) {
    using T = decltype(tag);
    const T* b = bias ? ptr<const T>(*bias) : nullptr;
    const auto launch = [&](auto index) {
      using I = decltype(index);
      if (relu)
        conv_bias_act_kernel<T, true, I><<<blocks_for(n), kBlock, 0, stream_>>>(ptr<const T>(x), b, ptr<T>(y), I(n),
                                                                                 I(area), I(channels));
      else
        conv_bias_act_kernel<T, false, I><<<blocks_for(n), kBlock, 0, stream_>>>(ptr<const T>(x), b, ptr<T>(y), I(n),
                                                                                  I(area), I(channels));
    };
    if (n < (int64_t{1} << 31)) launch(int32_t{});
    else launch(int64_t{});
    CUDA_LAUNCH_CHECK(conv_bias_act_kernel);
  });
}

void CudaKernels::conv_bias_relu_backward(const Tensor& grad_out, const Tensor& y, Tensor& grad_pre,
                                          Tensor* grad_bias) {
  const int64_t images = y.size(0), channels = y.size(1), area = y.size(2) * y.size(3);
  if (y.numel() == 0) {
    if (grad_bias) fill(*grad_bias, 0);
    return;
  }
  cuda::DeviceGuard guard(device_);
  int64_t slices = slices_for(images, channels);
  if (channels > kMaxCounterGroups) slices = 1;
  const int64_t per_slice = (images + slices - 1) / slices;
  slices = (images + per_slice - 1) / per_slice;
  dispatch_floating(y.dtype(), "conv_bias_relu_backward", [&](auto tag) {
    using T = decltype(tag);
    Tensor scratch;
    if (grad_bias && slices > 1) scratch = Tensor::empty({slices, channels}, dtype_of<AccT<T>>(), y.device());
    const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(slices));
    conv_bias_relu_backward_kernel<T><<<grid, kBlock, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const T>(y), ptr<T>(grad_pre), grad_bias ? ptr<T>(*grad_bias) : nullptr, images,
        per_slice, area, scratch.defined() ? ptr<AccT<T>>(scratch) : nullptr,
        scratch.defined() ? block_counters(device_, stream_) : nullptr);
    CUDA_LAUNCH_CHECK(conv_bias_relu_backward_kernel);
  });
}

void CudaKernels::bias_relu_max_pool2d(const Tensor& x, const Tensor* bias, int64_t k, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "bias_relu_max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    bias_relu_max_pool2d_kernel<T><<<blocks_for(n), kBlock, 0, stream_>>>(
        ptr<const T>(x), bias ? ptr<const T>(*bias) : nullptr, ptr<T>(out), n, x.size(1), static_cast<int>(x.size(2)),
        static_cast<int>(x.size(3)), static_cast<int>(out.size(2)), static_cast<int>(out.size(3)),
        static_cast<int>(k));
    CUDA_LAUNCH_CHECK(bias_relu_max_pool2d_kernel);
  });
}

void CudaKernels::bias_relu_max_pool2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor* bias,
                                                const Tensor& out, int64_t k, Tensor& grad_pre, Tensor* grad_bias) {
  const int64_t images = x.size(0), channels = x.size(1);
  if (x.numel() == 0) {
    if (grad_bias) fill(*grad_bias, 0);
    return;
  }
  cuda::DeviceGuard guard(device_);
  int64_t slices = slices_for(images, channels);
  if (channels > kMaxCounterGroups) slices = 1;
  const int64_t per_slice = (images + slices - 1) / slices;
  slices = (images + per_slice - 1) / per_slice;
  dispatch_floating(x.dtype(), "bias_relu_max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    Tensor scratch;
    if (grad_bias && slices > 1) scratch = Tensor::empty({slices, channels}, dtype_of<AccT<T>>(), x.device());
    const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(slices));
    bias_relu_max_pool2d_backward_kernel<T><<<grid, kBlock, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const T>(x), bias ? ptr<const T>(*bias) : nullptr, ptr<const T>(out),
        ptr<T>(grad_pre), grad_bias ? ptr<T>(*grad_bias) : nullptr, images, per_slice, static_cast<int>(x.size(2)),
        static_cast<int>(x.size(3)), static_cast<int>(out.size(2)), static_cast<int>(out.size(3)),
        static_cast<int>(k), scratch.defined() ? ptr<AccT<T>>(scratch) : nullptr,
        scratch.defined() ? block_counters(device_, stream_) : nullptr);
    CUDA_LAUNCH_CHECK(bias_relu_max_pool2d_backward_kernel);
  });
}

}  // namespace minidl
