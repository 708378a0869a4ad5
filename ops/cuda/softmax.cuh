#pragma once
// Softmax over the middle axis of [outer, n, inner], shared by softmax.cu and the fused
// cross-entropy in loss.cu.
//  - inner == 1, n <= 1024 (the classifier case): one warp per row, shuffles for max and sum.
//  - inner == 1, larger n: one block per row, cub::BlockReduce.
//  - inner > 1: one thread per (outer, inner) column walking n; adjacent threads read adjacent columns.
// Sums of exponentials accumulate in double for float inputs.
#include <cub/block/block_reduce.cuh>

#include "ops/cuda/common.cuh"

namespace minidl::cuda {

constexpr int kWarp = 32;
constexpr int kWarpRowsPerBlock = 4;
constexpr int kSoftmaxBlock = 256;
constexpr int64_t kWarpRowLimit = 1024;

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    T other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

struct MaxOp {
  template <class T>
  __device__ T operator()(const T& a, const T& b) const { return b > a ? b : a; }
};
struct SumOp {
  template <class T>
  __device__ T operator()(const T& a, const T& b) const { return a + b; }
};

/// Writes row `row` of the (log-)softmax. With `target`, also the row's log-probability at its
/// target into row_value[row]: 0 for a row whose target is ignore_index, and 0 with the device
/// error flag raised for any other target out of range.
template <class T>
struct RowOutput {
  const int64_t* target = nullptr;
  T* row_value = nullptr;
  DeviceErrorReport error;
  int64_t ignore_index = -100;
};

// One warp per row.
template <class T>
__global__ void softmax_rows_warp(const T* x, T* out, int64_t rows, int64_t n, bool log, RowOutput<T> extra) {
  using Acc = AccT<T>;
  const int lane = threadIdx.x % kWarp;
  for (int64_t row = blockIdx.x * int64_t(kWarpRowsPerBlock) + threadIdx.x / kWarp; row < rows;
       row += int64_t(gridDim.x) * kWarpRowsPerBlock) {
    const T* p = x + row * n;
    T* o = out + row * n;
    T m = -d_infinity<T>();
    for (int64_t i = lane; i < n; i += kWarp) m = p[i] > m ? p[i] : m;
    m = warp_max(m);
    Acc s = 0;
    for (int64_t i = lane; i < n; i += kWarp) s += Acc(d_exp(p[i] - m));
    s = warp_sum(s);
    const T lse = m + d_log(static_cast<T>(s));
    const T inv = static_cast<T>(Acc(1) / s);
    for (int64_t i = lane; i < n; i += kWarp) o[i] = log ? p[i] - lse : d_exp(p[i] - m) * inv;
    if (extra.target && lane == 0) {
      const int64_t t = extra.target[row];
      if (t == extra.ignore_index) {
        extra.row_value[row] = T(0);
      } else if (t >= 0 && t < n) {
        extra.row_value[row] = p[t] - lse;
      } else {
        extra.row_value[row] = T(0);
        report_device_error(extra.error, kCrossEntropyTarget, row, t, n);
      }
    }
  }
}

// One block per row.
template <class T>
__global__ void softmax_rows_block(const T* x, T* out, int64_t rows, int64_t n, bool log, RowOutput<T> extra) {
  using Acc = AccT<T>;
  using ReduceT = cub::BlockReduce<T, kSoftmaxBlock>;
  using ReduceAcc = cub::BlockReduce<Acc, kSoftmaxBlock>;
  __shared__ union {
    typename ReduceT::TempStorage t;
    typename ReduceAcc::TempStorage acc;
  } temp;
  __shared__ T shared_max;
  __shared__ Acc shared_sum;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * n;
    T* o = out + row * n;
    T m = -d_infinity<T>();
    for (int64_t i = threadIdx.x; i < n; i += kSoftmaxBlock) m = p[i] > m ? p[i] : m;
    m = ReduceT(temp.t).Reduce(m, MaxOp());
    if (threadIdx.x == 0) shared_max = m;
    __syncthreads();
    m = shared_max;
    Acc s = 0;
    for (int64_t i = threadIdx.x; i < n; i += kSoftmaxBlock) s += Acc(d_exp(p[i] - m));
    s = ReduceAcc(temp.acc).Reduce(s, SumOp());
    if (threadIdx.x == 0) shared_sum = s;
    __syncthreads();
    s = shared_sum;
    const T lse = m + d_log(static_cast<T>(s));
    const T inv = static_cast<T>(Acc(1) / s);
    for (int64_t i = threadIdx.x; i < n; i += kSoftmaxBlock) o[i] = log ? p[i] - lse : d_exp(p[i] - m) * inv;
    if (extra.target && threadIdx.x == 0) {
      const int64_t t = extra.target[row];
      if (t == extra.ignore_index) {
        extra.row_value[row] = T(0);
      } else if (t >= 0 && t < n) {
        extra.row_value[row] = p[t] - lse;
      } else {
        extra.row_value[row] = T(0);
        report_device_error(extra.error, kCrossEntropyTarget, row, t, n);
      }
    }
    __syncthreads();  // shared_max / shared_sum are rewritten for the next row
  }
}

// One thread per (outer, inner) column.
template <class T>
__global__ void softmax_cols(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool log) {
  using Acc = AccT<T>;
  const int64_t cols = outer * inner;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < cols; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t a = j / inner, c = j - a * inner;
    const T* p = x + a * n * inner + c;
    T* o = out + a * n * inner + c;
    T m = -d_infinity<T>();
    for (int64_t i = 0; i < n; ++i) m = p[i * inner] > m ? p[i * inner] : m;
    Acc s = 0;
    for (int64_t i = 0; i < n; ++i) s += Acc(d_exp(p[i * inner] - m));
    const T lse = m + d_log(static_cast<T>(s));
    const T inv = static_cast<T>(Acc(1) / s);
    for (int64_t i = 0; i < n; ++i) o[i * inner] = log ? p[i * inner] - lse : d_exp(p[i * inner] - m) * inv;
  }
}

template <class T>
void launch_softmax(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool log, cudaStream_t stream,
                    RowOutput<T> extra = {}) {
  if (outer * inner == 0 || n == 0) return;
  if (inner == 1 && n <= kWarpRowLimit) {
    const int64_t blocks = (outer + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
    softmax_rows_warp<T><<<static_cast<unsigned>(std::min(blocks, kMaxBlocks)), kWarp * kWarpRowsPerBlock, 0,
                           stream>>>(x, out, outer, n, log, extra);
    CUDA_LAUNCH_CHECK(softmax_rows_warp);
  } else if (inner == 1) {
    softmax_rows_block<T><<<static_cast<unsigned>(std::min(outer, kMaxBlocks)), kSoftmaxBlock, 0, stream>>>(
        x, out, outer, n, log, extra);
    CUDA_LAUNCH_CHECK(softmax_rows_block);
  } else {
    softmax_cols<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, out, outer, n, inner, log);
    CUDA_LAUNCH_CHECK(softmax_cols);
  }
}

}  // namespace minidl::cuda
