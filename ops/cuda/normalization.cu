// Batch and group (and so layer) normalization on CUDA, x viewed as [N, C, L]: one reduction pass
// for the statistics (or the backward's sums), then one elementwise pass.
//  - Statistics are merged pairwise as (count, mean, squared deviations) (Chan et al.), in double
//    for float like the CPU's two passes: no cancellation of a sum of squares, and a fixed
//    combination order, so results are the same run to run.
//  - Per-channel reductions over N and L (batch norm's statistics, every weight and bias gradient):
//    a block per channel with cub::BlockReduce where planes are long (L > 1); where L == 1 ([N, C]
//    inputs, layer norm's columns) a 32-column tile per block, which reads rows coalesced, over a
//    chunk of the rows, then a kernel that combines the chunks' partials in order. Layer norm's rows
//    of up to 512 sum their weight and bias gradients in grad_x's kernel instead (see below).
//  - Per-row reductions (a group norm's sample and group, a layer norm's row: contiguous): a warp
//    per row up to 1024 elements (cub::WarpReduce), a block per row beyond.
//  - The elementwise passes use the CPU's formulas (ops/cpu/normalization.cpp).
//  - dropout_add_layer_norm (residual + dropout(x), then its layer norm) is the layer norm rows'
//    kernels with the dropout and the addition folded in, forward and backward (the end of this
//    file); the op composes them where these decline (ops/normalization.cpp).
// Index arithmetic is 32-bit where every offset fits, as in the pooling kernels.
#include <vector>

#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include "core/cuda/context.h"
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class A>
struct Moments {
  A n, mean, m2;
};

template <class A>
__device__ __forceinline__ Moments<A> moments_of(A v) {
  return {A(1), v, A(0)};
}

template <class A>
__device__ __forceinline__ Moments<A> operator+(const Moments<A>& a, const Moments<A>& b) {
  if (a.n == A(0)) return b;
  if (b.n == A(0)) return a;
  const A n = a.n + b.n, d = b.mean - a.mean, f = b.n / n;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

template <class A>
struct Sums {
  A a, b;
};

template <class A>
__device__ __forceinline__ Sums<A> operator+(const Sums<A>& x, const Sums<A>& y) {
  return {x.a + y.a, x.b + y.b};
}

struct Plus {
  template <class V>
  __device__ __forceinline__ V operator()(const V& a, const V& b) const {
    return a + b;
  }
};

constexpr int kColTile = 32, kColRows = 16;
constexpr int kWarpRows = 8;
constexpr int64_t kWarpRowMax = 1024;

// ---- reductions: an Op gives each element's contribution (load) and stores a result (finish) ----

// Channel c of [N, C, L] reduced over N and L by block c (L > 1).
template <class Acc, class I, class Op>
__global__ void channel_reduce_blocks(I n, I channels, I l, Op op) {
  using BlockReduce = cub::BlockReduce<Acc, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const I count = n * l;
  for (I c = blockIdx.x; c < channels; c += gridDim.x) {
    Acc acc{};
    for (I i = threadIdx.x; i < count; i += kThreads) {
      const I s = i / l;
      acc = acc + op.load(s, c, i - s * l);
    }
    acc = BlockReduce(temp).Reduce(acc, Plus());
    if (threadIdx.x == 0) op.finish(c, acc);
    __syncthreads();  // temp is reused by the next channel
  }
}

// L == 1: block (t, k), of Tile x Rows threads, reduces the Tile adjacent columns of tile t over the
// k-th chunk of rows, Rows partial sums per column, and finishes them where there is one chunk, else
// writes them to partial[k][c] for channel_combine_chunks. Tile and Rows are kColTile and kColRows
// but for finish_row_chunks below.
template <class Acc, class I, class Op, int Tile = kColTile, int Rows = kColRows>
__global__ void channel_reduce_columns(I n, I channels, I chunk_rows, Op op, Acc* partial) {
  __shared__ Acc tile[Rows][Tile];
  const I c = blockIdx.x * I(Tile) + threadIdx.x;
  const I begin = I(blockIdx.y) * chunk_rows, end = begin + chunk_rows < n ? begin + chunk_rows : n;
  Acc acc{};
  if (c < channels) {
    for (I s = begin + I(threadIdx.y); s < end; s += Rows) acc = acc + op.load(s, c, I(0));
  }
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    for (int j = 1; j < Rows; ++j) acc = acc + tile[j][threadIdx.x];
    if (partial) partial[int64_t(blockIdx.y) * channels + c] = acc;
    else op.finish(c, acc);
  }
}

// Each column's chunk partials, combined in chunk order (the same order every run).
template <class Acc, class I, class Op>
__global__ void channel_combine_chunks(I chunks, I channels, const Acc* partial, Op op) {
  for (I c = blockIdx.x * I(blockDim.x) + threadIdx.x; c < channels; c += I(gridDim.x) * blockDim.x) {
    Acc acc = partial[c];
    for (I k = 1; k < chunks; ++k) acc = acc + partial[int64_t(k) * channels + c];
    op.finish(c, acc);
  }
}

// Column tiles times row chunks: about this many blocks, so that a [N, C] reduction with few
// columns still fills the GPU. One block per 32 columns alone gave 12 blocks for layer norm's
// weight gradient over [16384, 384] (nanoGPT's width): 345 us on an H100.
constexpr int64_t kColBlocks = 512;
constexpr int64_t kMinChunkRows = 8 * kColRows;

template <class Acc, class I, class Op>
void reduce_columns(I n, I channels, const Op& op, Device device, cudaStream_t stream) {
  const int64_t tiles = (int64_t(channels) + kColTile - 1) / kColTile;
  const int64_t most_chunks = std::max<int64_t>(1, int64_t(n) / kMinChunkRows);
  const int64_t wanted = std::clamp<int64_t>(kColBlocks / tiles, 1, std::min<int64_t>(most_chunks, 65535));
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t(n) + wanted - 1) / wanted);
  const int64_t chunks = std::max<int64_t>(1, (int64_t(n) + chunk_rows - 1) / chunk_rows);
  Tensor partial;  // from the caching allocator: capturable in a CUDA graph
  if (chunks > 1) partial = Tensor::empty({chunks * int64_t(channels) * int64_t(sizeof(Acc))}, kUInt8, device);
  Acc* partial_ptr = chunks > 1 ? static_cast<Acc*>(partial.raw_data()) : nullptr;
  const dim3 block(kColTile, kColRows);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  channel_reduce_columns<Acc, I, Op><<<grid, block, 0, stream>>>(n, channels, I(chunk_rows), op, partial_ptr);
  CUDA_LAUNCH_CHECK(channel_reduce_columns);
  if (chunks > 1) {
    channel_combine_chunks<Acc, I, Op><<<blocks_for(int64_t(channels)), kThreads, 0, stream>>>(
        I(chunks), channels, partial_ptr, op);
    CUDA_LAUNCH_CHECK(channel_combine_chunks);
  }
}

template <class Acc, class I, class Op>
void reduce_channels(I n, I channels, I l, const Op& op, Device device, cudaStream_t stream) {
  if (channels == 0) return;
  if (l == 1) {
    reduce_columns<Acc, I, Op>(n, channels, op, device, stream);
  } else {
    channel_reduce_blocks<Acc, I, Op><<<blocks_for(int64_t(channels), 1), kThreads, 0, stream>>>(n, channels, l, op);
    CUDA_LAUNCH_CHECK(channel_reduce_blocks);
  }
}

// Rows of d contiguous elements, a warp each, kWarpRows rows per block.
template <class Acc, class I, class Op>
__global__ void row_reduce_warps(I rows, I d, Op op) {
  using WarpReduce = cub::WarpReduce<Acc>;
  __shared__ typename WarpReduce::TempStorage temp[kWarpRows];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (I row = blockIdx.x * I(kWarpRows) + warp; row < rows; row += I(gridDim.x) * kWarpRows) {
    Acc acc{};
    for (I j = lane; j < d; j += 32) acc = acc + op.load(row, j);
    acc = WarpReduce(temp[warp]).Reduce(acc, Plus());
    if (lane == 0) op.finish(row, acc);
    __syncwarp();
  }
}

// Rows of more than kWarpRowMax elements, a block each.
template <class Acc, class I, class Op>
__global__ void row_reduce_blocks(I rows, I d, Op op) {
  using BlockReduce = cub::BlockReduce<Acc, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  for (I row = blockIdx.x; row < rows; row += gridDim.x) {
    Acc acc{};
    for (I j = threadIdx.x; j < d; j += kThreads) acc = acc + op.load(row, j);
    acc = BlockReduce(temp).Reduce(acc, Plus());
    if (threadIdx.x == 0) op.finish(row, acc);
    __syncthreads();
  }
}

template <class Acc, class I, class Op>
void reduce_rows(I rows, I d, const Op& op, cudaStream_t stream) {
  if (rows == 0) return;
  if (d <= kWarpRowMax) {
    row_reduce_warps<Acc, I, Op><<<blocks_for(int64_t(rows), kWarpRows), kWarpRows * 32, 0, stream>>>(rows, d, op);
    CUDA_LAUNCH_CHECK(row_reduce_warps);
  } else {
    row_reduce_blocks<Acc, I, Op><<<blocks_for(int64_t(rows), 1), kThreads, 0, stream>>>(rows, d, op);
    CUDA_LAUNCH_CHECK(row_reduce_blocks);
  }
}

// ---- the ops' loads and finishes ----

// Batch norm in training: a channel's moments; saves mean and invstd, updates the running statistics.
template <class T, class I>
struct BatchStats {
  using A = AccT<T>;
  const T* x;
  I channels, l;
  T *mean, *invstd, *running_mean, *running_var;
  double momentum, eps;
  __device__ Moments<A> load(I s, I c, I j) const { return moments_of(A(x[(s * channels + c) * l + j])); }
  __device__ void finish(I c, const Moments<A>& m) const {
    mean[c] = T(m.mean);
    invstd[c] = T(A(1) / d_sqrt(m.m2 / m.n + A(eps)));
    if (running_mean) {
      running_mean[c] = T((1 - momentum) * A(running_mean[c]) + momentum * m.mean);
      running_var[c] = T((1 - momentum) * A(running_var[c]) + momentum * (m.m2 / (m.n - A(1))));
    }
  }
};

// Group norm: a row's moments.
template <class T, class I>
struct RowStats {
  using A = AccT<T>;
  const T* x;
  I d;
  T *mean, *invstd;
  double eps;
  __device__ Moments<A> load(I row, I j) const { return moments_of(A(x[row * d + j])); }
  __device__ void finish(I row, const Moments<A>& m) const {
    mean[row] = T(m.mean);
    invstd[row] = T(A(1) / d_sqrt(m.m2 / m.n + A(eps)));
  }
};

// Per channel over N and L: sum g and sum g * xhat. The statistic of sample s, channel c is
// s * stat_per_sample + c / channels_per_stat (batch norm: the channel; group norm: s's group).
// Writes the bias and weight gradients, and for batch norm's grad_x also s1 = w * sum g and
// s2 = w * sum g * xhat (w is constant over a channel).
template <class T, class I>
struct ChannelGradSums {
  using A = AccT<T>;
  const T *g, *x, *mean, *invstd, *weight;
  I channels, l, stat_per_sample, channels_per_stat;
  T *grad_weight, *grad_bias, *s1, *s2;
  __device__ Sums<A> load(I s, I c, I j) const {
    const I at = (s * channels + c) * l + j, st = s * stat_per_sample + c / channels_per_stat;
    const A gv = A(g[at]);
    return {gv, gv * (A(x[at]) - A(mean[st])) * A(invstd[st])};
  }
  __device__ void finish(I c, const Sums<A>& v) const {
    if (grad_bias) grad_bias[c] = T(v.a);
    if (grad_weight) grad_weight[c] = T(v.b);
    if (s1) {
      const A w = weight ? A(weight[c]) : A(1);
      s1[c] = T(w * v.a);
      s2[c] = T(w * v.b);
    }
  }
};

// Group norm's grad_x: per row (sample and group), s1 = sum g*w and s2 = sum g*w*xhat.
template <class T, class I>
struct RowGradSums {
  using A = AccT<T>;
  const T *g, *x, *mean, *invstd, *weight;
  I d, l, groups, per_group;
  T *s1, *s2;
  __device__ Sums<A> load(I row, I j) const {
    const I c = (row % groups) * per_group + j / l, at = row * d + j;
    const A gw = A(g[at]) * (weight ? A(weight[c]) : A(1));
    return {gw, gw * (A(x[at]) - A(mean[row]))};
  }
  __device__ void finish(I row, const Sums<A>& v) const {
    s1[row] = T(v.a);
    s2[row] = T(v.b * A(invstd[row]));
  }
};

// ---- elementwise passes ----

// Element i of [N, C, L] has channel (i / l) % channels and statistic (i / stat_div) % stat_mod:
// batch norm (l, channels), group norm (d, N * G).
template <class I>
struct NormIndex {
  I l, channels, stat_div, stat_mod;
  __device__ __forceinline__ I channel(I i) const { return (i / l) % channels; }
  __device__ __forceinline__ I stat(I i) const { return (i / stat_div) % stat_mod; }
};

template <class T, class I>
__global__ void normalize_kernel(const T* x, const T* mean, const T* invstd, const T* w, const T* b, T* out,
                                 NormIndex<I> ix, I total) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I c = ix.channel(i), s = ix.stat(i);
    out[i] = (x[i] - mean[s]) * invstd[s] * (w ? w[c] : T(1)) + (b ? b[c] : T(0));
  }
}

// gx = invstd * (g*w - s1 / m - (x - mean) * invstd * s2 / m); s1 null: gx = invstd * g*w.
template <class T, class I>
__global__ void normalize_backward_kernel(const T* g, const T* x, const T* mean, const T* invstd, const T* w,
                                          const T* s1, const T* s2, T inv_count, T* gx, NormIndex<I> ix, I total) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    const I c = ix.channel(i), s = ix.stat(i);
    const T r = invstd[s];
    T v = g[i] * (w ? w[c] : T(1));
    if (s1) v = v - s1[s] * inv_count - (x[i] - mean[s]) * r * s2[s] * inv_count;
    gx[i] = r * v;
  }
}

template <class T>
__global__ void running_stats_kernel(const T* running_mean, const T* running_var, double eps, T* mean, T* invstd,
                                     int64_t channels) {
  using A = AccT<T>;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < channels; c += int64_t(gridDim.x) * blockDim.x) {
    mean[c] = running_mean[c];
    invstd[c] = T(A(1) / d_sqrt(A(running_var[c]) + A(eps)));
  }
}

// ---- layer norm: a row in a warp's registers ----
// Group norm with one group over L == 1 (layer norm's [M, K]) and rows of at most 32 * kMaxPerLane:
// each warp holds its row in registers, so x is read once. The forward takes the statistics (two
// passes over the registers, in AccT) and writes the output in one kernel; the backward takes both
// sums and writes grad_x in one. The general path above reads x three times in two kernels (on an
// H100, nanoGPT's [16384, 384]: 62 us forward, 73 us backward).
// Lanes move 16-byte packs (float4, double2: V = 16 / sizeof(T) elements, element (lane + 32k) * V + e)
// where d is a multiple of V and every pointer is 16-byte aligned, else single elements (V = 1,
// element lane + 32k): a 4-byte load per lane left the forward at 27.7 us for [16384, 384], against
// about 17 us for its 50 MB at full bandwidth. Either way a lane keeps the same columns on every row.
constexpr int kMaxPerLane = 32;
constexpr int kPackBytes = 16;

template <class T>
constexpr int kPackOf = kPackBytes / static_cast<int>(sizeof(T));

template <int V, class T>
__device__ __forceinline__ VecPack<T, V> load_pack(const T* p, int64_t pack) {
  return reinterpret_cast<const VecPack<T, V>*>(p)[pack];
}

template <int V, class T>
__device__ __forceinline__ void store_pack(T* p, int64_t pack, const VecPack<T, V>& v) {
  reinterpret_cast<VecPack<T, V>*>(p)[pack] = v;
}

template <int V, class T>
__device__ __forceinline__ VecPack<T, V> filled(T value) {
  VecPack<T, V> p;
#pragma unroll
  for (int e = 0; e < V; ++e) p.v[e] = value;
  return p;
}

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The mean and 1 / sqrt(biased variance + eps) of a warp's row of d, held as kPacks packs of V a
// lane (pack lane + 32 k; those at or past d / V are zeros and not counted), whose elements sum to
// `total` over this lane: the variance from squared deviations, not a difference of sums.
template <class A, class T, int V, int kPacks>
__device__ __forceinline__ void row_stats(const VecPack<T, V> (&v)[kPacks], A total, int d, double eps, T& m,
                                          T& r) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const A mu = warp_sum(total) / A(d);
  A squares = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if ((lane + 32 * k) * V >= d) continue;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const A dev = A(v[k].v[e]) - mu;
      squares += dev * dev;
    }
  }
  m = T(mu);
  r = T(A(1) / d_sqrt(warp_sum(squares) / A(d) + A(eps)));
}

template <class T, int kPerLane, int V>
__global__ void layer_norm_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                T* __restrict__ out, T* __restrict__ mean, T* __restrict__ invstd, int64_t rows,
                                int d, double eps) {
  using A = AccT<T>;
  using Pack = VecPack<T, V>;
  constexpr int kPacks = kPerLane / V;
  const int lane = static_cast<int>(threadIdx.x) & 31, warps = static_cast<int>(blockDim.x) / 32;
  for (int64_t row = blockIdx.x * int64_t(warps) + threadIdx.x / 32; row < rows; row += int64_t(gridDim.x) * warps) {
    const T* xr = x + row * d;
    Pack v[kPacks];
    A sum = 0;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = lane + 32 * k;
      v[k] = p * V < d ? load_pack<V>(xr, p) : filled<V>(T(0));
#pragma unroll
      for (int e = 0; e < V; ++e) sum += A(v[k].v[e]);
    }
    T m, r;
    row_stats(v, sum, d, eps, m, r);
    if (lane == 0) mean[row] = m, invstd[row] = r;
    T* o = out + row * d;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = lane + 32 * k;
      if (p * V >= d) continue;
      const Pack wk = w ? load_pack<V>(w, p) : filled<V>(T(1)), bk = b ? load_pack<V>(b, p) : filled<V>(T(0));
      Pack ok;
#pragma unroll
      for (int e = 0; e < V; ++e) ok.v[e] = (v[k].v[e] - m) * r * wk.v[e] + bk.v[e];
      store_pack<V>(o, p, ok);
    }
  }
}

// gx = invstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)), the formula of normalize_backward_kernel.
// With kParamSums the kernel also sums the weight and bias gradients (sum g*xhat and sum g, the
// terms of ChannelGradSums) as it reads g and x, instead of a second pass over both: block b takes
// rows [b * chunk_rows, (b + 1) * chunk_rows), each lane adds up its columns over its warp's rows in
// row order, the warps' sums are added in warp order, and the block writes them to chunk_sums[b];
// reduce_chunk_sums adds the chunks in order. A fixed order throughout: the same bits every run.
template <int V, int kPacks, class T>
__device__ __forceinline__ void load_row_packs(const T* row, int d, int lane, VecPack<T, V> (&packs)[kPacks]) {
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int p = lane + 32 * k;
    packs[k] = p * V < d ? load_pack<V>(row, p) : filled<V>(T(0));
  }
}

// The rows a warp of a row-per-warp backward takes: with kParamSums, its block's chunk of
// chunk_rows rows, a warp's every warps-th (so that the chunk's column sums have a fixed order);
// otherwise a grid-stride walk.
struct WarpRows {
  int64_t row, end, step;
};

template <bool kParamSums>
__device__ __forceinline__ WarpRows warp_rows(int64_t rows, int64_t chunk_rows) {
  const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
  if constexpr (kParamSums)
    return {blockIdx.x * chunk_rows + warp, std::min(rows, (blockIdx.x + int64_t(1)) * chunk_rows), warps};
  return {blockIdx.x * int64_t(warps) + warp, rows, int64_t(gridDim.x) * warps};
}

// Writes the block's column sums to chunk_sums[blockIdx.x]: each lane holds columns (lane + 32 k)
// V + e of its warp's rows in column[k * V + e], and the warps' sums are added in warp order.
template <int V, int kPerLane, class A, class S>
__device__ __forceinline__ void write_chunk_sums(const S (&column)[kPerLane], int d, Sums<A>* chunk_sums) {
  __shared__ Sums<A> block_sums[32 * kPerLane];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) / 32;
  for (int turn = 0; turn < static_cast<int>(blockDim.x) / 32; ++turn) {
    if (warp == turn) {
#pragma unroll
      for (int k = 0; k < kPerLane / V; ++k) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const int j = (lane + 32 * k) * V + e;
          const Sums<A> mine{A(column[k * V + e].a), A(column[k * V + e].b)};
          if (j < d) block_sums[j] = turn == 0 ? mine : block_sums[j] + mine;
        }
      }
    }
    __syncthreads();
  }
  Sums<A>* out = chunk_sums + int64_t(blockIdx.x) * d;
  for (int j = static_cast<int>(threadIdx.x); j < d; j += static_cast<int>(blockDim.x)) out[j] = block_sums[j];
}

template <class T, int kPerLane, int V, bool kParamSums>
__global__ void layer_norm_rows_backward(const T* __restrict__ g, const T* __restrict__ x,
                                         const T* __restrict__ mean, const T* __restrict__ invstd,
                                         const T* __restrict__ w, T* __restrict__ gx, int64_t rows, int d,
                                         int64_t chunk_rows, Sums<AccT<T>>* __restrict__ chunk_sums) {
  using A = AccT<T>;
  using Pack = VecPack<T, V>;
  constexpr int kPacks = kPerLane / V;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  auto [row, end, step] = warp_rows<kParamSums>(rows, chunk_rows);
  Sums<A> column[kParamSums ? kPerLane : 1] = {};  // this lane's columns k * V + e, over its rows
  // The next row's g and x are loaded while this one is reduced: with one block of 8 warps an SM
  // (the registers of the sums), loading each row only when its turn came left the kernel at 1.5 TB/s.
  Pack g_next[kPacks], x_next[kPacks];
  T m_next = T(0), r_next = T(0);
  if (row < end) {
    load_row_packs<V>(g + row * d, d, lane, g_next);
    load_row_packs<V>(x + row * d, d, lane, x_next);
    m_next = mean[row], r_next = invstd[row];
  }
  for (; row < end; row += step) {
    Pack g_row[kPacks], x_row[kPacks];
#pragma unroll
    for (int k = 0; k < kPacks; ++k) g_row[k] = g_next[k], x_row[k] = x_next[k];
    const T m = m_next, r = r_next;
    if (row + step < end) {
      load_row_packs<V>(g + (row + step) * d, d, lane, g_next);
      load_row_packs<V>(x + (row + step) * d, d, lane, x_next);
      m_next = mean[row + step], r_next = invstd[row + step];
    }
    Pack xhat[kPacks], gw[kPacks];
    A s1 = 0, s2 = 0;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = lane + 32 * k;
      const bool in_row = p * V < d;
      const Pack& gk = g_row[k];
      const Pack& xk = x_row[k];
      const Pack wk = w && in_row ? load_pack<V>(w, p) : filled<V>(T(1));
#pragma unroll
      for (int e = 0; e < V; ++e) {
        xhat[k].v[e] = in_row ? (xk.v[e] - m) * r : T(0);
        gw[k].v[e] = gk.v[e] * wk.v[e];
        s1 += A(gw[k].v[e]);
        s2 += A(gw[k].v[e]) * A(xhat[k].v[e]);
        if constexpr (kParamSums) {
          const A gv = A(gk.v[e]);
          column[k * V + e].a += gv;
          column[k * V + e].b += gv * (A(xk.v[e]) - A(m)) * A(r);
        }
      }
    }
    const T m1 = T(warp_sum(s1) / A(d)), m2 = T(warp_sum(s2) / A(d));
    T* o = gx + row * d;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = lane + 32 * k;
      if (p * V >= d) continue;
      Pack ok;
#pragma unroll
      for (int e = 0; e < V; ++e) ok.v[e] = r * (gw[k].v[e] - m1 - xhat[k].v[e] * m2);
      store_pack<V>(o, p, ok);
    }
  }
  if constexpr (kParamSums) write_chunk_sums<V>(column, d, chunk_sums);
}

// Layer norm's weight and bias gradients from the backward's [chunks, d] chunk sums.
template <class T, class I>
struct ChunkSums {
  using A = AccT<T>;
  const Sums<A>* chunk_sums;
  I channels;
  T *grad_weight, *grad_bias;
  __device__ Sums<A> load(I s, I c, I) const { return chunk_sums[s * channels + c]; }
  __device__ void finish(I c, const Sums<A>& v) const {
    if (grad_bias) grad_bias[c] = T(v.a);
    if (grad_weight) grad_weight[c] = T(v.b);
  }
};

constexpr int kRowsPerBlock = 8;
// The weight and bias gradients' sums ride along in registers up to 16 per lane (d <= 512): two AccT
// sums per column beside the row, and the next row's g and x. ptxas (sm_90) gives the float kernel
// 178 registers at 12 per lane and 244 at 16 (one block of 8 warps per SM), no spills. At 32 per
// lane the sums alone would take 128 registers. On an H100, nanoGPT's [16384, 384] backward took
// 51 us at 16 per lane without the prefetch, 43 us at 12 with it.
constexpr int kMaxPerLaneWithSums = 16;
// Chunks of rows, one a block, where the backward sums the weight and bias gradients: about two
// waves of an H100 at one block per SM, and [256, d] partial sums in AccT (1.5 MB for d = 384).
// A count fixed by the shape alone, so that the summation order is too.
constexpr int64_t kParamChunks = 256;

// Calls fn(std::integral_constant<int, P>{}) with the fewest elements per lane P that hold a row of d
// (4, 8, 12, 16, 24 or 32: multiples of every pack width, 4 floats or 2 doubles, and no more than a
// third of the registers idle); false where d is longer than that.
template <class Fn>
bool dispatch_per_lane(int64_t d, Fn&& fn) {
  if (d <= 32 * 4) fn(std::integral_constant<int, 4>{});
  else if (d <= 32 * 8) fn(std::integral_constant<int, 8>{});
  else if (d <= 32 * 12) fn(std::integral_constant<int, 12>{});
  else if (d <= 32 * 16) fn(std::integral_constant<int, 16>{});
  else if (d <= 32 * 24) fn(std::integral_constant<int, 24>{});
  else if (d <= 32 * kMaxPerLane) fn(std::integral_constant<int, kMaxPerLane>{});
  else return false;
  return true;
}

// dispatch_per_lane, and the pack width V as a second constant: 16 bytes where d is a multiple of it
// and every pointer is 16-byte aligned (views with an offset need not be), else one element.
template <class T, class Fn>
bool dispatch_row_layout(int64_t d, std::initializer_list<const void*> pointers, Fn&& fn) {
  const bool packed = d % kPackOf<T> == 0 && aligned_to(kPackBytes, pointers);
  return dispatch_per_lane(d, [&](auto per_lane) {
    if (packed) fn(per_lane, std::integral_constant<int, kPackOf<T>>{});
    else fn(per_lane, std::integral_constant<int, 1>{});
  });
}

// Where a row-per-warp backward sums the weight and bias gradients: about `wanted` chunks of rows
// (a whole number of a block's warps each, one block a chunk), a count fixed by the shape alone so
// that the summation order is too, and their [chunks, d] partial sums in AccT, from the caching
// allocator (capturable in a CUDA graph).
template <class A>
struct RowChunks {
  int64_t chunk_rows, chunks;
  Tensor buffer;
  Sums<A>* sums;
};

template <class A>
RowChunks<A> row_chunks(int64_t rows, int64_t d, int64_t wanted, int warps, Device device) {
  const int64_t most_rows = (rows + wanted - 1) / wanted;
  const int64_t chunk_rows = (most_rows + warps - 1) / warps * warps;
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  Tensor buffer = Tensor::empty({chunks * d * int64_t(sizeof(Sums<A>))}, kUInt8, device);
  return {chunk_rows, chunks, buffer, static_cast<Sums<A>*>(buffer.raw_data())};
}

// The weight and bias gradients from the chunks' partial sums: the chunks as the rows of a
// [chunks, d] column reduction, in one pass over them. Blocks of 8 columns by 64 rows: with 32 by
// 16, [384, 384] took 12 blocks, and 4 us a call in char_gpt's step.
constexpr int kFinishTile = 8, kFinishRows = 64;
template <class T, class I>
void finish_row_chunks(const RowChunks<AccT<T>>& c, int64_t d, T* grad_weight, T* grad_bias, cudaStream_t stream) {
  const ChunkSums<T, I> op{c.sums, I(d), grad_weight, grad_bias};
  const dim3 grid(static_cast<unsigned>((d + kFinishTile - 1) / kFinishTile), 1);
  channel_reduce_columns<Sums<AccT<T>>, I, ChunkSums<T, I>, kFinishTile, kFinishRows>
      <<<grid, dim3(kFinishTile, kFinishRows), 0, stream>>>(I(c.chunks), I(d), I(c.chunks), op, nullptr);
  CUDA_LAUNCH_CHECK(channel_reduce_columns);
}

// finish_row_chunks on the side stream, for a seam's backward: nothing on the compute stream reads
// the weight and bias gradients before the optimizer, so the next layer's backward starts as the
// row pass ends instead of after this reduction (about 6 us a seam on the critical path of
// char_gpt's step on an H100, docs/benchmarks.md's thirty-fifth section). The compute stream waits
// for it only where those gradients are next used (core/cuda/side_stream.cpp). A plain stream wait
// rather than fork_side_stream: the reduction holds only its partial sums, so it has no reason to
// join the earlier side work, which would stall the compute stream on it.
template <class T>
void finish_row_chunks_beside(const RowChunks<AccT<T>>& c, int64_t d, Tensor* grad_weight, Tensor* grad_bias,
                              int device, cudaStream_t compute) {
  const cudaStream_t side = cuda::side_stream(device);
  cuda::stream_wait(device, side, compute);
  finish_row_chunks<T, int32_t>(c, d, grad_weight ? ptr<T>(*grad_weight) : nullptr,
                                grad_bias ? ptr<T>(*grad_bias) : nullptr, side);
  std::vector<const void*> written;
  for (const Tensor* t : {grad_weight, grad_bias})
    if (t) written.push_back(t->impl().storage->data());
  cuda::join_side_stream_later(device, {c.buffer}, written);
}

// Layer norm's backward with its rows in registers (d <= 32 * kMaxPerLane): grad_x, and where asked
// (d <= 32 * kMaxPerLaneWithSums) the weight and bias gradients from the same pass.
template <class T, class I>
void layer_norm_rows_backward_launch(const T* g, const T* x, const T* mean, const T* invstd, const T* w, T* gx,
                                     T* grad_weight, T* grad_bias, int64_t rows, int64_t d, Device device,
                                     cudaStream_t stream) {
  using A = AccT<T>;
  const bool param_sums = grad_weight || grad_bias;
  dispatch_row_layout<T>(d, {g, x, w, gx}, [&](auto per_lane, auto pack) {
    if constexpr (per_lane() <= kMaxPerLaneWithSums) {
      if (param_sums) {
        const RowChunks<A> c = row_chunks<A>(rows, d, kParamChunks, kRowsPerBlock, device);
        layer_norm_rows_backward<T, per_lane(), pack(), true>
            <<<static_cast<unsigned>(c.chunks), kRowsPerBlock * 32, 0, stream>>>(
                g, x, mean, invstd, w, gx, rows, static_cast<int>(d), c.chunk_rows, c.sums);
        CUDA_LAUNCH_CHECK(layer_norm_rows_backward);
        finish_row_chunks<T, I>(c, d, grad_weight, grad_bias, stream);
        return;
      }
    }
    layer_norm_rows_backward<T, per_lane(), pack(), false>
        <<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
            g, x, mean, invstd, w, gx, rows, static_cast<int>(d), int64_t(0), nullptr);
    CUDA_LAUNCH_CHECK(layer_norm_rows_backward);
  });
}

template <class T>
const T* cptr_or_null(const Tensor* t) {
  return t ? ptr<const T>(*t) : nullptr;
}

template <class T>
T* ptr_or_null(Tensor* t) {
  return t ? ptr<T>(*t) : nullptr;
}

// Calls fn(T{}, I{}) with the element type and the narrowest index type that holds every offset.
template <class Fn>
void dispatch_index(const Tensor& x, const char* what, Fn&& fn) {
  dispatch_floating(x.dtype(), what, [&](auto tag) {
    if (x.numel() <= INT32_MAX) fn(tag, int32_t{});
    else fn(tag, int64_t{});
  });
}


// ---- dropout_add_layer_norm: sum = residual + dropout(x), out = layer_norm(sum), in one pass ----
// A warp per row as in layer_norm_rows, in groups of G = kRandomPer<C> elements: one Philox draw
// covers a group, and element i takes the draw a dropout() launch gives it (thread i / G's), so the
// fused op and its composition drop the same elements from one generator state. The residual and
// sum are T (float or double); x is N and out O (T, or a 16-bit type beside float): a residual
// stream under autocast is a float32 sum of 16-bit branches whose norms feed 16-bit products, and
// its first seam (the embeddings, no residual) takes a float32 x to a 16-bit norm.
//
// The mask the backward reads is a bit an element: a row's kGroups * G words, word k * G + e holding
// in bit `lane` whether element e of the lane's group lane + 32 k was kept (the warp's ballot). A
// byte an element was 6.3 MB written and read again for each of a GPT's [16384, 384] seams.
template <class N>
constexpr int kGroupOf = kRandomPer<compute_t<N>>;

// Blocks of kRowsPerBlock warps an SM the forward is compiled for: five (48 registers) for a 16-bit
// x of up to 3 groups a lane, where that spills nothing. Left to the compiler, [16384, 384] took 52
// registers, four blocks an SM, and was bound by its loads' latency at 46% of an H200's memory
// speed; at five, char_gpt ran 0.5% faster (at six, 40 registers spilled and it ran slower).
template <class N, int kGroups>
constexpr int kAddNormBlocks = is_16bit_float_v<N> && kGroups <= 3 ? 5 : 1;

// Where a seam's x comes from: a tensor's rows (group `at` of the whole tensor), or, at a transformer's
// first seam, the sum of two embeddings' rows read from their tables (embedding_add's sum, whose
// [rows, d] tensor is then never written nor read again).
template <class N, int G>
struct TensorRows {
  const N* __restrict__ x;
  __device__ __forceinline__ VecPack<N, G> load(int64_t /*row*/, int /*g*/, int64_t at) const {
    return load_pack<G>(x, at);
  }
};

template <class N, int G>
struct EmbeddingRows {
  const N* __restrict__ a;  // [rows_a, d], taken at ids_a[row]
  const int64_t* __restrict__ ids_a;
  int64_t rows_a;
  const N* __restrict__ b;  // [rows_b, d], taken at ids_b[row % period]
  const int64_t* __restrict__ ids_b;
  int64_t rows_b, period;
  int groups;  // of a row
  DeviceErrorReport error;
  __device__ __forceinline__ VecPack<N, G> load(int64_t row, int g, int64_t /*at*/) const {
    using C = compute_t<N>;
    const int64_t ia = ids_a[row], ib = ids_b[row % period];
    VecPack<N, G> sum = filled<G>(N(0));
    if (ia < 0 || ia >= rows_a || ib < 0 || ib >= rows_b) {  // zeros, and the error at the next sync
      if (g == 0) {
        if (ia < 0 || ia >= rows_a) report_device_error(error, kIndexSelectIndex, row, ia, rows_a);
        else report_device_error(error, kIndexSelectIndex, row % period, ib, rows_b);
      }
      return sum;
    }
    const VecPack<N, G> pa = load_pack<G>(a, ia * groups + g), pb = load_pack<G>(b, ib * groups + g);
#pragma unroll
    for (int e = 0; e < G; ++e) sum.v[e] = static_cast<N>(static_cast<C>(pa.v[e]) + static_cast<C>(pb.v[e]));
    return sum;
  }
};

template <class T, class N, class O, int kGroups, class Src = TensorRows<N, kGroupOf<N>>>
__global__ void __launch_bounds__(kRowsPerBlock * 32, (kAddNormBlocks<N, kGroups>)) dropout_add_layer_norm_rows(
    const Src x, const T* __restrict__ residual, const T* __restrict__ w, const T* __restrict__ b,
    PhiloxDraw draw, compute_t<N> keep_prob, compute_t<N> scale, O* __restrict__ out, T* __restrict__ sum,
    uint32_t* __restrict__ mask, T* __restrict__ mean, T* __restrict__ invstd, int64_t rows, int d, double eps) {
  // Started early (launch_early): nothing is read or written before the kernel before is done.
  wait_for_earlier_kernels();
  let_next_kernel_start();
  using A = AccT<T>;
  using C = compute_t<N>;
  constexpr int G = kGroupOf<N>;
  const int lane = static_cast<int>(threadIdx.x) & 31, warps = static_cast<int>(blockDim.x) / 32;
  const int groups = d / G;
  for (int64_t row = blockIdx.x * int64_t(warps) + threadIdx.x / 32; row < rows; row += int64_t(gridDim.x) * warps) {
    VecPack<T, G> v[kGroups];
    A total = 0;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int g = lane + 32 * k;
      v[k] = filled<G>(T(0));
      bool kept[G] = {};
      if (g < groups) {
        const int64_t at = row * groups + g;  // the group's index in the whole tensor
        const VecPack<N, G> xk = x.load(row, g, at);
        const VecPack<T, G> rk = residual ? load_pack<G>(residual, at) : filled<G>(T(0));
        C u[G];
        if (mask) philox_values_at<C>(draw, static_cast<uint64_t>(at), u);
#pragma unroll
        for (int e = 0; e < G; ++e) {
          // The dropped branch is rounded to N before the addition, as dropout() then add would.
          kept[e] = !mask || u[e] <= keep_prob;
          const N xe = mask ? static_cast<N>(kept[e] ? static_cast<C>(xk.v[e]) * scale : C(0)) : xk.v[e];
          v[k].v[e] = rk.v[e] + static_cast<T>(xe);
          total += A(v[k].v[e]);
        }
        store_pack<G>(sum, at, v[k]);
      }
      if (mask) {  // the whole warp: its row's words for this k
#pragma unroll
        for (int e = 0; e < G; ++e) {
          const uint32_t word = __ballot_sync(0xffffffffu, kept[e]);
          if (lane == e) mask[(row * kGroups + k) * G + e] = word;
        }
      }
    }
    T m, r;
    row_stats(v, total, d, eps, m, r);
    if (lane == 0) mean[row] = m, invstd[row] = r;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int g = lane + 32 * k;
      if (g >= groups) continue;
      const VecPack<T, G> wk = w ? load_pack<G>(w, g) : filled<G>(T(1));
      const VecPack<T, G> bk = b ? load_pack<G>(b, g) : filled<G>(T(0));
      VecPack<O, G> ok;
#pragma unroll
      for (int e = 0; e < G; ++e) ok.v[e] = static_cast<O>((v[k].v[e] - m) * r * wk.v[e] + bk.v[e]);
      store_pack<G>(out, row * groups + g, ok);
    }
  }
}

// Its backward, as layer_norm_rows_backward (the weight and bias gradients summed by chunks of rows
// in a fixed order), with the sum's own gradient added and the result passed back through the
// dropout to x. Everything a row reads (g, sum, the sum's gradient, the mask) is loaded a row ahead,
// and the blocks are of kAddNormWarps warps, three to an SM: at one block of 8 warps an SM, with the
// sum's gradient and the mask loaded when their row came, [16384, 384] took 106 us on an H200.
constexpr int kAddNormWarps = 4;
// Chunks of rows for the weight and bias sums: about three blocks an SM on an H100 or H200, a count
// fixed by the shape alone (so is the summation order).
constexpr int64_t kAddNormChunks = 384;

template <class T, class N, class O, int kGroups>
struct AddNormRow {
  VecPack<O, kGroupOf<N>> g[kGroups];
  VecPack<T, kGroupOf<N>> s[kGroups], gs[kGroups];
  uint32_t mask_word;  // lane i < kGroups * G holds the row's mask word i (all bits set without a mask)
  T mean, invstd;
};

template <class T, class N, class O, int kGroups, bool kParamSums>
__global__ void __launch_bounds__(kAddNormWarps * 32, 3) dropout_add_layer_norm_rows_backward(
    const O* __restrict__ g, const T* __restrict__ g_sum, const T* __restrict__ sum, const T* __restrict__ mean,
    const T* __restrict__ invstd, const T* __restrict__ w, const uint32_t* __restrict__ mask, compute_t<N> scale,
    N* __restrict__ grad_x, T* __restrict__ grad_residual, int64_t rows, int d, int64_t chunk_rows,
    Sums<AccT<T>>* __restrict__ chunk_sums) {
  wait_for_earlier_kernels();  // started early, as the forward
  let_next_kernel_start();
  using A = AccT<T>;
  using C = compute_t<N>;
  constexpr int G = kGroupOf<N>;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int groups = d / G;
  auto [row, end, step] = warp_rows<kParamSums>(rows, chunk_rows);
  // A chunk's few rows summed in T (float: half the registers of AccT's double), the chunks in AccT.
  Sums<T> column[kParamSums ? kGroups * G : 1] = {};
  AddNormRow<T, N, O, kGroups> next;
  auto load = [&](int64_t r) {
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int gi = lane + 32 * k;
      const bool in_row = gi < groups;
      const int64_t at = r * groups + gi;
      next.g[k] = in_row ? load_pack<G>(g, at) : filled<G>(O(0));
      next.s[k] = in_row ? load_pack<G>(sum, at) : filled<G>(T(0));
      next.gs[k] = in_row && g_sum ? load_pack<G>(g_sum, at) : filled<G>(T(0));
    }
    next.mask_word = mask && lane < kGroups * G ? mask[r * (kGroups * G) + lane] : 0xffffffffu;
    next.mean = mean[r], next.invstd = invstd[r];
  };
  if (row < end) load(row);
  for (; row < end; row += step) {
    const AddNormRow<T, N, O, kGroups> cur = next;
    if (row + step < end) load(row + step);
    const T m = cur.mean, r = cur.invstd;
    A s1 = 0, s2 = 0;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int gi = lane + 32 * k;
      const bool in_row = gi < groups;
      const VecPack<T, G> wk = w && in_row ? load_pack<G>(w, gi) : filled<G>(T(1));
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const T gv = static_cast<T>(cur.g[k].v[e]), gw = gv * wk.v[e];
        const T xhat = in_row ? (cur.s[k].v[e] - m) * r : T(0);
        s1 += A(gw);
        s2 += A(gw) * A(xhat);
        if constexpr (kParamSums) {
          column[k * G + e].a += gv;
          column[k * G + e].b += gv * xhat;
        }
      }
    }
    const T m1 = T(warp_sum(s1) / A(d)), m2 = T(warp_sum(s2) / A(d));
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int gi = lane + 32 * k;
      bool kept[G];
#pragma unroll
      for (int e = 0; e < G; ++e) kept[e] = (__shfl_sync(0xffffffffu, cur.mask_word, k * G + e) >> lane) & 1u;
      if (gi >= groups) continue;
      const int64_t at = row * groups + gi;
      const VecPack<T, G> wk = w ? load_pack<G>(w, gi) : filled<G>(T(1));
      VecPack<T, G> gs = cur.gs[k];
      VecPack<N, G> gx;
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const T xhat = (cur.s[k].v[e] - m) * r;
        gs.v[e] += r * (static_cast<T>(cur.g[k].v[e]) * wk.v[e] - m1 - xhat * m2);
        gx.v[e] = static_cast<N>(kept[e] ? static_cast<C>(gs.v[e]) * scale : C(0));
      }
      if (grad_residual) store_pack<G>(grad_residual, at, gs);
      if (grad_x) store_pack<G>(grad_x, at, gx);
    }
  }
  if constexpr (kParamSums) write_chunk_sums<G>(column, d, chunk_sums);
}

// Calls fn(T{}, N{}, O{}) for the sum's, x's and out's dtypes where a kernel takes them: a float32
// sum beside a float32, bfloat16 or float16 x and out of x's dtype, or a float32 x and a 16-bit out;
// float64 throughout. False otherwise.
template <class Fn>
bool dispatch_add_norm_types(DType sum, DType x, DType out, Fn&& fn) {
  if (sum == kFloat64 && x == kFloat64 && out == kFloat64) fn(double{}, double{}, double{});
  else if (sum != kFloat32) return false;
  else if (x == kFloat32 && out == kFloat32) fn(float{}, float{}, float{});
  else if (x == kBFloat16 && out == kBFloat16) fn(float{}, BFloat16{}, BFloat16{});
  else if (x == kFloat16 && out == kFloat16) fn(float{}, Half{}, Half{});
  else if (x == kFloat32 && out == kBFloat16) fn(float{}, float{}, BFloat16{});
  else if (x == kFloat32 && out == kFloat16) fn(float{}, float{}, Half{});
  else return false;
  return true;
}

// Calls fn(std::integral_constant<int, K>{}) with the fewest groups a lane K (1, 2, 3, 4, 6 or 8) that
// hold a row of `groups` groups; false where the row is longer (the op then composes).
template <class Fn>
bool dispatch_groups_per_lane(int64_t groups, Fn&& fn) {
  if (groups <= 32) fn(std::integral_constant<int, 1>{});
  else if (groups <= 64) fn(std::integral_constant<int, 2>{});
  else if (groups <= 96) fn(std::integral_constant<int, 3>{});
  else if (groups <= 128) fn(std::integral_constant<int, 4>{});
  else if (groups <= 192) fn(std::integral_constant<int, 6>{});
  else if (groups <= 256) fn(std::integral_constant<int, 8>{});
  else return false;
  return true;
}

// The seam's forward over rows of d, its x of x_dtype read through make_x(N{}, G) (a TensorRows or
// EmbeddingRows of groups of G), each of x_pointers aligned for a group's loads. False where no kernel
// takes these dtypes, this width or these pointers (the op then composes).
template <class MakeX>
bool launch_dropout_add_layer_norm(cudaStream_t stream, DType x_dtype, std::initializer_list<const void*> x_pointers,
                                   int64_t rows, int64_t d, const Tensor& residual, const Tensor* weight,
                                   const Tensor* bias, double keep_prob, double eps, Tensor& out, Tensor& sum,
                                   Tensor& mask, Tensor& save_mean, Tensor& save_invstd, MakeX make_x) {
  bool ran = false;
  dispatch_add_norm_types(sum.dtype(), x_dtype, out.dtype(), [&](auto t_tag, auto n_tag, auto o_tag) {
    using T = decltype(t_tag);
    using N = decltype(n_tag);
    using O = decltype(o_tag);
    using C = compute_t<N>;
    constexpr int G = kGroupOf<N>;
    // Rows of whole groups, up to 16 elements a lane (the backward's weight and bias sums ride in
    // registers, as layer norm's), on pointers aligned for a group's loads.
    if (d == 0 || d % G != 0 || d > 32 * kMaxPerLaneWithSums || rows == 0) return;
    if ((weight && weight->dtype() != sum.dtype()) || (bias && bias->dtype() != sum.dtype())) return;
    if (residual.defined() && residual.dtype() != sum.dtype()) return;
    const T *w = cptr_or_null<T>(weight), *b = cptr_or_null<T>(bias);
    const T* r = residual.defined() ? ptr<const T>(residual) : nullptr;
    if (!aligned_to(sizeof(T) * G, {r, sum.raw_data(), w, b}) || !aligned_to(sizeof(N) * G, x_pointers) ||
        !aligned_to(sizeof(O) * G, {out.raw_data()}))
      return;
    const bool dropping = keep_prob < 1;
    dispatch_groups_per_lane(d / G, [&](auto groups) {
      if constexpr (groups() * G <= kMaxPerLaneWithSums) {
        // The mask's words (the comment above the kernel), for the backward alone.
        mask = dropping ? Tensor::empty({rows, groups() * G}, kInt32, sum.device()) : Tensor();
        const PhiloxDraw draw = dropping ? reserve_philox<C>(rows * d) : PhiloxDraw{};
        const auto x = make_x(N{}, std::integral_constant<int, G>{});
        launch_early("dropout_add_layer_norm_rows", dropout_add_layer_norm_rows<T, N, O, groups(), decltype(x)>,
                     dim3(blocks_for(rows, kRowsPerBlock)), dim3(kRowsPerBlock * 32), 0, stream, x, r, w, b, draw,
                     static_cast<C>(keep_prob), static_cast<C>(1.0 / keep_prob), ptr<O>(out), ptr<T>(sum),
                     dropping ? ptr<uint32_t>(mask) : nullptr, ptr<T>(save_mean), ptr<T>(save_invstd), rows,
                     static_cast<int>(d), eps);
        ran = true;
      }
    });
  });
  return ran;
}

}  // namespace

void CudaKernels::batch_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, Tensor* running_mean,
                             Tensor* running_var, bool training, double momentum, double eps, Tensor& out,
                             Tensor& save_mean, Tensor& save_invstd) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  if (channels == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_index(x, "batch_norm", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    T* mean = ptr<T>(save_mean);
    T* invstd = ptr<T>(save_invstd);
    if (training) {
      BatchStats<T, I> op{ptr<const T>(x), I(channels), I(l), mean, invstd, ptr_or_null<T>(running_mean),
                          ptr_or_null<T>(running_var), momentum, eps};
      reduce_channels<Moments<AccT<T>>, I>(I(n), I(channels), I(l), op, x.device(), stream_);
    } else {
      running_stats_kernel<T><<<blocks_for(channels), kThreads, 0, stream_>>>(
          ptr<const T>(*running_mean), ptr<const T>(*running_var), eps, mean, invstd, channels);
      CUDA_LAUNCH_CHECK(running_stats_kernel);
    }
    const int64_t total = x.numel();
    if (total == 0) return;
    normalize_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(x), mean, invstd, cptr_or_null<T>(weight), cptr_or_null<T>(bias), ptr<T>(out),
        NormIndex<I>{I(l), I(channels), I(l), I(channels)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_kernel);
  });
}

void CudaKernels::batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor* weight,
                                      const Tensor& save_mean, const Tensor& save_invstd, bool training,
                                      Tensor* grad_x, Tensor* grad_weight, Tensor* grad_bias) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  if (channels == 0) return;
  cuda::DeviceGuard guard(device_);
  const bool sums_for_x = grad_x && training;
  Tensor s1, s2;
  if (sums_for_x) {
    s1 = Tensor::empty({channels}, x.dtype(), x.device());
    s2 = Tensor::empty({channels}, x.dtype(), x.device());
  }
  dispatch_index(x, "batch_norm_backward", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    if (grad_weight || grad_bias || sums_for_x) {
      ChannelGradSums<T, I> op{ptr<const T>(grad_out), ptr<const T>(x), ptr<const T>(save_mean),
                               ptr<const T>(save_invstd), cptr_or_null<T>(weight), I(channels), I(l), I(0), I(1),
                               ptr_or_null<T>(grad_weight), ptr_or_null<T>(grad_bias),
                               sums_for_x ? ptr<T>(s1) : nullptr, sums_for_x ? ptr<T>(s2) : nullptr};
      reduce_channels<Sums<AccT<T>>, I>(I(n), I(channels), I(l), op, x.device(), stream_);
    }
    const int64_t total = x.numel();
    if (!grad_x || total == 0) return;
    normalize_backward_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const T>(x), ptr<const T>(save_mean), ptr<const T>(save_invstd),
        cptr_or_null<T>(weight), sums_for_x ? ptr<const T>(s1) : nullptr, sums_for_x ? ptr<const T>(s2) : nullptr,
        T(1) / T(n * l), ptr<T>(*grad_x), NormIndex<I>{I(l), I(channels), I(l), I(channels)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_backward_kernel);
  });
}

void CudaKernels::group_norm(const Tensor& x, int64_t groups, const Tensor* weight, const Tensor* bias, double eps,
                             Tensor& out, Tensor& save_mean, Tensor& save_invstd) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  const int64_t rows = n * groups, d = channels / groups * l;
  if (rows == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_index(x, "group_norm", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    T* mean = ptr<T>(save_mean);
    T* invstd = ptr<T>(save_invstd);
    const T *xp = ptr<const T>(x), *w = cptr_or_null<T>(weight), *b = cptr_or_null<T>(bias);
    T* o = ptr<T>(out);
    if (l == 1 && groups == 1 &&
        dispatch_row_layout<T>(d, {xp, w, b, o}, [&](auto per_lane, auto pack) {
          layer_norm_rows<T, per_lane(), pack()><<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream_>>>(
              xp, w, b, o, mean, invstd, rows, static_cast<int>(d), eps);
          CUDA_LAUNCH_CHECK(layer_norm_rows);
        }))
      return;
    RowStats<T, I> op{ptr<const T>(x), I(d), mean, invstd, eps};
    reduce_rows<Moments<AccT<T>>, I>(I(rows), I(d), op, stream_);
    const int64_t total = x.numel();
    if (total == 0) return;
    normalize_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(x), mean, invstd, cptr_or_null<T>(weight), cptr_or_null<T>(bias), ptr<T>(out),
        NormIndex<I>{I(l), I(channels), I(d), I(rows)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_kernel);
  });
}

void CudaKernels::group_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t groups, const Tensor* weight,
                                      const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_x,
                                      Tensor* grad_weight, Tensor* grad_bias) {
  const int64_t n = x.size(0), channels = x.size(1), l = x.size(2);
  const int64_t per_group = channels / groups, rows = n * groups, d = per_group * l;
  cuda::DeviceGuard guard(device_);
  const bool rows_in_registers = l == 1 && groups == 1 && d <= 32 * kMaxPerLane;
  // The weight and bias gradients from grad_x's pass over g and x, where that pass runs.
  const bool param_sums_with_x = rows_in_registers && grad_x && x.numel() > 0 && d <= 32 * kMaxPerLaneWithSums;
  Tensor s1, s2;
  if (grad_x && rows > 0 && !rows_in_registers) {
    s1 = Tensor::empty({rows}, x.dtype(), x.device());
    s2 = Tensor::empty({rows}, x.dtype(), x.device());
  }
  dispatch_index(x, "group_norm_backward", [&](auto tag, auto index) {
    using T = decltype(tag);
    using I = decltype(index);
    const T* g = ptr<const T>(grad_out);
    const T* xp = ptr<const T>(x);
    const T* mean = ptr<const T>(save_mean);
    const T* invstd = ptr<const T>(save_invstd);
    const T* w = cptr_or_null<T>(weight);
    if ((grad_weight || grad_bias) && !param_sums_with_x) {
      ChannelGradSums<T, I> op{g, xp, mean, invstd, w, I(channels), I(l), I(groups), I(per_group),
                               ptr_or_null<T>(grad_weight), ptr_or_null<T>(grad_bias), nullptr, nullptr};
      reduce_channels<Sums<AccT<T>>, I>(I(n), I(channels), I(l), op, x.device(), stream_);
    }
    const int64_t total = x.numel();
    if (!grad_x || total == 0) return;
    if (rows_in_registers) {
      layer_norm_rows_backward_launch<T, I>(g, xp, mean, invstd, w, ptr<T>(*grad_x),
                                            param_sums_with_x ? ptr_or_null<T>(grad_weight) : nullptr,
                                            param_sums_with_x ? ptr_or_null<T>(grad_bias) : nullptr, rows, d,
                                            x.device(), stream_);
      return;
    }
    RowGradSums<T, I> op{g, xp, mean, invstd, w, I(d), I(l), I(groups), I(per_group), ptr<T>(s1), ptr<T>(s2)};
    reduce_rows<Sums<AccT<T>>, I>(I(rows), I(d), op, stream_);
    normalize_backward_kernel<T, I><<<blocks_for(total), kThreads, 0, stream_>>>(
        g, xp, mean, invstd, w, ptr<const T>(s1), ptr<const T>(s2), T(1) / T(d), ptr<T>(*grad_x),
        NormIndex<I>{I(l), I(channels), I(d), I(rows)}, I(total));
    CUDA_LAUNCH_CHECK(normalize_backward_kernel);
  });
}

bool CudaKernels::dropout_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor* weight,
                                         const Tensor* bias, double keep_prob, double eps, Tensor& out, Tensor& sum,
                                         Tensor& mask, Tensor& save_mean, Tensor& save_invstd) {
  const int64_t d = x.size(-1), rows = d > 0 ? x.numel() / d : 0;
  cuda::DeviceGuard guard(device_);
  return launch_dropout_add_layer_norm(
      stream_, x.dtype(), {x.raw_data()}, rows, d, residual, weight, bias, keep_prob, eps, out, sum, mask, save_mean,
      save_invstd, [&](auto n_tag, auto g) { return TensorRows<decltype(n_tag), g()>{ptr<const decltype(n_tag)>(x)}; });
}

bool CudaKernels::embedding_dropout_layer_norm(const Tensor& table, const Tensor& ids, const Tensor& other_table,
                                               const Tensor& other_ids, const Tensor* weight, const Tensor* bias,
                                               double keep_prob, double eps, Tensor& out, Tensor& sum, Tensor& mask,
                                               Tensor& save_mean, Tensor& save_invstd) {
  const int64_t d = table.size(1), rows = ids.numel();
  if (other_table.dtype() != table.dtype() || other_table.size(1) != d || other_ids.numel() == 0 ||
      rows % other_ids.numel() != 0)
    return false;
  cuda::DeviceGuard guard(device_);
  const DeviceErrorReport error = device_error_report(device_);
  return launch_dropout_add_layer_norm(
      stream_, table.dtype(), {table.raw_data(), other_table.raw_data()}, rows, d, Tensor(), weight, bias, keep_prob,
      eps, out, sum, mask, save_mean, save_invstd, [&](auto n_tag, auto g) {
        using N = decltype(n_tag);
        return EmbeddingRows<N, g()>{ptr<const N>(table), ptr<const int64_t>(ids), table.size(0),
                                     ptr<const N>(other_table), ptr<const int64_t>(other_ids), other_table.size(0),
                                     other_ids.numel(), static_cast<int>(d / g()), error};
      });
}

void CudaKernels::dropout_add_layer_norm_backward(const Tensor& grad_out, const Tensor* grad_sum, const Tensor& sum,
                                                  const Tensor& save_mean, const Tensor& save_invstd,
                                                  const Tensor* weight, const Tensor& mask, double keep_prob,
                                                  Tensor* grad_x, Tensor* grad_residual, Tensor* grad_weight,
                                                  Tensor* grad_bias) {
  const int64_t d = sum.size(-1), rows = sum.numel() / d;
  cuda::DeviceGuard guard(device_);
  // x's dtype from its gradient; without one, the sum's, and no mask to read (it applies to x's
  // gradient alone).
  const DType x_dtype = grad_x ? grad_x->dtype() : sum.dtype();
  const bool dispatched = dispatch_add_norm_types(sum.dtype(), x_dtype, grad_out.dtype(), [&](auto t_tag, auto n_tag,
                                                                                               auto o_tag) {
    using T = decltype(t_tag);
    using N = decltype(n_tag);
    using O = decltype(o_tag);
    using A = AccT<T>;
    using C = compute_t<N>;
    constexpr int G = kGroupOf<N>;
    const O* g = ptr<const O>(grad_out);
    const T* gs = cptr_or_null<T>(grad_sum);
    const T *s = ptr<const T>(sum), *mean = ptr<const T>(save_mean), *invstd = ptr<const T>(save_invstd);
    const T* w = cptr_or_null<T>(weight);
    const uint32_t* m = mask.defined() && grad_x ? ptr<const uint32_t>(mask) : nullptr;
    N* gx = ptr_or_null<N>(grad_x);
    T* gr = ptr_or_null<T>(grad_residual);
    const C scale = static_cast<C>(1.0 / keep_prob);
    dispatch_groups_per_lane(d / G, [&](auto groups) {
      if constexpr (groups() * G <= kMaxPerLaneWithSums) {
        if (grad_weight || grad_bias) {
          const RowChunks<A> c = row_chunks<A>(rows, d, kAddNormChunks, kAddNormWarps, sum.device());
          auto* kernel = dropout_add_layer_norm_rows_backward<T, N, O, groups(), true>;
          launch_early("dropout_add_layer_norm_rows_backward", kernel, dim3(static_cast<unsigned>(c.chunks)),
                       dim3(kAddNormWarps * 32), 0, stream_, g, gs, s, mean, invstd, w, m, scale, gx, gr, rows,
                       static_cast<int>(d), c.chunk_rows, c.sums);
          finish_row_chunks_beside<T>(c, d, grad_weight, grad_bias, device_, stream_);
          return;
        }
        auto* kernel = dropout_add_layer_norm_rows_backward<T, N, O, groups(), false>;
        launch_early("dropout_add_layer_norm_rows_backward", kernel, dim3(blocks_for(rows, kAddNormWarps)),
                     dim3(kAddNormWarps * 32), 0, stream_, g, gs, s, mean, invstd, w, m, scale, gx, gr, rows,
                     static_cast<int>(d), int64_t(0), static_cast<Sums<A>*>(nullptr));
      }
    });
  });
  MINIDL_CHECK(dispatched, "dropout_add_layer_norm_backward: no kernel for a ", sum.dtype(), " sum, ", x_dtype,
               " x and ", grad_out.dtype(), " gradient (the forward's check and this one disagree)");
}

}  // namespace minidl
