// conv2d_relu over one input channel (a first layer on grey images, as MNIST's):
// Kernels::conv2d_relu_direct and its backward (ops/conv2d_relu.cpp), in bfloat16, float16 and
// float32. The output is laid out as cuDNN's convolutions of its dtype run (cudnn_plan.h's
// cudnn_format: channels-last in 16 bits and in float32 under TF32, NCHW in strict float32), so that
// the next layer reads the layout it runs in; products are strict float32 either way.
//
// cuDNN treats this as a GEMM whose inner dimension is the window (9 for 3 x 3): too short to feed
// its tensor cores, so each pass costs as much as a deep layer's. At the MNIST CNN's first layer,
// batch 512, bfloat16 on an H200, its forward took 44 us and its weight gradient 110 us, plus 42 and
// 74 us of epilogue passes (bias and ReLU, their backward). Each direction here is one pass over the
// output (22 MB written forward, twice that read backward). Products accumulate in float32 and each
// output is rounded once.
//
// A forward thread makes every channel of one pixel, 8 at a time (16 bytes of a channels-last pixel
// in 16 bits, 32 in float32; in NCHW a warp's 32 pixels of one channel are one contiguous span),
// reading the weights from shared memory as float4s the whole warp loads at once. A backward thread
// takes one pack of 8 channels, so that a warp reads whole pixels in one contiguous span (NCHW: 8
// pixels of a channel for each pack), keeps its pack's sums in registers over a stride of pixels and
// adds them across its block; a second kernel adds the blocks' rows in a fixed order. At that shape,
// in the bfloat16 step (docs/benchmarks.md), the forward takes 18.0 us and the backward 102.8 us,
// run beside the next layer's cuDNN gradients that hold most of the SMs (56 us alone before its
// block's sums were added column by column). Both are far from what the bytes they move allow: the
// backward took 81 us with the products staged in shared memory, the forward 23.5 us with a thread
// for each pack. In strict float32 NCHW at batch 512: 16.3 us forward, 71.4 us backward (H200).
// A small NCHW batch takes a backward of its own, a thread for each pixel walking the images (below
// the pack kernel): 9.1 us at batch 64 against the pack kernel's 16.5 with its sums.
#include <type_traits>

#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/softmax.cuh"  // warp_sum

namespace minidl {

namespace {

using namespace cuda;

constexpr int kBlock = 128;           // the forward's threads a block: 2-3 blocks an SM at batch 64
constexpr int kBackwardBlock = 384;   // the backward's: one block an SM, up to 168 registers a thread
constexpr int kMaxWindow = 9;         // up to 3 x 3: the taps a backward thread keeps sums of
constexpr int kMaxChannels = 256;     // 32 packs: a warp at most
constexpr int kWarps = kBackwardBlock / 32;
constexpr int kMaxPairs = kMaxChannels * (kMaxWindow + 1);  // a block's sums: weights and bias
constexpr int kStaged = 4 * kMaxPairs;                      // floats: 40 KB, 4 warps' sums at most
constexpr int kColumns = (kMaxPairs + kBackwardBlock - 1) / kBackwardBlock;  // a thread's columns

template <class T>
struct alignas(16) Pack8 {
  T v[8];
};

// Channels pack * 8 ... pack * 8 + 7 of output pixel `pixel` (= n * area + the pixel's place in its
// image) in y [N, C, oh, ow], channels-last (one Pack8) or NCHW (8 planes apart).
template <bool ChannelsLast, class T>
__device__ __forceinline__ Pack8<T> load_pack(const T* __restrict__ y, int64_t pixel, int pack, int packs, int area) {
  if constexpr (ChannelsLast) {
    return reinterpret_cast<const Pack8<T>*>(y)[pixel * packs + pack];
  } else {
    const int64_t n = pixel / area, first = (n * packs * 8 + pack * 8) * area + (pixel - n * area);
    Pack8<T> p;
#pragma unroll
    for (int k = 0; k < 8; ++k) p.v[k] = y[first + int64_t(k) * area];
    return p;
  }
}

template <bool ChannelsLast, class T>
__device__ __forceinline__ void store_pack(T* __restrict__ y, int64_t pixel, int pack, int packs, int area,
                                           const Pack8<T>& p) {
  if constexpr (ChannelsLast) {
    reinterpret_cast<Pack8<T>*>(y)[pixel * packs + pack] = p;
  } else {
    const int64_t n = pixel / area, first = (n * packs * 8 + pack * 8) * area + (pixel - n * area);
#pragma unroll
    for (int k = 0; k < 8; ++k) y[first + int64_t(k) * area] = p.v[k];
  }
}

// The window of output pixel `pixel` = (n, i, j) from x [N, 1, H, W] as float, tap t = di * kw + dj;
// zeros in the padding. KH and KW give the window's size where known when compiling (3 x 3), so
// that the loops unroll; 0 reads it from g.
// 32-bit index arithmetic throughout (direct_applies): a 64-bit division costs as much as the
// window's products.
template <int KH, int KW, class T>
__device__ __forceinline__ void read_window(const T* __restrict__ x, const Geo<int>& g, int pixel, float* window) {
  const int kh = KH ? KH : g.kernel_h, kw = KW ? KW : g.kernel_w;
  const int area = g.out_h * g.out_w;
  const int n = pixel / area;
  const int r = pixel - n * area, i = r / g.out_w, j = r - i * g.out_w;
  const int h0 = i * g.stride_h - g.pad_h, w0 = j * g.stride_w - g.pad_w;
  const T* image = x + n * g.height * g.width;
#pragma unroll
  for (int t = 0; t < kMaxWindow; ++t) {
    if (t >= kh * kw) break;
    const int di = t / kw, dj = t - di * kw;
    const int h = h0 + di * g.dilation_h, w = w0 + dj * g.dilation_w;
    window[t] = h >= 0 && h < g.height && w >= 0 && w < g.width ? float(image[h * g.width + w]) : 0.f;
  }
}

// Thread p makes every channel of output pixel p, a pack of 8 at a time: the window read and indexed
// once, the weights read from shared memory tap by tap ([tap, channel]) as float4s that the whole
// warp loads at once (one load serves four channels of a tap), bias and ReLU applied before the one
// rounding. (With a thread for each pack of a pixel, the window's reads and index arithmetic ran
// once a pack, and the kernel took 23.5 us at batch 512.)
template <class T, int KH, int KW, bool ChannelsLast>
__global__ void conv2d_relu_direct_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                                          const T* __restrict__ bias, T* __restrict__ y, int64_t pixels, int packs,
                                          Geo<int> g) {
  __shared__ float4 w_s[kMaxWindow * kMaxChannels / 4], b_s[kMaxChannels / 4];
  wait_for_earlier_kernels();  // launched early: the input
  const int kk = (KH ? KH : g.kernel_h) * (KW ? KW : g.kernel_w), channels = packs * 8;
  for (int e = threadIdx.x; e < channels * kk; e += blockDim.x) {
    const int c = e / kk, t = e - c * kk;
    reinterpret_cast<float*>(w_s)[t * channels + c] = float(weight[e]);
  }
  for (int c = threadIdx.x; c < channels; c += blockDim.x) reinterpret_cast<float*>(b_s)[c] = bias ? float(bias[c]) : 0.f;
  __syncthreads();
  const int area = g.out_h * g.out_w;
  for (int64_t pixel = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; pixel < pixels;
       pixel += int64_t(gridDim.x) * blockDim.x) {
    float window[kMaxWindow];
    read_window<KH, KW>(x, g, static_cast<int>(pixel), window);
    for (int pack = 0; pack < packs; ++pack) {
      const float4 b0 = b_s[2 * pack], b1 = b_s[2 * pack + 1];
      float acc[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int t = 0; t < kMaxWindow; ++t) {
        if (t >= kk) break;
        const float4 w0 = w_s[(t * channels) / 4 + 2 * pack], w1 = w_s[(t * channels) / 4 + 2 * pack + 1];
        const float v = window[t];
        acc[0] = fmaf(w0.x, v, acc[0]), acc[1] = fmaf(w0.y, v, acc[1]), acc[2] = fmaf(w0.z, v, acc[2]);
        acc[3] = fmaf(w0.w, v, acc[3]), acc[4] = fmaf(w1.x, v, acc[4]), acc[5] = fmaf(w1.y, v, acc[5]);
        acc[6] = fmaf(w1.z, v, acc[6]), acc[7] = fmaf(w1.w, v, acc[7]);
      }
      Pack8<T> o;
#pragma unroll
      for (int k = 0; k < 8; ++k) o.v[k] = T(acc[k] > 0.f || acc[k] != acc[k] ? acc[k] : 0.f);  // ReLU; NaN passes on
      store_pack<ChannelsLast>(y, pixel, pack, packs, area, o);
    }
  }
}

// The weight and bias gradients' sums by block. Thread (slot, pack) keeps the sums of its pack's 8
// channels by every tap and the bias over its stride of pixels, the gradient taken through the ReLU;
// the next pixel's gradient and window are loaded before this one's products, so that a thread has
// two in flight. Then, in a fixed order each run: the threads of a pack add theirs across the warp
// (a butterfly), the block's threads add the warps' sums column by column, and each block leaves a
// row of them in block_sums for the sums kernel below.
template <class T, int KH, int KW, bool ChannelsLast>
__global__ void __launch_bounds__(kBackwardBlock, 1)
    conv2d_relu_direct_backward_kernel(const T* __restrict__ grad_y, const T* __restrict__ y,
                                       const T* __restrict__ x, int64_t pixels, int packs, Geo<int> g,
                                       float* block_sums) {
  wait_for_earlier_kernels();  // launched early: the output gradient
  let_next_kernel_start();  // the sums kernel's blocks wait on the SMs for this one's rows
  __shared__ float4 staged4[kStaged / 4];
  float* staged = reinterpret_cast<float*>(staged4);
  const int kk = (KH ? KH : g.kernel_h) * (KW ? KW : g.kernel_w), sums = kk + 1, channels = packs * 8;
  const int pairs = channels * sums;  // a multiple of 8
  const int pack = threadIdx.x & (packs - 1), slots = kBackwardBlock / packs;
  const int64_t stride = int64_t(gridDim.x) * slots;
  float acc[8][kMaxWindow + 1] = {};  // [k][kMaxWindow]: the bias
  const int area = g.out_h * g.out_w;
  int64_t pixel = blockIdx.x * int64_t(slots) + threadIdx.x / packs;
  Pack8<T> gv, yv;
  float wv[kMaxWindow];
  if (pixel < pixels) {
    gv = load_pack<ChannelsLast>(grad_y, pixel, pack, packs, area);
    yv = load_pack<ChannelsLast>(y, pixel, pack, packs, area);
    read_window<KH, KW>(x, g, static_cast<int>(pixel), wv);
  }
  for (; pixel < pixels; pixel += stride) {
    const Pack8<T> gc = gv, yc = yv;
    float window[kMaxWindow];
#pragma unroll
    for (int t = 0; t < kMaxWindow; ++t) window[t] = wv[t];
    if (pixel + stride < pixels) {
      gv = load_pack<ChannelsLast>(grad_y, pixel + stride, pack, packs, area);
      yv = load_pack<ChannelsLast>(y, pixel + stride, pack, packs, area);
      read_window<KH, KW>(x, g, static_cast<int>(pixel + stride), wv);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float d = yc.v[k] > T(0) ? float(gc.v[k]) : 0.f;  // through the ReLU
#pragma unroll
      for (int t = 0; t < kMaxWindow; ++t)
        if (t < kk) acc[k][t] = fmaf(d, window[t], acc[k][t]);
      acc[k][kMaxWindow] += d;
    }
  }
  // Lanes lane, lane ^ packs, lane ^ 2 packs, ... hold the same pack: the butterfly leaves every one
  // of them the warp's sum.
#pragma unroll
  for (int k = 0; k < 8; ++k)
#pragma unroll
    for (int t = 0; t <= kMaxWindow; ++t)
      for (int offset = packs; offset < 32; offset *= 2) acc[k][t] += __shfl_xor_sync(0xffffffffu, acc[k][t], offset);
  // The warps' sums go to shared memory side by side, as many warps at a time as it holds (all 12
  // up to 32 channels), and thread e adds column e (and e + 384, ...) over them in warp order. (Warp
  // after warp into one row, each behind a barrier, left one of the SM's 12 warps working at a time.)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_round = min(kWarps, kStaged / pairs);
  float column[kColumns] = {};
  for (int first = 0; first < kWarps; first += per_round) {
    const int rows = min(per_round, kWarps - first);
    if (warp >= first && warp < first + rows && lane < packs) {
      float* row = staged + (warp - first) * pairs + pack * 8 * sums;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
#pragma unroll
        for (int t = 0; t < kMaxWindow; ++t)
          if (t < kk) row[k * sums + t] = acc[k][t];
        row[k * sums + kk] = acc[k][kMaxWindow];
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kColumns; ++i) {
      const int e = threadIdx.x + i * kBackwardBlock;
      if (e < pairs)
        for (int r = 0; r < rows; ++r) column[i] += staged[r * pairs + e];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kColumns; ++i) {
    const int e = threadIdx.x + i * kBackwardBlock;
    if (e < pairs) block_sums[blockIdx.x * int64_t(pairs) + e] = column[i];
  }
}

// The rows of block sums [rows, pairs] added in a fixed order into the weight and bias gradients, in
// T or in float32 (a master weight's: one rounding fewer and no converting pass). Block b takes
// columns [32 b, 32 b + 32), thread (group, column) the rows group, group + 8, ... with four loads
// in flight, then the eight groups' totals are added in order. Launched early, it waits on the SMs
// that the backward kernel's blocks leave. (The last of those blocks added the rows itself before:
// at the MNIST CNN's first layer, batch 64, the two kernels take about 2 us less, H200.)
constexpr int kSumGroups = 8;
template <class G>
__global__ void __launch_bounds__(32 * kSumGroups)
    conv2d_relu_direct_backward_sums_kernel(const float* __restrict__ block_sums, int rows, int pairs, int kk,
                                            G* grad_weight, G* grad_bias) {
  __shared__ float partial[kSumGroups][32];
  wait_for_earlier_kernels();
  const int column = threadIdx.x % 32, group = threadIdx.x / 32, e = blockIdx.x * 32 + column;
  float part[4] = {};
  if (e < pairs) {
    int r = group;
    for (; r + 3 * kSumGroups < rows; r += 4 * kSumGroups)
#pragma unroll
      for (int u = 0; u < 4; ++u) part[u] += __ldcg(&block_sums[(r + u * kSumGroups) * int64_t(pairs) + e]);
    for (; r < rows; r += kSumGroups) part[0] += __ldcg(&block_sums[r * int64_t(pairs) + e]);
  }
  partial[group][column] = (part[0] + part[1]) + (part[2] + part[3]);
  __syncthreads();
  if (group != 0 || e >= pairs) return;
  float s = 0.f;
#pragma unroll
  for (int g = 0; g < kSumGroups; ++g) s += partial[g][column];
  const int sums = kk + 1, c = e / sums, t = e - c * sums;
  if (t < kk) grad_weight[c * kk + t] = G(s);
  else if (grad_bias) grad_bias[c] = G(s);
}

// The NCHW backward (strict float32's layout) in one kernel. A channel's output gradient is one
// plane an image there, so a thread keeps one output pixel and walks through the images: its
// window's offsets, and which of its taps fall inside the image, are worked out once, and each
// image then costs its loads and products and little else (the pack kernel above finds every
// pixel's place by division, and that index arithmetic, not memory, sets its pace). A tap outside
// the image reads the image's first pixel instead, and its sums are dropped at the end. A block
// takes two channels, and a warp reads 128 contiguous bytes of each plane at once. The blocks of a
// group hold every pixel of a few images (slices) each; the group's last block adds their 20 sums
// in block order (last_block_of_group), so no second kernel runs. (Thread block clusters of 8
// blocks in place of the groups ran in two waves: not all 16 fit on an H200 at once.)
constexpr int kNchwThreads = 256;
constexpr int kNchwChannels = 2;      // a block's channels: the window read once for both
constexpr int kNchwGroupBlocks = 16;  // a group's blocks: 2 an SM over 16 groups (32 channels)
constexpr int kNchwUnroll = 4;        // images a thread has in flight
constexpr int kNchwSums = kNchwChannels * (kMaxWindow + 1);
// Up to here the NCHW kernel; past it the pack kernel, whose fixed costs (its sums kernel, its
// butterflies over 80 sums a thread) weigh less as its strides grow. At the MNIST CNN's first layer
// (H200, float32) the NCHW kernel took 9.1 us at batch 64 against the pack kernel's 12.2 + 4.3, and
// 94.6 us at batch 512 against 71: lines through those points cross near 190 images (128,000
// pixels).
constexpr int64_t kNchwMaxPixels = 1 << 17;
// Counter groups from the top of the range, clear of the other users (ops/cuda/common.cuh), which
// count from 0.
constexpr int64_t kNchwCounterBase = kMaxCounterGroups - kMaxChannels / kNchwChannels;

template <class T, class G, int KH, int KW>
__global__ void __launch_bounds__(kNchwThreads, 2)
    conv2d_relu_direct_backward_nchw_kernel(const T* __restrict__ grad_y, const T* __restrict__ y,
                                            const T* __restrict__ x, int images, int slices, int channels,
                                            Geo<int> g, float* block_sums, unsigned* counters, G* grad_weight,
                                            G* grad_bias) {
  __shared__ float warp_sums[kNchwThreads / 32][kNchwSums];
  const int kh = KH ? KH : g.kernel_h, kw = KW ? KW : g.kernel_w, kk = kh * kw;
  const int area = g.out_h * g.out_w, image_area = g.height * g.width;
  const int c0 = static_cast<int>(blockIdx.y) * kNchwChannels;
  const int thread = static_cast<int>(blockIdx.x) * kNchwThreads + static_cast<int>(threadIdx.x);
  const int slice = thread / area, r = thread - slice * area;  // images slice, slice + slices, ...; pixel r
  float acc[kNchwChannels][kMaxWindow + 1] = {};  // [c][kMaxWindow]: the bias
  wait_for_earlier_kernels();  // launched early: the output gradient
  if (slice < slices) {
    const int i = r / g.out_w, j = r - i * g.out_w;
    const int h0 = i * g.stride_h - g.pad_h, w0 = j * g.stride_w - g.pad_w;
    int offset[kMaxWindow];  // from the image's start; 0 (a place inside) for a tap outside it
    unsigned inside = 0;
#pragma unroll
    for (int t = 0; t < kMaxWindow; ++t) {
      if (t >= kk) break;
      const int h = h0 + t / kw * g.dilation_h, w = w0 + t % kw * g.dilation_w;
      const bool in = h >= 0 && h < g.height && w >= 0 && w < g.width;
      offset[t] = in ? h * g.width + w : 0;
      inside |= unsigned(in) << t;
    }
    const int image_step = slices * image_area, plane_step = slices * channels * area;
    int image = slice * image_area, plane = (slice * channels + c0) * area + r;
    const auto add_images = [&](auto unroll) {
      constexpr int U = decltype(unroll)::value;
      float d[U][kNchwChannels], window[U][kMaxWindow];
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int c = 0; c < kNchwChannels; ++c) {
          const int at = plane + u * plane_step + c * area;
          const T gv = grad_y[at], yv = y[at];
          d[u][c] = yv > T(0) ? float(gv) : 0.f;  // through the ReLU
        }
#pragma unroll
        for (int t = 0; t < kMaxWindow; ++t)
          if (t < kk) window[u][t] = float(x[image + u * image_step + offset[t]]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int c = 0; c < kNchwChannels; ++c) {
#pragma unroll
          for (int t = 0; t < kMaxWindow; ++t)
            if (t < kk) acc[c][t] = fmaf(d[u][c], window[u][t], acc[c][t]);
          acc[c][kMaxWindow] += d[u][c];
        }
      image += U * image_step, plane += U * plane_step;
    };
    int n = slice;
    for (; n + (kNchwUnroll - 1) * slices < images; n += kNchwUnroll * slices)
      add_images(std::integral_constant<int, kNchwUnroll>{});
    for (; n < images; n += slices) add_images(std::integral_constant<int, 1>{});
#pragma unroll
    for (int t = 0; t < kMaxWindow; ++t)
      if (!(inside >> t & 1u))
#pragma unroll
        for (int c = 0; c < kNchwChannels; ++c) acc[c][t] = 0.f;
  }
  let_next_kernel_start();
  // The block's sums: a butterfly across each warp, then the warps' in order.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < kNchwChannels; ++c)
#pragma unroll
    for (int t = 0; t <= kMaxWindow; ++t) {
      const float v = warp_sum(acc[c][t]);
      if (lane == 0) warp_sums[warp][c * (kMaxWindow + 1) + t] = v;
    }
  __syncthreads();
  // The block's row of sums, then the group's rows in block order by its last block.
  float* rows = block_sums + int64_t(blockIdx.y) * gridDim.x * kNchwSums;
  if (threadIdx.x < kNchwSums) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kNchwThreads / 32; ++w) s += warp_sums[w][threadIdx.x];
    rows[blockIdx.x * kNchwSums + threadIdx.x] = s;
  }
  if (!last_block_of_group(counters, kNchwCounterBase + blockIdx.y, gridDim.x)) return;
  if (threadIdx.x < kNchwSums) {
    const int e = threadIdx.x;
    float s = 0.f;
    for (unsigned b = 0; b < gridDim.x; ++b) s += __ldcg(&rows[b * kNchwSums + e]);
    const int c = c0 + e / (kMaxWindow + 1), t = e % (kMaxWindow + 1);
    if (t < kk) grad_weight[c * kk + t] = G(s);
    else if (t == kMaxWindow && grad_bias) grad_bias[c] = G(s);
  }
}

// Whether the direct kernels take this convolution: one input channel, a window of at most 9 taps
// (3 x 3), a 16-bit dtype or float32, output channels 8 times a power of two up to 256 (whole
// packs, and the packs of a pixel tile a warp for the backward's butterfly), 32-bit indices.
bool direct_applies(const Tensor& x, int64_t channels, const ConvGeometry& g) {
  const int64_t pixels = x.size(0) * g.out_h * g.out_w, packs = channels / 8;
  const bool dtype_ok = is_reduced_floating(x.dtype()) || x.dtype() == kFloat32;
  return x.size(1) == 1 && dtype_ok && g.kernel_h * g.kernel_w <= kMaxWindow &&
         channels % 8 == 0 && channels <= kMaxChannels && packs > 0 && (packs & (packs - 1)) == 0 && pixels > 0 &&
         pixels * channels < (int64_t{1} << 31) && x.numel() < (int64_t{1} << 31);
}

// fn(T{}) for the direct kernels' dtypes.
template <class Fn>
void dispatch_direct(DType dtype, Fn&& fn) {
  if (dtype == kFloat32) fn(float{});
  else dispatch_16bit(dtype, fn);
}

// The backward's blocks: one wave, each thread then taking a stride of pixels (its sums are set up
// and added across the grid once, so fewer threads with longer strides cost less), and no more
// blocks than pixel slots.
unsigned backward_blocks(int device, int64_t pixels, int64_t packs) {
  const int64_t sms = cuda::multiprocessor_count(device);
  const int64_t slots = kBackwardBlock / packs;
  return static_cast<unsigned>(std::clamp<int64_t>((pixels + slots - 1) / slots, 1, sms));
}

}  // namespace

bool CudaKernels::conv2d_relu_direct(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvGeometry& g,
                                     Tensor& y) {
  const int64_t channels = weight.size(0);
  if (!direct_applies(x, channels, g)) return false;
  const bool channels_last = y.is_contiguous(MemoryFormat::ChannelsLast);
  MINIDL_CHECK(x.is_contiguous() && weight.is_contiguous() && (channels_last || y.is_contiguous()),
               "conv2d_relu_direct: expected x and weight contiguous and y channels-last or contiguous");
  cuda::DeviceGuard guard(device_);
  const int64_t pixels = x.size(0) * g.out_h * g.out_w, packs = channels / 8;
  const unsigned blocks = blocks_for(pixels, kBlock);
  dispatch_direct(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto launch = [&](auto kernel) {
      launch_early("conv2d_relu_direct_kernel", kernel, dim3(blocks), dim3(kBlock), 0, stream_, ptr<const T>(x),
                   ptr<const T>(weight), bias ? ptr<const T>(*bias) : nullptr, ptr<T>(y), pixels,
                   static_cast<int>(packs), Geo<int>(g));
    };
    if (channels_last) {
      if (g.kernel_h == 3 && g.kernel_w == 3) launch(conv2d_relu_direct_kernel<T, 3, 3, true>);
      else launch(conv2d_relu_direct_kernel<T, 0, 0, true>);
    } else {
      if (g.kernel_h == 3 && g.kernel_w == 3) launch(conv2d_relu_direct_kernel<T, 3, 3, false>);
      else launch(conv2d_relu_direct_kernel<T, 0, 0, false>);
    }
    CUDA_LAUNCH_CHECK(conv2d_relu_direct_kernel);
  });
  return true;
}

bool CudaKernels::conv2d_relu_direct_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x,
                                              const ConvGeometry& g, Tensor& grad_weight, Tensor* grad_bias) {
  const int64_t channels = y.size(1);
  if (!direct_applies(x, channels, g)) return false;
  const bool channels_last = y.is_contiguous(MemoryFormat::ChannelsLast);
  MINIDL_CHECK(x.is_contiguous() && grad_weight.is_contiguous() &&
                   (channels_last ? grad_y.is_contiguous(MemoryFormat::ChannelsLast)
                                  : y.is_contiguous() && grad_y.is_contiguous()),
               "conv2d_relu_direct_backward: expected x and grad_weight contiguous, y and grad_y in one layout, "
               "channels-last or contiguous");
  const DType out = grad_weight.dtype();
  MINIDL_CHECK((out == x.dtype() || out == kFloat32) && (!grad_bias || grad_bias->dtype() == out),
               "conv2d_relu_direct_backward: expected the gradients in ", x.dtype(), " or float32, alike, got ", out,
               " and ", grad_bias ? grad_bias->dtype() : out);
  cuda::DeviceGuard guard(device_);
  const int64_t pixels = x.size(0) * g.out_h * g.out_w, packs = channels / 8;
  const int64_t area = g.out_h * g.out_w;
  if (!channels_last && area <= kNchwGroupBlocks * kNchwThreads && pixels <= kNchwMaxPixels) {
    const int64_t images = x.size(0);
    const int64_t slices = std::clamp<int64_t>(kNchwGroupBlocks * kNchwThreads / area, 1, images);
    const unsigned group_blocks = static_cast<unsigned>((slices * area + kNchwThreads - 1) / kNchwThreads);
    const unsigned groups = static_cast<unsigned>(channels / kNchwChannels);
    Tensor scratch = Tensor::empty({int64_t(groups) * group_blocks, kNchwSums}, kFloat32, y.device());
    unsigned* counters = block_counters(device_, stream_);
    dispatch_direct(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const auto launch = [&](auto* grads) {
        using G = std::remove_pointer_t<decltype(grads)>;
        const bool three = g.kernel_h == 3 && g.kernel_w == 3;
        launch_early("conv2d_relu_direct_backward_nchw_kernel",
                     three ? conv2d_relu_direct_backward_nchw_kernel<T, G, 3, 3>
                           : conv2d_relu_direct_backward_nchw_kernel<T, G, 0, 0>,
                     dim3(group_blocks, groups), dim3(kNchwThreads), 0, stream_, ptr<const T>(grad_y),
                     ptr<const T>(y), ptr<const T>(x), static_cast<int>(images), static_cast<int>(slices),
                     static_cast<int>(channels), Geo<int>(g), ptr<float>(scratch), counters, ptr<G>(grad_weight),
                     grad_bias ? ptr<G>(*grad_bias) : nullptr);
      };
      if (out == kFloat32) launch(static_cast<float*>(nullptr));
      else launch(static_cast<T*>(nullptr));
    });
    return true;
  }
  const int64_t sums = g.kernel_h * g.kernel_w + 1;
  const unsigned blocks = backward_blocks(device_, pixels, packs);
  Tensor scratch = Tensor::empty({blocks, channels * sums}, kFloat32, y.device());
  dispatch_direct(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto launch = [&](auto kernel, auto* grads) {
      using G = std::remove_pointer_t<decltype(grads)>;
      launch_early("conv2d_relu_direct_backward_kernel", kernel, dim3(blocks), dim3(kBackwardBlock), 0, stream_,
                   ptr<const T>(grad_y), ptr<const T>(y), ptr<const T>(x), pixels, static_cast<int>(packs),
                   Geo<int>(g), ptr<float>(scratch));
      const int pairs = static_cast<int>(channels * sums);
      launch_early("conv2d_relu_direct_backward_sums_kernel", conv2d_relu_direct_backward_sums_kernel<G>,
                   dim3((pairs + 31) / 32), dim3(32 * kSumGroups), 0, stream_, ptr<const float>(scratch),
                   static_cast<int>(blocks), pairs, static_cast<int>(sums - 1), ptr<G>(grad_weight),
                   grad_bias ? ptr<G>(*grad_bias) : nullptr);
    };
    const auto with_window = [&](auto* grads) {
      if (channels_last) {
        if (g.kernel_h == 3 && g.kernel_w == 3) launch(conv2d_relu_direct_backward_kernel<T, 3, 3, true>, grads);
        else launch(conv2d_relu_direct_backward_kernel<T, 0, 0, true>, grads);
      } else {
        if (g.kernel_h == 3 && g.kernel_w == 3) launch(conv2d_relu_direct_backward_kernel<T, 3, 3, false>, grads);
        else launch(conv2d_relu_direct_backward_kernel<T, 0, 0, false>, grads);
      }
    };
    if (out == kFloat32) with_window(static_cast<float*>(nullptr));
    else with_window(static_cast<T*>(nullptr));
  });
  return true;
}

}  // namespace minidl
