#pragma once
// Layer norm with a row in a warp's registers, shared by normalization.cu (group norm's kernels
// where the group is a whole row) and dropout_add_layer_norm.cu (the transformer's seam).
// Group norm with one group over L == 1 (layer norm's [M, K]) and rows of at most 32 * kMaxPerLane:
// each warp holds its row in registers, so x is read once. The forward takes the statistics (two
// passes over the registers, in AccT) and writes the output in one kernel; the backward takes both
// sums and writes grad_x in one. The general path (normalization.cu) reads x three times in two
// kernels (on an H100, nanoGPT's [16384, 384]: 62 us forward, 73 us backward).
// Lanes move 16-byte packs (float4, double2: V = 16 / sizeof(T) elements, element (lane + 32k) * V + e)
// where d is a multiple of V and every pointer is 16-byte aligned, else single elements (V = 1,
// element lane + 32k): a 4-byte load per lane left the forward at 27.7 us for [16384, 384], against
// about 17 us for its 50 MB at full bandwidth. Either way a lane keeps the same columns on every row.
#include <initializer_list>
#include <vector>

#include "core/cuda/context.h"
#include "ops/cuda/normalization_reduce.cuh"

namespace minidl::cuda::norm {

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

// gx = invstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)), the formula of normalization.cu's
// normalize_backward_kernel. With kParamSums the kernel also sums the weight and bias gradients
// (sum g*xhat and sum g, the terms of normalization.cu's ChannelGradSums) as it reads g and x,
// instead of a second pass over both: block b takes rows [b * chunk_rows, (b + 1) * chunk_rows),
// each lane adds up its columns over its warp's rows in row order, the warps' sums are added in
// warp order, and the block writes them to chunk_sums[b]; finish_row_chunks adds the chunks in
// order. A fixed order throughout: the same bits every run.
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

}  // namespace minidl::cuda::norm
