// A convolution's fused epilogues on CUDA (ops/conv2d_relu.cpp), over [N, C, H, W] tensors laid out
// contiguous (NCHW) or channels-last (NHWC, as cuDNN's 16-bit convolutions leave them; the pooled
// output is NCHW either way, ready to flatten).
//
// The forwards are elementwise, 16 bytes of output per step where the plane size allows it, with
// 32-bit indices where they fit.
// The backwards also sum the bias gradient per channel: block (c, s) covers channel c of the images
// in slice s, leaves its sum in a scratch row, and the last block of the channel adds the slices in
// order (last_block_of_group), so one launch does it all and the result is deterministic. Sums of
// float accumulate in double, as the reductions do; bfloat16 and float16 are computed in float and
// each output rounded once, their sums in float.
#include <initializer_list>
#include <type_traits>

#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kBlock = 256;
constexpr int64_t kMaxSlices = 64;
// Pooled rows of every channel, staged in shared memory by the channels-last pooling kernels.
constexpr int64_t kMaxRowBytes = 48 << 10;

// The bias gradient's sums: AccT (double for float, as the reductions); float for bfloat16 and
// float16, whose elements are read as float (compute_t).
template <class T>
using EpilogueSum = std::conditional_t<is_16bit_float_v<T>, float, AccT<T>>;

template <class T>
__device__ __forceinline__ bool epilogue_isnan(T v) {
  if constexpr (is_16bit_float_v<T>) {
    const float f = v;
    return f != f;
  } else {
    return d_isnan(v);
  }
}

template <class T>
__device__ __forceinline__ T relu_of(T v) {
  return v > T(0) || epilogue_isnan(v) ? v : T(0);  // NaN stays NaN, as relu passes it on
}

// 16 bytes of T: one vector load or store.
template <class T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// The channel of flat element i: (i / area) % channels in NCHW, i % channels in NHWC.
template <bool ChannelsLast, class I>
__device__ __forceinline__ I channel_of(I i, I area, I channels) {
  return ChannelsLast ? i % channels : (i / area) % channels;
}

// y may be x (in place). Each thread steps a Pack at a time, and the caller checks that a pack
// never straddles two channels in NCHW (the plane size is a multiple of the pack's) and holds kSize
// consecutive channels in NHWC (so is the channel count).
template <class T, bool Relu, bool ChannelsLast, class I>
__global__ void conv_bias_act_kernel(const Pack<T>* x, const T* __restrict__ bias, Pack<T>* y, I packs, I area,
                                     I channels) {
  constexpr int kSize = Pack<T>::kSize;
  for (I p = blockIdx.x * I(blockDim.x) + threadIdx.x; p < packs; p += I(gridDim.x) * blockDim.x) {
    const I c = channel_of<ChannelsLast>(p * kSize, area, channels);
    Pack<T> v = x[p];
#pragma unroll
    for (int j = 0; j < kSize; ++j) {
      const T shift = bias ? bias[ChannelsLast ? c + j : c] : T(0);
      v.v[j] = Relu ? relu_of(v.v[j] + shift) : v.v[j] + shift;
    }
    y[p] = v;
  }
}

template <class T, bool Relu, bool ChannelsLast, class I>
__global__ void conv_bias_act_scalar_kernel(const T* x, const T* __restrict__ bias, T* y, I n, I area, I channels) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const T v = x[i] + (bias ? bias[channel_of<ChannelsLast>(i, area, channels)] : T(0));
    y[i] = Relu ? relu_of(v) : v;
  }
}

// Adds the block's `sum` for channel blockIdx.x into grad_bias, through the slices' scratch row when
// the images are split over several blocks (gridDim.y).
template <class T>
__device__ void finish_channel_sum(EpilogueSum<T> sum, T* grad_bias, EpilogueSum<T>* slice_sums, unsigned* counters) {
  __shared__ EpilogueSum<T> warp_sums[kBlock / 32];
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
    EpilogueSum<T> total = 0;
    for (unsigned s = 0; s < gridDim.y; ++s) total += __ldcg(&slice_sums[s * channels + c]);
    grad_bias[c] = static_cast<T>(total);
  }
}

// Index math is 32-bit within a slice (the caller keeps a slice's elements under 2^31): 64-bit
// division is a long subroutine, and it made these kernels instruction-bound (20 us for 1.4 M
// elements on an H100). Planes whose size is a multiple of the Pack's step a Pack at a time.
template <class T, bool Packed>
__global__ void conv_bias_relu_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ y,
                                               T* __restrict__ grad_pre, T* grad_bias, int64_t images,
                                               int64_t images_per_slice, int area, EpilogueSum<T>* slice_sums,
                                               unsigned* counters) {
  constexpr int kStep = Packed ? Pack<T>::kSize : 1;
  const int64_t c = blockIdx.x, channels = gridDim.x;
  const int64_t begin = blockIdx.y * images_per_slice;
  const int count = static_cast<int>(min(images, begin + images_per_slice) - begin);
  const int steps = area / kStep;  // per plane
  EpilogueSum<T> sum = 0;
  // The slice's planes of channel c as one range, so that every thread has work in every round.
  for (int e = threadIdx.x; e < count * steps; e += kBlock) {
    const int n = e / steps;
    const int64_t at = ((begin + n) * channels + c) * area + int64_t(e - n * steps) * kStep;
    if constexpr (Packed) {
      Pack<T> g = *reinterpret_cast<const Pack<T>*>(grad_out + at);
      const Pack<T> out = *reinterpret_cast<const Pack<T>*>(y + at);
#pragma unroll
      for (int j = 0; j < kStep; ++j) {
        g.v[j] = out.v[j] > T(0) ? g.v[j] : T(0);
        sum += g.v[j];
      }
      *reinterpret_cast<Pack<T>*>(grad_pre + at) = g;
    } else {
      const T g = y[at] > T(0) ? grad_out[at] : T(0);
      grad_pre[at] = g;
      sum += g;
    }
  }
  if (grad_bias) finish_channel_sum(sum, grad_bias, slice_sums, counters);
}

template <class T>
__global__ void bias_relu_max_pool2d_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                                            int64_t n, int64_t channels, int H, int W, int oh, int ow, int k) {
  wait_for_earlier_kernels();  // launched early: the convolution's output
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
        if (v > best || epilogue_isnan(v)) best = v;
      }
    out[o] = relu_of(best);
  }
}

template <class T>
__global__ void bias_relu_max_pool2d_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ x,
                                                     const T* __restrict__ bias, const T* __restrict__ pooled,
                                                     T* __restrict__ grad_pre, T* grad_bias, int64_t images,
                                                     int64_t images_per_slice, int H, int W, int oh, int ow, int k,
                                                     EpilogueSum<T>* slice_sums, unsigned* counters) {
  const int64_t c = blockIdx.x, channels = gridDim.x;
  const int64_t begin = blockIdx.y * images_per_slice;
  const int count = static_cast<int>(min(images, begin + images_per_slice) - begin);
  const T shift = bias ? bias[c] : T(0);
  const int pooled_area = oh * ow;
  EpilogueSum<T> sum = 0;
  // The slice's pooled planes of channel c as one range, so that every thread has work in every
  // round; 32-bit index math within the slice, as above.
  for (int e = threadIdx.x; e < count * pooled_area; e += kBlock) {
    const int n = e / pooled_area, r = e - n * pooled_area, i = r / ow, j = r - i * ow;
    const int64_t plane = (begin + n) * channels + c, o = plane * pooled_area + r;
    const int64_t corner = plane * H * W + (i * k) * W + j * k;
    const T* s = x + corner;
    T* d = grad_pre + corner;
    const T g = pooled[o] > T(0) ? grad_out[o] : T(0);  // ReLU passes nothing where its output is 0
    int best_at = 0;
    if (g != T(0)) {
      T best = s[0] + shift;
      for (int di = 0; di < k; ++di)
        for (int dj = 0; dj < k; ++dj) {
          const T v = s[di * W + dj] + shift;
          if (v > best) best = v, best_at = di * k + dj;
        }
    }
    for (int di = 0; di < k; ++di)
      for (int dj = 0; dj < k; ++dj) d[di * W + dj] = di * k + dj == best_at ? g : T(0);
    sum += g;
  }
  if (oh * k != H || ow * k != W) {  // rows or columns outside every window
    for (int e = threadIdx.x; e < count * H * W; e += kBlock) {
      const int n = e / (H * W), r = e - n * (H * W), h = r / W, w = r - h * W;
      if (h >= oh * k || w >= ow * k) grad_pre[((begin + n) * channels + c) * H * W + r] = T(0);
    }
  }
  if (grad_bias) finish_channel_sum(sum, grad_bias, slice_sums, counters);
}

// bias_relu_max_pool2d_backward_kernel for 2 x 2 windows tiling float32 planes whose rows are whole
// float4s (the MNIST CNN's 24 x 24 in strict float32): a thread takes two neighbouring windows, one
// float2 of the pooled tensors and a float4 from each of the windows' two rows, read and written.
// (A thread a window wrote 8 bytes at a time, every other 8 bytes of a row: at batch 512 on an H200
// the pass took 105.6 us, twice what its bytes need.)
__global__ void bias_relu_max_pool2x2_backward_kernel(const float* __restrict__ grad_out, const float* __restrict__ x,
                                                      const float* __restrict__ bias, const float* __restrict__ pooled,
                                                      float* __restrict__ grad_pre, float* grad_bias, int64_t images,
                                                      int64_t images_per_slice, int W, int oh, int ow,
                                                      EpilogueSum<float>* slice_sums, unsigned* counters) {
  wait_for_earlier_kernels();  // launched early: the output gradient
  const int64_t c = blockIdx.x, channels = gridDim.x;
  const int64_t begin = blockIdx.y * images_per_slice;
  const int count = static_cast<int>(min(images, begin + images_per_slice) - begin);
  const float shift = bias ? bias[c] : 0.f;
  const int pooled_area = oh * ow, pairs = pooled_area / 2, pair_cols = ow / 2;
  EpilogueSum<float> sum = 0;
  for (int e = threadIdx.x; e < count * pairs; e += kBlock) {
    const int n = e / pairs, r = e - n * pairs, i = r / pair_cols, j = (r - i * pair_cols) * 2;
    const int64_t plane = (begin + n) * channels + c, o = plane * pooled_area + i * ow + j;
    const float2 p = *reinterpret_cast<const float2*>(pooled + o), go = *reinterpret_cast<const float2*>(grad_out + o);
    const float g[2] = {p.x > 0.f ? go.x : 0.f, p.y > 0.f ? go.y : 0.f};  // ReLU passes nothing where its output is 0
    const int64_t corner = plane * (2 * oh) * W + int64_t(2 * i) * W + 2 * j;
    const float4 top = *reinterpret_cast<const float4*>(x + corner);
    const float4 bottom = *reinterpret_cast<const float4*>(x + corner + W);
    const float rows[2][4] = {{top.x, top.y, top.z, top.w}, {bottom.x, bottom.y, bottom.z, bottom.w}};
    float out[2][4] = {};
#pragma unroll
    for (int w = 0; w < 2; ++w) {  // window w: columns 2 w, 2 w + 1; the first maximum wins, as above
      float best = rows[0][2 * w] + shift;
      int best_di = 0, best_dj = 0;
#pragma unroll
      for (int di = 0; di < 2; ++di)
#pragma unroll
        for (int dj = 0; dj < 2; ++dj) {
          const float v = rows[di][2 * w + dj] + shift;
          if (v > best) best = v, best_di = di, best_dj = dj;
        }
      out[best_di][2 * w + best_dj] = g[w];
      sum += g[w];
    }
    *reinterpret_cast<float4*>(grad_pre + corner) = make_float4(out[0][0], out[0][1], out[0][2], out[0][3]);
    *reinterpret_cast<float4*>(grad_pre + corner + W) = make_float4(out[1][0], out[1][1], out[1][2], out[1][3]);
  }
  if (grad_bias) finish_channel_sum(sum, grad_bias, slice_sums, counters);
}

// ---- channels-last (NHWC) ----

// conv_bias_relu_backward over NHWC: the elements are rows of `channels`, a row being packs_per_row
// packs. Thread t always meets the same pack column, t % packs_per_row (the grid's stride is a
// multiple of it), so it keeps the bias sums of that column's kSize channels. The block's threads of
// one column then add theirs in a fixed order, each block leaves its row of channel sums in scratch,
// and the last block adds the rows in block order: deterministic, one launch.
template <class T>
__global__ void conv_bias_relu_backward_nhwc_kernel(const Pack<T>* __restrict__ grad_out, const Pack<T>* __restrict__ y,
                                                    Pack<T>* __restrict__ grad_pre, T* grad_bias, int64_t packs,
                                                    int packs_per_row, EpilogueSum<T>* block_sums, unsigned* counters) {
  constexpr int kSize = Pack<T>::kSize;
  EpilogueSum<T> sum[kSize] = {};
  for (int64_t p = blockIdx.x * int64_t(kBlock) + threadIdx.x; p < packs; p += int64_t(gridDim.x) * kBlock) {
    Pack<T> g = grad_out[p];
    const Pack<T> out = y[p];
#pragma unroll
    for (int j = 0; j < kSize; ++j) {
      g.v[j] = out.v[j] > T(0) ? g.v[j] : T(0);
      sum[j] += g.v[j];
    }
    grad_pre[p] = g;
  }
  if (!grad_bias) return;
  __shared__ EpilogueSum<T> partial[kBlock * kSize];
#pragma unroll
  for (int j = 0; j < kSize; ++j) partial[threadIdx.x * kSize + j] = sum[j];
  __syncthreads();
  const int channels = packs_per_row * kSize;
  for (int c = threadIdx.x; c < channels; c += kBlock) {
    const int column = c / kSize, j = c % kSize;
    EpilogueSum<T> total = 0;
    for (int t = column; t < kBlock; t += packs_per_row) total += partial[t * kSize + j];
    if (gridDim.x == 1) grad_bias[c] = static_cast<T>(total);
    else block_sums[blockIdx.x * int64_t(channels) + c] = total;
  }
  if (gridDim.x == 1 || !last_block_of_group(counters, 0, gridDim.x)) return;
  for (int c = threadIdx.x; c < channels; c += kBlock) {
    EpilogueSum<T> total = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += __ldcg(&block_sums[b * int64_t(channels) + c]);
    grad_bias[c] = static_cast<T>(total);
  }
}

// What block (r, n) of a channels-last pooling kernel covers: output rows [i0, i0 + here) of image n,
// span = here * ow pixels of `channels`, windows of kw (K where known when compiling), and its rows
// staged in dynamic shared memory as [channels, span].
template <class T, int K>
struct PoolRows {
  T* row;
  int i0, here, span, channels, kw;
  int64_t n;
  __device__ PoolRows(int channels, int oh, int ow, int k, int rows)
      : row(staged()), i0(blockIdx.x * rows), here(min(rows, oh - i0)), span(here * ow), channels(channels),
        kw(K ? K : k), n(blockIdx.y) {}
  static __device__ T* staged() {
    extern __shared__ unsigned char row_bytes[];
    return reinterpret_cast<T*>(row_bytes);
  }
};

// bias_relu_max_pool2d from NHWC x into NCHW out. Block (r, n) makes output rows [r * rows, (r + 1)
// * rows) of image n for every channel: thread e reads the windows of one output pixel a Pack of
// channels at a time (16-byte loads, the window unrolled for K = 2), keeps the rows in shared memory
// as [C, rows * ow], and the block writes each channel's rows out, contiguous in NCHW.
template <class T, int K>
__global__ void bias_relu_max_pool2d_nhwc_kernel(const Pack<T>* __restrict__ x, const T* __restrict__ bias,
                                                 T* __restrict__ out, int packs, int H, int W, int oh, int ow, int k,
                                                 int rows) {
  constexpr int kSize = Pack<T>::kSize;
  const PoolRows<T, K> b(packs * kSize, oh, ow, k, rows);
  T* row = b.row;
  const int i0 = b.i0, here = b.here, span = b.span, channels = b.channels, kw = b.kw;
  const int64_t n = b.n;
  for (int e = threadIdx.x; e < packs * span; e += blockDim.x) {
    const int pk = e % packs, r = e / packs, i = i0 + r / ow, j = r % ow;
    const Pack<T>* s = x + ((n * H + i * kw) * W + j * kw) * packs + pk;
    T shift[kSize], best[kSize];
    const Pack<T> first = s[0];
#pragma unroll
    for (int l = 0; l < kSize; ++l) {
      shift[l] = bias ? bias[pk * kSize + l] : T(0);
      best[l] = first.v[l] + shift[l];
    }
    // As max_pool2d over relu(x + b): the first maximum wins and a NaN wins over numbers.
#pragma unroll
    for (int di = 0; di < kw; ++di)
#pragma unroll
      for (int dj = 0; dj < kw; ++dj) {
        const Pack<T> v = s[(int64_t(di) * W + dj) * packs];
#pragma unroll
        for (int l = 0; l < kSize; ++l) {
          const T value = v.v[l] + shift[l];
          if (value > best[l] || epilogue_isnan(value)) best[l] = value;
        }
      }
#pragma unroll
    for (int l = 0; l < kSize; ++l) row[(pk * kSize + l) * span + r] = relu_of(best[l]);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < channels * span; e += blockDim.x) {
    const int c = e / span, r = e - c * span;
    out[((n * channels + c) * oh + i0) * ow + r] = row[e];
  }
}

// The backward's scatter into NHWC grad_pre from the pooled gradient (NCHW), through the ReLU (the
// pooled output `out` > 0): each window's gradient goes to its first maximum of x + b, zeros
// elsewhere, and rows and columns outside every window get zeros. Blocks as in the forward (past
// 65,535 images, block (r, m) takes images m, m + gridDim.y, ...); the pooled rows are staged in
// shared memory as [C, rows * ow] so that both sides are read in their own order. With block_sums,
// the block also adds its rows' gradient per channel into its own row of block_sums, which
// channel_sums_kernel then adds in block order: the bias gradient, deterministic. (A pass of its own
// for the mask and the bias, as the NCHW epilogue has, took 6.8 us of a 185 us step at the MNIST
// CNN's batch 64. Blocks that each took 3 images, to leave fewer rows of sums, made the scatter 75
// us at batch 512.)
template <class T, int K>
__global__ void max_unpool2d_nhwc_kernel(const T* __restrict__ grad_out, const T* __restrict__ out,
                                         const Pack<T>* __restrict__ x, const T* __restrict__ bias,
                                         Pack<T>* __restrict__ grad_pre, EpilogueSum<T>* __restrict__ block_sums,
                                         int images, int packs, int H, int W, int oh, int ow, int k, int rows) {
  constexpr int kSize = Pack<T>::kSize;
  const PoolRows<T, K> b(packs * kSize, oh, ow, k, rows);
  T* row = b.row;
  const int i0 = b.i0, here = b.here, span = b.span, channels = b.channels, kw = b.kw;
  EpilogueSum<T>* sums = block_sums ? block_sums + (int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * channels : nullptr;
  wait_for_earlier_kernels();
  let_next_kernel_start();  // the sum's blocks wait until these are done
  for (int64_t n = b.n; n < images; n += gridDim.y) {
    if (n != b.n) __syncthreads();  // the previous image's rows are read
    for (int e = threadIdx.x; e < channels * span; e += blockDim.x) {
      const int c = e / span, r = e - c * span;
      const int64_t at = ((n * channels + c) * oh + i0) * ow + r;
      row[e] = out[at] > T(0) ? grad_out[at] : T(0);
    }
    __syncthreads();
    if (sums)
      for (int c = threadIdx.x; c < channels; c += blockDim.x) {
        EpilogueSum<T> s = n == b.n ? EpilogueSum<T>(0) : sums[c];
        for (int r = 0; r < span; ++r) s += static_cast<EpilogueSum<T>>(row[c * span + r]);
        sums[c] = s;
      }
    for (int e = threadIdx.x; e < packs * span; e += blockDim.x) {
      const int pk = e % packs, r = e / packs, i = i0 + r / ow, j = r % ow;
      const int64_t corner = ((n * H + i * kw) * W + j * kw) * packs + pk;
      T g[kSize], shift[kSize], best[kSize];
      int best_at[kSize];
      const Pack<T> first = x[corner];
#pragma unroll
      for (int l = 0; l < kSize; ++l) {
        g[l] = row[(pk * kSize + l) * span + r];
        shift[l] = bias ? bias[pk * kSize + l] : T(0);
        best[l] = first.v[l] + shift[l];
        best_at[l] = 0;
      }
#pragma unroll
      for (int di = 0; di < kw; ++di)
#pragma unroll
        for (int dj = 0; dj < kw; ++dj) {
          const Pack<T> v = x[corner + (int64_t(di) * W + dj) * packs];
#pragma unroll
          for (int l = 0; l < kSize; ++l) {
            const T value = v.v[l] + shift[l];
            if (value > best[l]) best[l] = value, best_at[l] = di * kw + dj;
          }
        }
#pragma unroll
      for (int di = 0; di < kw; ++di)
#pragma unroll
        for (int dj = 0; dj < kw; ++dj) {
          Pack<T> d;
#pragma unroll
          for (int l = 0; l < kSize; ++l) d.v[l] = di * kw + dj == best_at[l] ? g[l] : T(0);
          grad_pre[corner + (int64_t(di) * W + dj) * packs] = d;
        }
    }
    // Columns right of the last window, in this block's input rows; the last block of the image
    // takes the rows below every window too.
    Pack<T> zero;
#pragma unroll
    for (int l = 0; l < kSize; ++l) zero.v[l] = T(0);
    const int tail_w = W - ow * kw;
    for (int e = threadIdx.x; e < here * kw * tail_w * packs; e += blockDim.x) {
      const int r = e / (tail_w * packs), rest = e - r * tail_w * packs;
      grad_pre[((n * H + i0 * kw + r) * W + ow * kw) * packs + rest] = zero;
    }
    if (i0 + here == oh)
      for (int64_t e = threadIdx.x; e < int64_t(H - oh * kw) * W * packs; e += blockDim.x)
        grad_pre[(n * H + oh * kw) * int64_t(W) * packs + e] = zero;
  }
}

// Images a grid of max_unpool2d_nhwc_kernel spans at most (gridDim.y); past that, blocks take
// several each.
constexpr int64_t kMaxImageBlocks = 65535;
// channel_sums_kernel: a block adds kSumRows rows of 32 channels, kSumGroups threads a channel.
constexpr int kSumGroups = 32;
constexpr int kSumRows = 512;

// sums[blockIdx.y][c] = rows [kSumRows * blockIdx.y, + kSumRows) of column c added in a fixed order:
// thread (c, group) adds rows group, group + kSumGroups, ... (loads in flight together), then group
// 0 adds the groups' sums in order. Run again on its own output until one row is left.
template <class S, class Out>
__global__ void channel_sums_kernel(const S* __restrict__ rows, int count, int channels, Out* __restrict__ sums) {
  __shared__ S part[kSumGroups][32];
  const int lane = threadIdx.x % 32, group = threadIdx.x / 32, c = blockIdx.x * 32 + lane;
  const int begin = blockIdx.y * kSumRows, end = min(count, begin + kSumRows);
  wait_for_earlier_kernels();
  let_next_kernel_start();
  S s = 0;
  if (c < channels) {
#pragma unroll
    for (int i = 0; i < kSumRows / kSumGroups; ++i) {
      const int r = begin + group + i * kSumGroups;
      if (r < end) s += __ldcg(rows + int64_t(r) * channels + c);
    }
  }
  part[group][lane] = s;
  __syncthreads();
  if (group != 0 || c >= channels) return;
  for (int g = 1; g < kSumGroups; ++g) s += part[g][lane];
  sums[int64_t(blockIdx.y) * channels + c] = static_cast<Out>(s);
}

// Output rows per block of the channels-last pooling kernels: enough pixel-packs to occupy the
// block, within the shared memory of their staged rows; 0 where even one row does not fit.
int pool_rows_per_block(int64_t channels, int64_t pack, int64_t oh, int64_t ow, size_t element) {
  const int64_t row_bytes = channels * ow * static_cast<int64_t>(element);
  if (channels % pack != 0 || row_bytes > kMaxRowBytes) return 0;
  const int64_t wanted = (kBlock + channels / pack * ow - 1) / (channels / pack * ow);
  return static_cast<int>(std::clamp<int64_t>(std::min(wanted, kMaxRowBytes / row_bytes), 1, oh));
}

// Blocks per channel: enough blocks in all to fill the GPU, each with some images to loop over, and
// few enough images per block that its elements count in 32 bits. Throws where one image's plane is
// too large for that (2^31 elements).
struct Slices {
  int64_t count, images_per_slice;
};
Slices slices_for(int64_t images, int64_t channels, int64_t plane) {
  MINIDL_CHECK(plane < (int64_t{1} << 31), "conv2d epilogue on CUDA: a plane of ", plane,
               " elements exceeds the kernels' 32-bit index");
  const int64_t wanted = (1024 + channels - 1) / channels;
  int64_t slices = std::clamp<int64_t>(std::min(wanted, images), 1, kMaxSlices);
  const int64_t most_images = std::max<int64_t>(1, ((int64_t{1} << 31) - 1) / plane);
  slices = std::max(slices, (images + most_images - 1) / most_images);
  if (channels > kMaxCounterGroups) {  // the bias sum's counters cover kMaxCounterGroups channels
    MINIDL_CHECK(images <= most_images, "conv2d epilogue on CUDA: ", channels, " channels of ", images,
                 " planes of ", plane, " elements exceed the kernels' limits");
    slices = 1;
  }
  const int64_t per_slice = (images + slices - 1) / slices;
  return {(images + per_slice - 1) / per_slice, per_slice};  // no empty slice at the end
}

// Whether t [N, C, H, W] is laid out channels-last and not also contiguous (one channel, or one
// pixel, is both: the NCHW kernels serve it).
bool nhwc(const Tensor& t) { return !t.is_contiguous() && t.is_contiguous(MemoryFormat::ChannelsLast); }

// The layout of the epilogue's operands: the first one's, which the others must share.
bool same_layout(const char* op, std::initializer_list<const Tensor*> tensors) {
  const bool channels_last = nhwc(**tensors.begin());
  const MemoryFormat format = channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  for (const Tensor* t : tensors)
    MINIDL_CHECK(t->is_contiguous(format), op, " on CUDA: expected every tensor ",
                 channels_last ? "channels-last" : "contiguous", ", got one of shape ", t->shape(), " with strides ",
                 t->strides());
  return channels_last;
}


}  // namespace

void CudaKernels::conv_bias_act(const Tensor& x, const Tensor* bias, bool relu, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  const bool channels_last = same_layout("conv_bias_act", {&x, &y});
  const int64_t area = x.size(2) * x.size(3), channels = x.size(1);
  dispatch_floating_and_half(x.dtype(), "conv_bias_act", [&](auto tag) {
    using T = decltype(tag);
    const T* b = bias ? ptr<const T>(*bias) : nullptr;
    constexpr int kSize = Pack<T>::kSize;
    const bool packed = (channels_last ? channels : area) % kSize == 0 &&
                        reinterpret_cast<uintptr_t>(x.raw_data()) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(y.raw_data()) % 16 == 0;
    const auto launch = [&](auto index, auto relu_tag, auto layout_tag) {
      using I = decltype(index);
      constexpr bool kRelu = decltype(relu_tag)::value, kChannelsLast = decltype(layout_tag)::value;
      if (packed) {
        conv_bias_act_kernel<T, kRelu, kChannelsLast, I><<<blocks_for(n / kSize, kBlock), kBlock, 0, stream_>>>(
            static_cast<const Pack<T>*>(x.raw_data()), b, static_cast<Pack<T>*>(y.raw_data()), I(n / kSize), I(area),
            I(channels));
      } else {
        conv_bias_act_scalar_kernel<T, kRelu, kChannelsLast, I><<<blocks_for(n), kBlock, 0, stream_>>>(
            ptr<const T>(x), b, ptr<T>(y), I(n), I(area), I(channels));
      }
    };
    const auto with_layout = [&](auto index, auto relu_tag) {
      if (channels_last) launch(index, relu_tag, std::true_type{});
      else launch(index, relu_tag, std::false_type{});
    };
    const auto with_relu = [&](auto index) {
      if (relu) with_layout(index, std::true_type{});
      else with_layout(index, std::false_type{});
    };
    if (n < (int64_t{1} << 31)) with_relu(int32_t{});
    else with_relu(int64_t{});
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
  if (same_layout("conv_bias_relu_backward", {&y, &grad_out, &grad_pre})) {
    conv_bias_relu_backward_channels_last(grad_out, y, grad_pre, grad_bias);
    return;
  }
  const Slices split = slices_for(images, channels, area);
  const int64_t slices = split.count, per_slice = split.images_per_slice;
  dispatch_floating_and_half(y.dtype(), "conv_bias_relu_backward", [&](auto tag) {
    using T = decltype(tag);
    Tensor scratch;
    if (grad_bias && slices > 1) scratch = Tensor::empty({slices, channels}, dtype_of<EpilogueSum<T>>(), y.device());
    const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(slices));
    const bool packed = area % Pack<T>::kSize == 0 &&
                        reinterpret_cast<uintptr_t>(grad_out.raw_data()) % alignof(Pack<T>) == 0 &&
                        reinterpret_cast<uintptr_t>(y.raw_data()) % alignof(Pack<T>) == 0 &&
                        reinterpret_cast<uintptr_t>(grad_pre.raw_data()) % alignof(Pack<T>) == 0;
    EpilogueSum<T>* sums = scratch.defined() ? ptr<EpilogueSum<T>>(scratch) : nullptr;
    unsigned* counters = scratch.defined() ? block_counters(device_, stream_) : nullptr;
    T* gb = grad_bias ? ptr<T>(*grad_bias) : nullptr;
    if (packed)
      conv_bias_relu_backward_kernel<T, true><<<grid, kBlock, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<const T>(y), ptr<T>(grad_pre), gb, images, per_slice, static_cast<int>(area),
          sums, counters);
    else
      conv_bias_relu_backward_kernel<T, false><<<grid, kBlock, 0, stream_>>>(
          ptr<const T>(grad_out), ptr<const T>(y), ptr<T>(grad_pre), gb, images, per_slice, static_cast<int>(area),
          sums, counters);
    CUDA_LAUNCH_CHECK(conv_bias_relu_backward_kernel);
  });
}

void CudaKernels::conv_bias_relu_backward_channels_last(const Tensor& grad_out, const Tensor& y, Tensor& grad_pre,
                                                        Tensor* grad_bias) {
  const int64_t channels = y.size(1);
  dispatch_floating_and_half(y.dtype(), "conv_bias_relu_backward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kSize = Pack<T>::kSize;
    const int64_t packs_per_row = channels / kSize;
    const bool fits = channels % kSize == 0 && kBlock % packs_per_row == 0 &&
                      aligned_to(alignof(Pack<T>), {grad_out.raw_data(), y.raw_data(), grad_pre.raw_data()});
    if (!fits) {  // channel counts the kernel's columns do not tile: through NCHW copies
      Tensor g = Tensor::empty(y.shape(), y.dtype(), y.device()), yc = Tensor::empty(y.shape(), y.dtype(), y.device());
      copy(grad_out, g);
      copy(y, yc);
      Tensor pre = Tensor::empty(y.shape(), y.dtype(), y.device());
      conv_bias_relu_backward(g, yc, pre, grad_bias);
      copy(pre, grad_pre);
      return;
    }
    const int64_t packs = y.numel() / kSize;
    const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>((packs + kBlock - 1) / kBlock, 1, 512));
    Tensor scratch;
    if (grad_bias && blocks > 1) scratch = Tensor::empty({blocks, channels}, dtype_of<EpilogueSum<T>>(), y.device());
    conv_bias_relu_backward_nhwc_kernel<T><<<blocks, kBlock, 0, stream_>>>(
        static_cast<const Pack<T>*>(grad_out.raw_data()), static_cast<const Pack<T>*>(y.raw_data()),
        static_cast<Pack<T>*>(grad_pre.raw_data()), grad_bias ? ptr<T>(*grad_bias) : nullptr, packs,
        static_cast<int>(packs_per_row), scratch.defined() ? ptr<EpilogueSum<T>>(scratch) : nullptr,
        scratch.defined() ? block_counters(device_, stream_) : nullptr);
    CUDA_LAUNCH_CHECK(conv_bias_relu_backward_nhwc_kernel);
  });
}

void CudaKernels::bias_relu_max_pool2d(const Tensor& x, const Tensor* bias, int64_t k, Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  MINIDL_CHECK(out.is_contiguous(), "bias_relu_max_pool2d on CUDA: expected a contiguous output");
  const int64_t channels = x.size(1), oh = out.size(2), ow = out.size(3);
  const bool channels_last = nhwc(x);
  MINIDL_CHECK(channels_last || x.is_contiguous(), "bias_relu_max_pool2d on CUDA: expected x contiguous or channels-last");
  dispatch_floating_and_half(x.dtype(), "bias_relu_max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const int rows = channels_last && aligned_to(16, {x.raw_data()})
                         ? pool_rows_per_block(channels, Pack<T>::kSize, oh, ow, sizeof(T))
                         : 0;
    if (rows > 0) {
      const dim3 grid(static_cast<unsigned>((oh + rows - 1) / rows), static_cast<unsigned>(out.size(0)));
      const size_t bytes = static_cast<size_t>(channels * rows * ow) * sizeof(T);
      const auto launch = [&](auto kernel) {
        kernel<<<grid, kBlock, bytes, stream_>>>(
            static_cast<const Pack<T>*>(x.raw_data()), bias ? ptr<const T>(*bias) : nullptr, ptr<T>(out),
            static_cast<int>(channels / Pack<T>::kSize), static_cast<int>(x.size(2)), static_cast<int>(x.size(3)),
            static_cast<int>(oh), static_cast<int>(ow), static_cast<int>(k), rows);
      };
      if (k == 2) launch(bias_relu_max_pool2d_nhwc_kernel<T, 2>);
      else launch(bias_relu_max_pool2d_nhwc_kernel<T, 0>);
      CUDA_LAUNCH_CHECK(bias_relu_max_pool2d_nhwc_kernel);
      return;
    }
    // NCHW; channels-last only through a copy (channel counts the packs do not tile).
    Tensor xc = x;
    if (channels_last) {
      xc = Tensor::empty(x.shape(), x.dtype(), x.device());
      copy(x, xc);
    }
    launch_early("bias_relu_max_pool2d_kernel", bias_relu_max_pool2d_kernel<T>, dim3(blocks_for(n)), dim3(kBlock), 0,
                 stream_, ptr<const T>(xc), bias ? ptr<const T>(*bias) : nullptr, ptr<T>(out), n, x.size(1),
                 static_cast<int>(x.size(2)), static_cast<int>(x.size(3)), static_cast<int>(out.size(2)),
                 static_cast<int>(out.size(3)), static_cast<int>(k));
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
  MINIDL_CHECK(grad_out.is_contiguous() && out.is_contiguous(),
               "bias_relu_max_pool2d_backward on CUDA: expected the pooled tensors contiguous");
  if (same_layout("bias_relu_max_pool2d_backward", {&x, &grad_pre})) {
    // One pass: the ReLU's mask on the pooled tensors and the scatter into NHWC, with the bias
    // gradient's block sums on the pooled rows (each window routes its whole gradient to one
    // element, so the sums are the same); then their sum.
    const int64_t oh = out.size(2), ow = out.size(3);
    const int rows = aligned_to(16, {x.raw_data(), grad_pre.raw_data()})
                         ? pool_rows_per_block(channels, 16 / element_size(x.dtype()), oh, ow, element_size(x.dtype()))
                         : 0;
    if (rows == 0) {  // channel counts the packs do not tile: through NCHW copies
      Tensor xc = Tensor::empty(x.shape(), x.dtype(), x.device()), pre = Tensor::empty(x.shape(), x.dtype(), x.device());
      copy(x, xc);
      bias_relu_max_pool2d_backward(grad_out, xc, bias, out, k, pre, grad_bias);
      copy(pre, grad_pre);
      return;
    }
    dispatch_floating_and_half(x.dtype(), "bias_relu_max_pool2d_backward", [&](auto tag) {
      using T = decltype(tag);
      const int64_t row_blocks = (oh + rows - 1) / rows;
      const int64_t image_blocks = std::min(images, kMaxImageBlocks);
      Tensor block_sums;
      if (grad_bias)
        block_sums = Tensor::empty({row_blocks * image_blocks, channels}, dtype_of<EpilogueSum<T>>(), x.device());
      const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(image_blocks));
      const size_t bytes = static_cast<size_t>(channels * rows * ow) * sizeof(T);
      const auto launch = [&](auto kernel) {
        cuda::launch_early("max_unpool2d_nhwc_kernel", kernel, grid, dim3(kBlock), bytes, stream_,
                           ptr<const T>(grad_out), ptr<const T>(out), static_cast<const Pack<T>*>(x.raw_data()),
                           bias ? ptr<const T>(*bias) : nullptr, static_cast<Pack<T>*>(grad_pre.raw_data()),
                           grad_bias ? ptr<EpilogueSum<T>>(block_sums) : nullptr, static_cast<int>(images),
                           static_cast<int>(channels / Pack<T>::kSize), static_cast<int>(x.size(2)),
                           static_cast<int>(x.size(3)), static_cast<int>(oh), static_cast<int>(ow),
                           static_cast<int>(k), rows);
      };
      if (k == 2) launch(max_unpool2d_nhwc_kernel<T, 2>);
      else launch(max_unpool2d_nhwc_kernel<T, 0>);
      if (grad_bias) {
        // The block sums' rows added kSumRows at a time until one row is left.
        using S = EpilogueSum<T>;
        Tensor rows_left = block_sums;
        while (rows_left.size(0) > kSumRows) {
          const int64_t count = rows_left.size(0), blocks = (count + kSumRows - 1) / kSumRows;
          Tensor next = Tensor::empty({blocks, channels}, dtype_of<S>(), x.device());
          cuda::launch_early("channel_sums_kernel", channel_sums_kernel<S, S>,
                             dim3(static_cast<unsigned>((channels + 31) / 32), static_cast<unsigned>(blocks)),
                             dim3(32 * kSumGroups), 0, stream_, ptr<const S>(rows_left), static_cast<int>(count),
                             static_cast<int>(channels), ptr<S>(next));
          rows_left = next;
        }
        cuda::launch_early("channel_sums_kernel", channel_sums_kernel<S, T>,
                           dim3(static_cast<unsigned>((channels + 31) / 32)), dim3(32 * kSumGroups), 0, stream_,
                           ptr<const S>(rows_left), static_cast<int>(rows_left.size(0)), static_cast<int>(channels),
                           ptr<T>(*grad_bias));
      }
    });
    return;
  }
  const Slices split = slices_for(images, channels, x.size(2) * x.size(3));
  const int64_t slices = split.count, per_slice = split.images_per_slice;
  const int64_t oh = out.size(2), ow = out.size(3);
  if (x.dtype() == kFloat32 && k == 2 && x.size(2) == 2 * oh && x.size(3) == 2 * ow && ow % 2 == 0 &&
      aligned_to(16, {x.raw_data(), grad_pre.raw_data()}) && aligned_to(8, {out.raw_data(), grad_out.raw_data()})) {
    Tensor scratch;
    using S = EpilogueSum<float>;
    if (grad_bias && slices > 1) scratch = Tensor::empty({slices, channels}, dtype_of<S>(), x.device());
    unsigned* counters = scratch.defined() ? block_counters(device_, stream_) : nullptr;
    launch_early("bias_relu_max_pool2x2_backward_kernel", bias_relu_max_pool2x2_backward_kernel,
                 dim3(static_cast<unsigned>(channels), static_cast<unsigned>(slices)), dim3(kBlock), 0, stream_,
                 ptr<const float>(grad_out), ptr<const float>(x), bias ? ptr<const float>(*bias) : nullptr,
                 ptr<const float>(out), ptr<float>(grad_pre), grad_bias ? ptr<float>(*grad_bias) : nullptr, images,
                 per_slice, static_cast<int>(x.size(3)), static_cast<int>(oh), static_cast<int>(ow),
                 scratch.defined() ? ptr<S>(scratch) : nullptr, counters);
    return;
  }
  dispatch_floating_and_half(x.dtype(), "bias_relu_max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    Tensor scratch;
    if (grad_bias && slices > 1) scratch = Tensor::empty({slices, channels}, dtype_of<EpilogueSum<T>>(), x.device());
    const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(slices));
    bias_relu_max_pool2d_backward_kernel<T><<<grid, kBlock, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const T>(x), bias ? ptr<const T>(*bias) : nullptr, ptr<const T>(out),
        ptr<T>(grad_pre), grad_bias ? ptr<T>(*grad_bias) : nullptr, images, per_slice, static_cast<int>(x.size(2)),
        static_cast<int>(x.size(3)), static_cast<int>(out.size(2)), static_cast<int>(out.size(3)),
        static_cast<int>(k), scratch.defined() ? ptr<EpilogueSum<T>>(scratch) : nullptr,
        scratch.defined() ? block_counters(device_, stream_) : nullptr);
    CUDA_LAUNCH_CHECK(bias_relu_max_pool2d_backward_kernel);
  });
}

}  // namespace minidl
