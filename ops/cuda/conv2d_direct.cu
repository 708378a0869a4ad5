// conv2d_relu over one input channel (a first layer on grey images, as MNIST's), in bfloat16 and
// float16, output channels-last: Kernels::conv2d_relu_direct and its backward (ops/conv2d_relu.cpp).
//
// cuDNN treats this as a GEMM whose inner dimension is the window (9 for 3 x 3): too short to feed
// its tensor cores, so each pass costs as much as a deep layer's. At the MNIST CNN's first layer,
// batch 512, bfloat16 on an H200, its forward took 44 us and its weight gradient 110 us, plus 42 and
// 74 us of epilogue passes (bias and ReLU, their backward); each direction here is one pass over the
// output, which is what bounds it. Products accumulate in float32 and each output is rounded once.
//
// Forward: thread e makes the Pack (8 channels) e % packs of output pixel e / packs, reading the
// pixel's window once (its neighbours in the warp read the same words) and the weights from shared
// memory. Backward (the input needs no gradient at a first layer): thread t keeps channel t % O's
// window and bias sums over the pixels it visits; the block adds its threads' sums in a fixed
// order, leaves one row of partial sums, and the last block adds the rows in block order, so the
// result does not depend on scheduling.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kBlock = 256;
constexpr int kMaxWindow = 25;           // up to 5 x 5
constexpr int kMaxChannels = 256;        // the backward's threads split a block's 256 evenly
constexpr unsigned kBackwardBlocks = 264;  // a few per SM: each block's partial row costs the last one a read

template <class T>
struct alignas(16) Pack8 {
  T v[8];
};

// The window of output pixel (n, i, j) from x [N, 1, H, W] as float, tap t = di * kw + dj; zeros in
// the padding.
template <class T>
__device__ __forceinline__ void read_window(const T* __restrict__ x, const Geo<int>& g, int64_t n, int i, int j,
                                           float* window) {
  const int kk = g.kernel_h * g.kernel_w;
  for (int t = 0; t < kk; ++t) {
    const int di = t / g.kernel_w, dj = t - di * g.kernel_w;
    const int h = i * g.stride_h - g.pad_h + di * g.dilation_h, w = j * g.stride_w - g.pad_w + dj * g.dilation_w;
    window[t] = h >= 0 && h < g.height && w >= 0 && w < g.width ? float(x[(n * g.height + h) * g.width + w]) : 0.f;
  }
}

template <class T>
__global__ void conv2d_relu_direct_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                                          const T* __restrict__ bias, T* __restrict__ y, int64_t pixels, int channels,
                                          Geo<int> g) {
  __shared__ float w_s[kMaxChannels * kMaxWindow], b_s[kMaxChannels];
  const int kk = g.kernel_h * g.kernel_w;
  for (int e = threadIdx.x; e < channels * kk; e += blockDim.x) w_s[e] = float(weight[e]);
  for (int c = threadIdx.x; c < channels; c += blockDim.x) b_s[c] = bias ? float(bias[c]) : 0.f;
  __syncthreads();
  const int packs = channels / 8, area = g.out_h * g.out_w;
  float window[kMaxWindow];
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < pixels * packs;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pixel = e / packs;
    const int c0 = int(e - pixel * packs) * 8;
    const int64_t n = pixel / area;
    const int r = int(pixel - n * area), i = r / g.out_w, j = r - i * g.out_w;
    read_window(x, g, n, i, j, window);
    Pack8<T> out;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float* w = w_s + (c0 + k) * kk;
      float acc = b_s[c0 + k];
      for (int t = 0; t < kk; ++t) acc = fmaf(w[t], window[t], acc);
      out.v[k] = T(acc > 0.f || acc != acc ? acc : 0.f);  // ReLU; NaN passes on
    }
    reinterpret_cast<Pack8<T>*>(y)[e] = out;
  }
}

template <class T>
__global__ void conv2d_relu_direct_backward_kernel(const T* __restrict__ grad_y, const T* __restrict__ y,
                                                   const T* __restrict__ x, int64_t pixels, int channels, Geo<int> g,
                                                   float* block_sums, unsigned* counters, T* grad_weight,
                                                   T* grad_bias) {
  const int kk = g.kernel_h * g.kernel_w, sums = kk + 1;  // the window's taps, then the bias
  const int c = threadIdx.x % channels, rows = blockDim.x / channels, area = g.out_h * g.out_w;
  float acc[kMaxWindow + 1] = {};
  float window[kMaxWindow];
  for (int64_t pixel = blockIdx.x * int64_t(rows) + threadIdx.x / channels; pixel < pixels;
       pixel += int64_t(gridDim.x) * rows) {
    const int64_t at = pixel * channels + c;
    const float gv = y[at] > T(0) ? float(grad_y[at]) : 0.f;  // through the ReLU
    const int64_t n = pixel / area;
    const int r = int(pixel - n * area), i = r / g.out_w, j = r - i * g.out_w;
    read_window(x, g, n, i, j, window);
    for (int t = 0; t < kk; ++t) acc[t] = fmaf(gv, window[t], acc[t]);
    acc[kk] += gv;
  }
  // The block's sums per (channel, tap): its rows of threads added in order.
  extern __shared__ float partial[];  // [blockDim.x][sums]
  for (int t = 0; t < sums; ++t) partial[threadIdx.x * sums + t] = acc[t];
  __syncthreads();
  const int total = channels * sums;
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int ch = e / sums, t = e - ch * sums;
    float s = 0;
    for (int row = 0; row < rows; ++row) s += partial[(row * channels + ch) * sums + t];
    block_sums[blockIdx.x * int64_t(total) + e] = s;
  }
  if (!last_block_of_group(counters, 0, gridDim.x)) return;
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    float s = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) s += __ldcg(&block_sums[b * int64_t(total) + e]);
    const int ch = e / sums, t = e - ch * sums;
    if (t < kk) grad_weight[ch * kk + t] = T(s);
    else if (grad_bias) grad_bias[ch] = T(s);
  }
}

// Whether the direct kernels take this convolution: one input channel, a window of at most 5 x 5,
// a 16-bit dtype, output channels a multiple of 8 (the forward's pack) dividing 256 (the
// backward's block), 32-bit pixel indices.
bool direct_applies(const Tensor& x, int64_t channels, const ConvGeometry& g) {
  const int64_t pixels = x.size(0) * g.out_h * g.out_w;
  return x.size(1) == 1 && is_reduced_floating(x.dtype()) && g.kernel_h * g.kernel_w <= kMaxWindow &&
         channels % 8 == 0 && channels <= kMaxChannels && kBlock % channels == 0 && pixels > 0 &&
         pixels * channels < (int64_t{1} << 31) && x.numel() < (int64_t{1} << 31);
}

}  // namespace

bool CudaKernels::conv2d_relu_direct(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvGeometry& g,
                                     Tensor& y) {
  const int64_t channels = weight.size(0);
  if (!direct_applies(x, channels, g)) return false;
  MINIDL_CHECK(x.is_contiguous() && weight.is_contiguous() && y.is_contiguous(MemoryFormat::ChannelsLast),
               "conv2d_relu_direct: expected x and weight contiguous and y channels-last");
  cuda::DeviceGuard guard(device_);
  const int64_t pixels = x.size(0) * g.out_h * g.out_w;
  dispatch_16bit(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    conv2d_relu_direct_kernel<T><<<blocks_for(pixels * channels / 8, kBlock), kBlock, 0, stream_>>>(
        ptr<const T>(x), ptr<const T>(weight), bias ? ptr<const T>(*bias) : nullptr, ptr<T>(y), pixels,
        static_cast<int>(channels), Geo<int>(g));
    CUDA_LAUNCH_CHECK(conv2d_relu_direct_kernel);
  });
  return true;
}

bool CudaKernels::conv2d_relu_direct_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                              const ConvGeometry& g, Tensor& grad_weight, Tensor* grad_bias) {
  const int64_t channels = y.size(1);
  if (!direct_applies(x, channels, g)) return false;
  MINIDL_CHECK(x.is_contiguous() && grad_weight.is_contiguous() && y.is_contiguous(MemoryFormat::ChannelsLast) &&
                   grad_y.is_contiguous(MemoryFormat::ChannelsLast),
               "conv2d_relu_direct_backward: expected x and grad_weight contiguous, y and grad_y channels-last");
  cuda::DeviceGuard guard(device_);
  const int64_t pixels = x.size(0) * g.out_h * g.out_w;
  const int sums = static_cast<int>(g.kernel_h * g.kernel_w) + 1;
  const int64_t rows = kBlock / channels;
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>((pixels + rows - 1) / rows, 1, kBackwardBlocks));
  Tensor scratch = Tensor::empty({blocks, channels * sums}, kFloat32, y.device());
  dispatch_16bit(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    conv2d_relu_direct_backward_kernel<T><<<blocks, kBlock, kBlock * sums * sizeof(float), stream_>>>(
        ptr<const T>(grad_y), ptr<const T>(y), ptr<const T>(x), pixels, static_cast<int>(channels), Geo<int>(g),
        ptr<float>(scratch), block_counters(device_, stream_), ptr<T>(grad_weight),
        grad_bias ? ptr<T>(*grad_bias) : nullptr);
    CUDA_LAUNCH_CHECK(conv2d_relu_direct_backward_kernel);
  });
  return true;
}

}  // namespace minidl
