#pragma once
// The reductions behind normalization on CUDA, x viewed as [N, C, L], shared by normalization.cu
// (batch and group norm), layer_norm_rows.cuh and dropout_add_layer_norm.cu. An Op gives each
// element's contribution (load) and stores a result (finish).
//  - Statistics are merged pairwise as (count, mean, squared deviations) (Chan et al.), in double
//    for float like the CPU's two passes: no cancellation of a sum of squares, and a fixed
//    combination order, so results are the same run to run.
//  - Per-channel reductions over N and L (batch norm's statistics, every weight and bias gradient):
//    a block per channel with cub::BlockReduce where planes are long (L > 1); where L == 1 ([N, C]
//    inputs, layer norm's columns) a 32-column tile per block, which reads rows coalesced, over a
//    chunk of the rows, then a kernel that combines the chunks' partials in order. Layer norm's rows
//    of up to 512 sum their weight and bias gradients in grad_x's kernel instead (layer_norm_rows.cuh).
//  - Per-row reductions (a group norm's sample and group, a layer norm's row: contiguous): a warp
//    per row up to 1024 elements (cub::WarpReduce), a block per row beyond.
// Index arithmetic is 32-bit where every offset fits, as in the pooling kernels.
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include "core/cuda/context.h"
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"

namespace minidl::cuda::norm {

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
// but for finish_row_chunks (layer_norm_rows.cuh).
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

template <class T>
const T* cptr_or_null(const Tensor* t) {
  return t ? ptr<const T>(*t) : nullptr;
}

template <class T>
T* ptr_or_null(Tensor* t) {
  return t ? ptr<T>(*t) : nullptr;
}

}  // namespace minidl::cuda::norm
