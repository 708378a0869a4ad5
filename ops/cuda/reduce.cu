// Reductions of x viewed as [outer, n, inner] over n, with CUB's block-wide reduction.
//  - inner == 1 (rows are contiguous: sum of a row, max over the last dim, a full sum): short rows
//    (up to 1024 elements, like a convolution's bias gradient per image and channel) one warp each
//    with cub::WarpReduce, since a block per row left most of its threads idle; longer rows a block
//    each with cub::BlockReduce; a few rows with many elements are split across blocks into
//    partials that a second pass combines, so a full sum of millions of elements fills the GPU.
//  - inner > 1 (sum over dim 0 of a bias gradient, max over a middle dim): a 32 x 8 thread tile
//    reads 32 adjacent columns per row (coalesced) and reduces the 8 row-strided partials in shared memory.
// Every combination order is fixed, so results are deterministic run to run. float sums accumulate
// in double, like the CPU kernels; Max keeps the first maximum and lets a NaN win, like the CPU.
#include <cub/block/block_reduce.cuh>
#include <cub/warp/warp_reduce.cuh>

#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

// Out: the output's element type, T's or (sums of 16-bit values) float32.
template <class T, class O = T>
struct SumReducer {
  using Acc = AccT<T>;
  using Out = O;
  __device__ static Acc identity() { return Acc(0); }
  __device__ static Acc from(T v, int64_t) { return Acc(v); }
  __device__ Acc operator()(const Acc& a, const Acc& b) const { return a + b; }
  __device__ static void store(const Acc& a, O* out, int64_t*, int64_t pos) { out[pos] = static_cast<O>(a); }
};

template <class T>
struct ProdReducer {
  using Acc = AccT<T>;
  using Out = T;
  __device__ static Acc identity() { return Acc(1); }
  __device__ static Acc from(T v, int64_t) { return Acc(v); }
  __device__ Acc operator()(const Acc& a, const Acc& b) const { return a * b; }
  __device__ static void store(const Acc& a, T* out, int64_t*, int64_t pos) { out[pos] = static_cast<T>(a); }
};

template <class T>
struct MaxPair {
  T v;
  int64_t i;  // -1: no element yet
};

template <class T>
struct MaxReducer {
  using Acc = MaxPair<T>;
  using Out = T;
  __device__ static Acc identity() { return {T(0), -1}; }
  __device__ static Acc from(T v, int64_t i) { return {v, i}; }
  // Associative and commutative, so any combination order gives the CPU's answer: the first NaN if
  // there is one, else the largest value at its smallest index.
  __device__ Acc operator()(const Acc& a, const Acc& b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = d_isnan(a.v), bn = d_isnan(b.v);
    if (an || bn) {
      if (an && bn) return a.i < b.i ? a : b;
      return an ? a : b;
    }
    if (a.v > b.v) return a;
    if (b.v > a.v) return b;
    return a.i < b.i ? a : b;
  }
  __device__ static void store(const Acc& a, T* out, int64_t* idx, int64_t pos) {
    out[pos] = a.v;
    if (idx) idx[pos] = a.i;
  }
};

constexpr int kRowThreads = 256;

constexpr int kWarpRows = 8;     // rows per block of reduce_rows_warp
constexpr int64_t kWarpRowMax = 1024;

// Adds V consecutive elements of x starting at i (a VecPack load when V > 1) into acc.
template <class T, class R, int V>
__device__ __forceinline__ void accumulate(typename R::Acc& acc, const R& r, const T* x, int64_t i) {
  if constexpr (V == 1) {
    acc = r(acc, R::from(x[i], i));
  } else {
    const VecPack<T, V> pack = *reinterpret_cast<const VecPack<T, V>*>(x + i);
#pragma unroll
    for (int k = 0; k < V; ++k) acc = r(acc, R::from(pack.v[k], i + k));
  }
}

// V > 1 (16-bit rows whose length is a multiple of V, aligned): each thread reads V elements at a
// time, so a warp moves as many bytes per load as it does for float.
template <class T, class R, int V>
__global__ void reduce_rows_warp(const T* x, int64_t rows, int64_t n, typename R::Out* out, int64_t* idx) {
  using Acc = typename R::Acc;
  using WarpReduce = cub::WarpReduce<Acc>;
  __shared__ typename WarpReduce::TempStorage temp[kWarpRows];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row = blockIdx.x * int64_t(kWarpRows) + warp;
  if (row >= rows) return;  // the whole warp leaves together
  const T* p = x + row * n;
  R r;
  Acc acc = R::identity();
  for (int64_t i = int64_t(lane) * V; i < n; i += 32 * V) accumulate<T, R, V>(acc, r, p, i);
  acc = WarpReduce(temp[warp]).Reduce(acc, r);
  if (lane == 0) R::store(acc, out, idx, row);
}

// Block b reduces chunk (b % chunks) of row (b / chunks). With one chunk it writes the result;
// otherwise the chunk's partial. With V > 1, n and chunk_len are multiples of V.
template <class T, class R, int V>
__global__ void reduce_rows(const T* x, int64_t n, int64_t chunks, int64_t chunk_len, typename R::Out* out, int64_t* idx,
                            typename R::Acc* partial) {
  using Acc = typename R::Acc;
  using BlockReduce = cub::BlockReduce<Acc, kRowThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const int64_t row = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int64_t begin = chunk * chunk_len, end = begin + chunk_len < n ? begin + chunk_len : n;
  const T* p = x + row * n;
  R r;
  Acc acc = R::identity();
  for (int64_t i = begin + int64_t(threadIdx.x) * V; i < end; i += kRowThreads * V) accumulate<T, R, V>(acc, r, p, i);
  acc = BlockReduce(temp).Reduce(acc, r);
  if (threadIdx.x == 0) {
    if (chunks == 1) R::store(acc, out, idx, row);
    else partial[blockIdx.x] = acc;
  }
}

// Second pass: block `row` combines that row's `chunks` partials.
template <class T, class R>
__global__ void reduce_partials(const typename R::Acc* partial, int64_t chunks, typename R::Out* out, int64_t* idx) {
  using Acc = typename R::Acc;
  using BlockReduce = cub::BlockReduce<Acc, kRowThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const int64_t row = blockIdx.x;
  R r;
  Acc acc = R::identity();
  for (int64_t j = threadIdx.x; j < chunks; j += kRowThreads) acc = r(acc, partial[row * chunks + j]);
  acc = BlockReduce(temp).Reduce(acc, r);
  if (threadIdx.x == 0) R::store(acc, out, idx, row);
}

constexpr int kColTile = 32, kColRows = 8;

// Each thread reduces V adjacent columns (V > 1: 16-bit columns read as one VecPack per row, inner a
// multiple of V and x aligned), so a warp reads 32 * V adjacent elements of a row.
template <class T, class R, int V>
__global__ void reduce_cols(const T* x, int64_t outer, int64_t n, int64_t inner, typename R::Out* out, int64_t* idx) {
  using Acc = typename R::Acc;
  __shared__ Acc tile[kColRows][kColTile * V];
  R r;
  const int64_t c = (blockIdx.x * int64_t(kColTile) + threadIdx.x) * V;
  for (int64_t a = blockIdx.y; a < outer; a += gridDim.y) {
    Acc acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = R::identity();
    if (c < inner) {
      const T* p = x + a * n * inner + c;
      for (int64_t i = threadIdx.y; i < n; i += kColRows) {
        if constexpr (V == 1) {
          acc[0] = r(acc[0], R::from(p[i * inner], i));
        } else {
          const VecPack<T, V> pack = *reinterpret_cast<const VecPack<T, V>*>(p + i * inner);
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] = r(acc[k], R::from(pack.v[k], i));
        }
      }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) tile[threadIdx.y][threadIdx.x * V + k] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0 && c < inner) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        for (int j = 1; j < kColRows; ++j) acc[k] = r(acc[k], tile[j][threadIdx.x * V + k]);
        R::store(acc[k], out, idx, a * inner + c + k);
      }
    }
    __syncthreads();
  }
}

// A few columns (inner <= kFewCols, as a narrow layer's bias gradient: [512, 10]): reduce_cols would
// leave most of its block idle and each thread with a long chain of rows. Here `inner` adjacent
// threads take one row, kFewColsThreads / inner rows at a time, so that a warp reads adjacent
// elements and each thread has a few rows; the rows' lanes of a column then combine in a fixed
// order (deterministic), and the maximum's index comes from the reducer, which prefers the first.
constexpr int kFewCols = 16, kFewColsThreads = 256;

template <class T, class R>
__global__ void reduce_few_cols(const T* x, int64_t outer, int64_t n, int inner, typename R::Out* out, int64_t* idx) {
  using Acc = typename R::Acc;
  __shared__ Acc lane_acc[kFewColsThreads];
  R r;
  const int lanes = kFewColsThreads / inner;
  const int col = static_cast<int>(threadIdx.x) % inner, lane = static_cast<int>(threadIdx.x) / inner;
  for (int64_t a = blockIdx.x; a < outer; a += gridDim.x) {
    Acc acc = R::identity();
    if (lane < lanes) {
      const T* p = x + a * n * inner + col;
#pragma unroll 4
      for (int64_t i = lane; i < n; i += lanes) acc = r(acc, R::from(p[i * inner], i));
    }
    lane_acc[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x < inner) {
      Acc total = lane_acc[threadIdx.x];
      for (int j = 1; j < lanes; ++j) total = r(total, lane_acc[j * inner + threadIdx.x]);
      R::store(total, out, idx, a * inner + threadIdx.x);
    }
    __syncthreads();
  }
}

constexpr int kRowVec16 = 8;  // 16-bit elements per row load: 16 bytes
constexpr int kColVec16 = 2;  // 16-bit columns per thread: a warp reads 128 bytes of a row

// VRows / VCols: elements per load along a row (inner == 1) and columns per thread (inner > 1).
template <class T, class R, int VRows, int VCols>
void launch_reduce(const T* x, int64_t outer, int64_t n, int64_t inner, typename R::Out* out, int64_t* idx, int device,
                   cudaStream_t stream) {
  using Acc = typename R::Acc;
  if (inner > 1 && inner <= kFewCols) {
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(outer, 65535));
    reduce_few_cols<T, R><<<blocks, kFewColsThreads, 0, stream>>>(x, outer, n, static_cast<int>(inner), out, idx);
    CUDA_LAUNCH_CHECK(reduce_few_cols);
    return;
  }
  if (inner > 1) {
    dim3 block(kColTile, kColRows);
    dim3 grid(static_cast<unsigned>((inner + kColTile * VCols - 1) / (kColTile * VCols)),
              static_cast<unsigned>(std::min<int64_t>(outer, 65535)));
    reduce_cols<T, R, VCols><<<grid, block, 0, stream>>>(x, outer, n, inner, out, idx);
    CUDA_LAUNCH_CHECK(reduce_cols);
    return;
  }
  if (n <= kWarpRowMax) {
    reduce_rows_warp<T, R, VRows>
        <<<static_cast<unsigned>((outer + kWarpRows - 1) / kWarpRows), kWarpRows * 32, 0, stream>>>(x, outer, n, out,
                                                                                                    idx);
    CUDA_LAUNCH_CHECK(reduce_rows_warp);
    return;
  }
  // Split long rows while there are too few rows to fill the GPU (about 1024 blocks in flight).
  constexpr int64_t kMinChunk = kRowThreads * 16;
  int64_t chunks = 1;
  if (outer < 1024 && n > kMinChunk) chunks = std::min((n + kMinChunk - 1) / kMinChunk, std::max<int64_t>(1, 1024 / outer));
  const int64_t chunk_len = ((n + chunks - 1) / chunks + VRows - 1) / VRows * VRows;
  Acc* partial = nullptr;
  Allocator& alloc = allocator_for(Device::cuda(device));
  const size_t partial_bytes = chunks > 1 ? static_cast<size_t>(outer * chunks) * sizeof(Acc) : 0;
  if (partial_bytes) partial = static_cast<Acc*>(alloc.allocate(partial_bytes));
  reduce_rows<T, R, VRows><<<static_cast<unsigned>(outer * chunks), kRowThreads, 0, stream>>>(x, n, chunks, chunk_len,
                                                                                              out, idx, partial);
  CUDA_LAUNCH_CHECK(reduce_rows);
  if (partial_bytes) {
    reduce_partials<T, R><<<static_cast<unsigned>(outer), kRowThreads, 0, stream>>>(partial, chunks, out, idx);
    CUDA_LAUNCH_CHECK(reduce_partials);
    // Returned at once: the caching allocator reuses it only for work queued later on this stream.
    alloc.deallocate(partial, partial_bytes);
  }
}

}  // namespace

void CudaKernels::reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out,
                         Tensor* argmax) {
  if (outer * inner == 0) return;
  // A float32 sum of 16-bit values: a master weight's bias gradient under autocast.
  const bool widening = out.dtype() != x.dtype();
  MINIDL_CHECK(!widening || (op == ReduceOp::Sum && is_reduced_floating(x.dtype()) && out.dtype() == kFloat32),
               "reduce on CUDA: expected the output in the input's dtype (or a float32 sum of 16-bit values), got ",
               x.dtype(), " into ", out.dtype());
  cuda::DeviceGuard guard(device_);
  dispatch_all_and_half(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    const T* in = ptr<const T>(x);
    int64_t* idx = op == ReduceOp::Max && argmax ? ptr<int64_t>(*argmax) : nullptr;
    auto launch = [&](auto reducer) {
      using R = decltype(reducer);
      typename R::Out* o = ptr<typename R::Out>(out);
      if constexpr (is_16bit_float_v<T>) {
        // Vector loads where the rows or columns line up with them; else one element at a time.
        const bool rows_fit = inner == 1 && n % kRowVec16 == 0 && aligned_to(2 * kRowVec16, {in});
        const bool cols_fit = inner > 1 && inner % kColVec16 == 0 && aligned_to(2 * kColVec16, {in});
        if (rows_fit || cols_fit) {
          launch_reduce<T, R, kRowVec16, kColVec16>(in, outer, n, inner, o, idx, device_, stream_);
          return;
        }
      }
      launch_reduce<T, R, 1, 1>(in, outer, n, inner, o, idx, device_, stream_);
    };
    if constexpr (is_16bit_float_v<T>) {
      if (widening) return launch(SumReducer<T, float>{});
    }
    if (op == ReduceOp::Sum) launch(SumReducer<T>{});
    else if (op == ReduceOp::Prod) launch(ProdReducer<T>{});
    else launch(MaxReducer<T>{});
  });
}

}  // namespace minidl
