// conv2d_relu over one input channel (a first layer on grey images, as MNIST's), in bfloat16 and
// float16, output channels-last: Kernels::conv2d_relu_direct and its backward (ops/conv2d_relu.cpp).
//
// cuDNN treats this as a GEMM whose inner dimension is the window (9 for 3 x 3): too short to feed
// its tensor cores, so each pass costs as much as a deep layer's. At the MNIST CNN's first layer,
// batch 512, bfloat16 on an H200, its forward took 44 us and its weight gradient 110 us, plus 42 and
// 74 us of epilogue passes (bias and ReLU, their backward); each direction here is one pass over the
// output, which is what bounds it. Products accumulate in float32 and each output is rounded once.
//
// Forward: one thread per output pixel, every channel. Backward (the input needs no gradient at a
// first layer): the weight and bias gradients as a small product per tile of pixels in shared
// memory, each block's sums left in a row of partials that the last block adds in block order, so
// the result does not depend on scheduling.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kBlock = 256;
constexpr int kMaxWindow = 25;           // up to 5 x 5
constexpr int kMaxChannels = 256;
constexpr int kMaxPairsPerThread = 4;      // the backward's (channel, tap) sums a thread keeps
constexpr unsigned kBackwardBlocks = 528;  // a few per SM: each block's partial row costs the last one a read

template <class T>
struct alignas(16) Pack8 {
  T v[8];
};

// The window of output pixel `pixel` = (n, i, j) from x [N, 1, H, W] as float, tap t = di * kw + dj;
// zeros in the padding. KH and KW give the window's size where known when compiling (3 x 3), so
// that the loops unroll and the window stays in registers; 0 reads it from g.
template <int KH, int KW, class T>
__device__ __forceinline__ void read_window(const T* __restrict__ x, const Geo<int>& g, int64_t pixel,
                                            float* window) {
  const int kh = KH ? KH : g.kernel_h, kw = KW ? KW : g.kernel_w;
  const int area = g.out_h * g.out_w;
  const int64_t n = pixel / area;
  const int r = int(pixel - n * area), i = r / g.out_w, j = r - i * g.out_w;
  const int h0 = i * g.stride_h - g.pad_h, w0 = j * g.stride_w - g.pad_w;
  const T* image = x + n * g.height * g.width;
#pragma unroll
  for (int di = 0; di < kh; ++di) {
    const int h = h0 + di * g.dilation_h;
#pragma unroll
    for (int dj = 0; dj < kw; ++dj) {
      const int w = w0 + dj * g.dilation_w;
      window[di * kw + dj] = h >= 0 && h < g.height && w >= 0 && w < g.width ? float(image[h * g.width + w]) : 0.f;
    }
  }
}

// Thread p makes every channel of output pixel p: its window read once, the weights read from
// shared memory by the whole warp at once, the channels stored a Pack at a time.
template <class T, int KH, int KW>
__global__ void conv2d_relu_direct_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                                          const T* __restrict__ bias, T* __restrict__ y, int64_t pixels, int channels,
                                          Geo<int> g) {
  __shared__ float w_s[kMaxChannels * kMaxWindow], b_s[kMaxChannels];
  const int kk = (KH ? KH : g.kernel_h) * (KW ? KW : g.kernel_w);
  for (int e = threadIdx.x; e < channels * kk; e += blockDim.x) w_s[e] = float(weight[e]);
  for (int c = threadIdx.x; c < channels; c += blockDim.x) b_s[c] = bias ? float(bias[c]) : 0.f;
  __syncthreads();
  float window[kMaxWindow];
  for (int64_t pixel = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; pixel < pixels;
       pixel += int64_t(gridDim.x) * blockDim.x) {
    read_window<KH, KW>(x, g, pixel, window);
    Pack8<T>* out = reinterpret_cast<Pack8<T>*>(y + pixel * channels);
    for (int c0 = 0; c0 < channels; c0 += 8) {
      Pack8<T> v;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float* w = w_s + (c0 + k) * kk;
        float acc = b_s[c0 + k];
#pragma unroll
        for (int t = 0; t < (KH && KW ? KH * KW : kMaxWindow); ++t)
          if (KH && KW || t < kk) acc = fmaf(w[t], window[t], acc);
        v.v[k] = T(acc > 0.f || acc != acc ? acc : 0.f);  // ReLU; NaN passes on
      }
      out[c0 / 8] = v;
    }
  }
}

// The backward as a small product per tile of `tile` pixels: the block stages the tile's gradient
// through the ReLU ([tile, C], read a Pack at a time) and windows ([tile, kk]) in shared memory,
// then each thread adds up its (channel, tap) pairs over the tile (tap kk: the bias). Tiles go
// round the grid; each block's sums are one row of partials, and the last block adds the rows in
// block order.
template <class T, int KH, int KW>
__global__ void conv2d_relu_direct_backward_kernel(const T* __restrict__ grad_y, const T* __restrict__ y,
                                                   const T* __restrict__ x, int64_t pixels, int channels, Geo<int> g,
                                                   int tile, float* block_sums, unsigned* counters, T* grad_weight,
                                                   T* grad_bias) {
  extern __shared__ float staged[];
  const int kk = (KH ? KH : g.kernel_h) * (KW ? KW : g.kernel_w), sums = kk + 1, pairs = channels * sums;
  const int packs = channels / 8;
  float* grad = staged;                     // [tile, channels]
  float* windows = staged + tile * channels;  // [tile, kk]
  float acc[kMaxPairsPerThread] = {};
  for (int64_t first = blockIdx.x * int64_t(tile); first < pixels; first += int64_t(gridDim.x) * tile) {
    const int here = static_cast<int>(min(int64_t(tile), pixels - first));
    __syncthreads();  // the previous tile's reads are done
    for (int e = threadIdx.x; e < here * packs; e += blockDim.x) {
      const int64_t at = (first * channels) / 8 + e;
      const Pack8<T> gv = reinterpret_cast<const Pack8<T>*>(grad_y)[at];
      const Pack8<T> yv = reinterpret_cast<const Pack8<T>*>(y)[at];
#pragma unroll
      for (int k = 0; k < 8; ++k) grad[e * 8 + k] = yv.v[k] > T(0) ? float(gv.v[k]) : 0.f;  // through the ReLU
    }
    for (int p = threadIdx.x; p < here; p += blockDim.x) {
      float window[kMaxWindow];
      read_window<KH, KW>(x, g, first + p, window);
#pragma unroll
      for (int t = 0; t < (KH && KW ? KH * KW : kMaxWindow); ++t)
        if (KH && KW || t < kk) windows[p * kk + t] = window[t];
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kMaxPairsPerThread; ++q) {
      const int e = threadIdx.x + q * kBlock;
      if (e >= pairs) break;
      const int c = e / sums, t = e - c * sums;
      // Four running sums over the tile's pixels, so that the loads overlap; added in a fixed order.
      float s[4] = {};
      int p = 0;
      if (t < kk) {
        for (; p + 4 <= here; p += 4)
#pragma unroll
          for (int u = 0; u < 4; ++u) s[u] = fmaf(grad[(p + u) * channels + c], windows[(p + u) * kk + t], s[u]);
        for (; p < here; ++p) s[0] = fmaf(grad[p * channels + c], windows[p * kk + t], s[0]);
      } else {
        for (; p + 4 <= here; p += 4)
#pragma unroll
          for (int u = 0; u < 4; ++u) s[u] += grad[(p + u) * channels + c];
        for (; p < here; ++p) s[0] += grad[p * channels + c];
      }
      acc[q] += (s[0] + s[1]) + (s[2] + s[3]);
    }
  }
#pragma unroll
  for (int q = 0; q < kMaxPairsPerThread; ++q) {
    const int e = threadIdx.x + q * kBlock;
    if (e < pairs) block_sums[blockIdx.x * int64_t(pairs) + e] = acc[q];
  }
  if (!last_block_of_group(counters, 0, gridDim.x)) return;
  for (int e = threadIdx.x; e < pairs; e += blockDim.x) {
    // Eight running sums in a fixed pattern: the reads overlap, the order stays the same every run.
    float part[8] = {};
    unsigned b = 0;
    for (; b + 8 <= gridDim.x; b += 8)
#pragma unroll
      for (int k = 0; k < 8; ++k) part[k] += __ldcg(&block_sums[(b + k) * int64_t(pairs) + e]);
    for (; b < gridDim.x; ++b) part[0] += __ldcg(&block_sums[b * int64_t(pairs) + e]);
    const float s = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    const int c = e / sums, t = e - c * sums;
    if (t < kk) grad_weight[c * kk + t] = T(s);
    else if (grad_bias) grad_bias[c] = T(s);
  }
}

// Whether the direct kernels take this convolution: one input channel, a window of at most 5 x 5,
// a 16-bit dtype, output channels a multiple of 8 (a Pack) and few enough (channel, tap) sums for
// the backward's threads to keep (32 channels of 3 x 3 or 5 x 5, 64 of 3 x 3), 32-bit indices.
bool direct_applies(const Tensor& x, int64_t channels, const ConvGeometry& g) {
  const int64_t pixels = x.size(0) * g.out_h * g.out_w;
  return x.size(1) == 1 && is_reduced_floating(x.dtype()) && g.kernel_h * g.kernel_w <= kMaxWindow &&
         channels % 8 == 0 && channels <= kMaxChannels &&
         channels * (g.kernel_h * g.kernel_w + 1) <= kMaxPairsPerThread * kBlock && pixels > 0 &&
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
    const auto launch = [&](auto kernel) {
      kernel<<<blocks_for(pixels, kBlock), kBlock, 0, stream_>>>(ptr<const T>(x), ptr<const T>(weight),
                                                                  bias ? ptr<const T>(*bias) : nullptr, ptr<T>(y),
                                                                  pixels, static_cast<int>(channels), Geo<int>(g));
    };
    if (g.kernel_h == 3 && g.kernel_w == 3) launch(conv2d_relu_direct_kernel<T, 3, 3>);
    else launch(conv2d_relu_direct_kernel<T, 0, 0>);
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
  const int kk = static_cast<int>(g.kernel_h * g.kernel_w), sums = kk + 1;
  // Pixels a tile: as many as 40 KB of shared memory holds, at most 256.
  const int64_t per_pixel = (channels + kk) * static_cast<int64_t>(sizeof(float));
  const int tile = static_cast<int>(std::clamp<int64_t>((40 << 10) / per_pixel / 8 * 8, 8, 256));
  const unsigned blocks =
      static_cast<unsigned>(std::clamp<int64_t>((pixels + tile - 1) / tile, 1, kBackwardBlocks));
  Tensor scratch = Tensor::empty({blocks, channels * sums}, kFloat32, y.device());
  dispatch_16bit(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto launch = [&](auto kernel) {
      kernel<<<blocks, kBlock, tile * per_pixel, stream_>>>(
          ptr<const T>(grad_y), ptr<const T>(y), ptr<const T>(x), pixels, static_cast<int>(channels), Geo<int>(g),
          tile, ptr<float>(scratch), block_counters(device_, stream_), ptr<T>(grad_weight),
          grad_bias ? ptr<T>(*grad_bias) : nullptr);
    };
    if (g.kernel_h == 3 && g.kernel_w == 3) launch(conv2d_relu_direct_backward_kernel<T, 3, 3>);
    else launch(conv2d_relu_direct_backward_kernel<T, 0, 0>);
    CUDA_LAUNCH_CHECK(conv2d_relu_direct_backward_kernel);
  });
  return true;
}

}  // namespace minidl
