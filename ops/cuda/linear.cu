// The end of a linear layer's forward split along k (ops/cuda/matmul.cpp): the slices' partial
// products summed in order, plus the bias, then ReLU.
//
// The backward of ReLU(linear) before its GEMMs (ops/matmul.cpp, linear_relu): the gradient masked
// where the output was zero, and the bias gradient, its sum over the rows, in one pass over the
// [rows, n] gradient instead of a ReLU-backward kernel followed by a column reduction.
//
// Up to 1024 rows (a training batch), a block holds all the rows of 8 columns
// (relu_bias_backward_short_kernel). Beyond, a block is 32 columns (one 128-byte line of a row) by
// 8 row lanes and covers a slice of the rows; the row slices of a column group run in parallel
// blocks. Each block leaves its column sums in a scratch row; the last block of a column group to
// finish (counted with an atomic, a counter per group that it resets for the next launch) adds the
// scratch rows in slice order, so the result is deterministic and one launch does it all. Sums of
// float accumulate in double, like the reductions.
#include <limits>

#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kColumns = 32, kRowLanes = 8;
constexpr int64_t kRowsPerSlice = 64;   // 8 rows per thread: enough loads in flight per block
constexpr int64_t kMaxSlices = 64;

// Sums of float in double (AccT), of bfloat16 and float16 in float.
template <class T>
using BiasSum = std::conditional_t<is_16bit_float_v<T>, float, AccT<T>>;

// GB: the bias gradient's element type, T's or (a master bias under autocast) float32.
template <class T, class GB>
__global__ void relu_bias_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ out,
                                          T* __restrict__ grad_pre, GB* __restrict__ grad_bias, int64_t rows,
                                          int64_t cols, int64_t rows_per_slice, BiasSum<T>* slice_sums,
                                          unsigned* counters) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  __shared__ BiasSum<T> lane_sums[kRowLanes][kColumns + 1];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  const int64_t begin = blockIdx.y * rows_per_slice, end = min(rows, begin + rows_per_slice);
  BiasSum<T> sum = 0;
  if (col < cols) {
    for (int64_t row = begin + threadIdx.y; row < end; row += kRowLanes) {
      const int64_t i = row * cols + col;
      const T g = out[i] > T(0) ? grad_out[i] : T(0);
      grad_pre[i] = g;
      sum += g;
    }
  }
  lane_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  BiasSum<T> slice_sum = 0;
  if (threadIdx.y == 0)
    for (int lane = 0; lane < kRowLanes; ++lane) slice_sum += lane_sums[lane][threadIdx.x];
  if (gridDim.y == 1) {
    if (threadIdx.y == 0 && col < cols) grad_bias[col] = static_cast<GB>(slice_sum);
    return;
  }
  if (threadIdx.y == 0 && col < cols) slice_sums[blockIdx.y * cols + col] = slice_sum;
  if (!last_block_of_group(counters, blockIdx.x, gridDim.y)) return;
  if (threadIdx.y == 0 && col < cols) {
    BiasSum<T> total = 0;
    for (unsigned s = 0; s < gridDim.y; ++s) total += __ldcg(&slice_sums[s * cols + col]);
    grad_bias[col] = static_cast<GB>(total);
  }
}

// Up to kShortRows rows: a block is 8 columns by 64 row lanes over all the rows, each thread
// loading its rows (at most 16) before it stores any, then the lanes summed in a fixed order. No
// block waits for another: at a batch of 512 the sliced kernel's fence and second pass cost more
// than the loads.
constexpr int kShortColumns = 8, kShortLanes = 64, kShortWarps = kShortColumns * kShortLanes / 32;
constexpr int kShortRows = 16 * kShortLanes, kShortUnroll = 8;

template <class T, class GB>
__global__ void __launch_bounds__(kShortColumns* kShortLanes)
    relu_bias_backward_short_kernel(const T* __restrict__ grad_out, const T* __restrict__ out, T* __restrict__ grad_pre,
                                    GB* __restrict__ grad_bias, int rows, int cols) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  __shared__ BiasSum<T> warp_sums[kShortWarps][kShortColumns];
  const int col = static_cast<int>(blockIdx.x) * kShortColumns + static_cast<int>(threadIdx.x);
  const int thread = static_cast<int>(threadIdx.y) * kShortColumns + static_cast<int>(threadIdx.x);
  BiasSum<T> sum = 0;
  if (col < cols) {
    for (int first = static_cast<int>(threadIdx.y); first < rows; first += kShortUnroll * kShortLanes) {
      T g[kShortUnroll], o[kShortUnroll];
#pragma unroll
      for (int u = 0; u < kShortUnroll; ++u) {
        const int row = first + u * kShortLanes;
        if (row < rows) {
          g[u] = grad_out[static_cast<size_t>(row) * cols + col];
          o[u] = out[static_cast<size_t>(row) * cols + col];
        }
      }
#pragma unroll
      for (int u = 0; u < kShortUnroll; ++u) {
        const int row = first + u * kShortLanes;
        if (row < rows) {
          const T v = o[u] > T(0) ? g[u] : T(0);
          grad_pre[static_cast<size_t>(row) * cols + col] = v;
          sum += v;
        }
      }
    }
  }
  // A warp is 8 columns by 4 row lanes (lanes 8 and 16 apart).
  sum += __shfl_xor_sync(0xffffffffu, sum, 8);
  sum += __shfl_xor_sync(0xffffffffu, sum, 16);
  if (thread % 32 < kShortColumns) warp_sums[thread / 32][thread % 32] = sum;
  __syncthreads();
  const int out_col = static_cast<int>(blockIdx.x) * kShortColumns + thread;
  if (thread < kShortColumns && out_col < cols) {
    BiasSum<T> total = 0;
    for (int w = 0; w < kShortWarps; ++w) total += warp_sums[w][thread];
    grad_bias[out_col] = static_cast<GB>(total);
  }
}

template <bool Relu>
__global__ void sum_slices_bias_kernel(const float* __restrict__ parts, const float* __restrict__ bias,
                                       float* __restrict__ c, int slices, int64_t size, int64_t n) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < size; i += int64_t(gridDim.x) * blockDim.x) {
    float sum = bias[i % n];
#pragma unroll 8  // the slices' loads in flight together
    for (int s = 0; s < slices; ++s) sum += __ldg(&parts[s * size + i]);
    c[i] = Relu ? (sum > 0.f || sum != sum ? sum : 0.f) : sum;
  }
}

}  // namespace

void CudaKernels::sum_slices_bias(const Tensor& parts, const Tensor& bias, bool relu, Tensor& c) {
  const int slices = static_cast<int>(parts.size(0));
  const int64_t size = c.numel(), n = c.size(1);
  const float* p = ptr<const float>(parts);
  const float* b = ptr<const float>(bias);
  launch_early("sum_slices_bias_kernel", relu ? sum_slices_bias_kernel<true> : sum_slices_bias_kernel<false>,
               blocks_for(size), kThreads, 0, stream_, p, b, ptr<float>(c), slices, size, n);
}

void CudaKernels::relu_bias_backward(const Tensor& grad_out, const Tensor& out, Tensor& grad_pre, Tensor& grad_bias) {
  const int64_t rows = grad_pre.size(0), cols = grad_pre.size(1);
  if (cols == 0) return;
  const bool float_bias = grad_bias.dtype() != grad_pre.dtype();
  MINIDL_CHECK(!float_bias || (is_reduced_floating(grad_pre.dtype()) && grad_bias.dtype() == kFloat32),
               "relu_bias_backward: expected the bias gradient in the gradient's dtype (or float32 for a 16-bit one), "
               "got ", grad_pre.dtype(), " and ", grad_bias.dtype());
  cuda::DeviceGuard guard(device_);
  dispatch_floating_and_half(grad_pre.dtype(), "relu_bias_backward", [&](auto tag) {
    using T = decltype(tag);
    const auto run = [&](auto bias_tag) {
      using GB = decltype(bias_tag);
      if (rows <= kShortRows && rows * cols <= std::numeric_limits<int>::max()) {
        const auto blocks = static_cast<unsigned>((cols + kShortColumns - 1) / kShortColumns);
        launch_early("relu_bias_backward_short_kernel", relu_bias_backward_short_kernel<T, GB>, blocks,
                     dim3(kShortColumns, kShortLanes), 0, stream_, ptr<const T>(grad_out), ptr<const T>(out),
                     ptr<T>(grad_pre), ptr<GB>(grad_bias), int(rows), int(cols));
        return;
      }
      const int64_t groups = (cols + kColumns - 1) / kColumns;
      int64_t slices = std::clamp<int64_t>((rows + kRowsPerSlice - 1) / kRowsPerSlice, 1, kMaxSlices);
      if (groups > kMaxCounterGroups) slices = 1;
      const int64_t rows_per_slice = std::max<int64_t>(1, (rows + slices - 1) / slices);
      Tensor scratch;
      unsigned* counters = nullptr;
      if (slices > 1) {
        scratch = Tensor::empty({slices, cols}, dtype_of<BiasSum<T>>(), grad_pre.device());
        counters = block_counters(device_, stream_);
      }
      const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(slices));
      launch_early("relu_bias_backward_kernel", relu_bias_backward_kernel<T, GB>, grid, dim3(kColumns, kRowLanes), 0,
                   stream_, ptr<const T>(grad_out), ptr<const T>(out), ptr<T>(grad_pre), ptr<GB>(grad_bias), rows,
                   cols, rows_per_slice, slices > 1 ? ptr<BiasSum<T>>(scratch) : nullptr, counters);
    };
    if constexpr (is_16bit_float_v<T>) {
      if (float_bias) return run(float{});
    }
    run(T{});
  });
}

}  // namespace minidl
