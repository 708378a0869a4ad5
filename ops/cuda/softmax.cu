// Softmax and log-softmax forward and backward on CUDA (kernel shapes in ops/cuda/softmax.cuh).
// Backward: softmax  grad_in = y * (g - sum(g * y));  log-softmax  grad_in = g - exp(y) * sum(g).
#include "ops/cuda/softmax.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T>
__global__ void softmax_backward_rows_warp(const T* g, const T* y, T* gin, int64_t rows, int64_t n, bool log) {
  using Acc = AccT<T>;
  const int lane = threadIdx.x % kWarp;
  for (int64_t row = blockIdx.x * int64_t(kWarpRowsPerBlock) + threadIdx.x / kWarp; row < rows;
       row += int64_t(gridDim.x) * kWarpRowsPerBlock) {
    const T* gr = g + row * n;
    const T* yr = y + row * n;
    T* o = gin + row * n;
    Acc dot = 0;
    for (int64_t i = lane; i < n; i += kWarp) dot += log ? Acc(gr[i]) : Acc(gr[i]) * Acc(yr[i]);
    const T d = static_cast<T>(warp_sum(dot));
    for (int64_t i = lane; i < n; i += kWarp) o[i] = log ? gr[i] - d_exp(yr[i]) * d : yr[i] * (gr[i] - d);
  }
}

template <class T>
__global__ void softmax_backward_rows_block(const T* g, const T* y, T* gin, int64_t rows, int64_t n, bool log) {
  using Acc = AccT<T>;
  using Reduce = cub::BlockReduce<Acc, kSoftmaxBlock>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ Acc shared_dot;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * n;
    const T* yr = y + row * n;
    T* o = gin + row * n;
    Acc dot = 0;
    for (int64_t i = threadIdx.x; i < n; i += kSoftmaxBlock) dot += log ? Acc(gr[i]) : Acc(gr[i]) * Acc(yr[i]);
    dot = Reduce(temp).Reduce(dot, SumOp());
    if (threadIdx.x == 0) shared_dot = dot;
    __syncthreads();
    const T d = static_cast<T>(shared_dot);
    for (int64_t i = threadIdx.x; i < n; i += kSoftmaxBlock) o[i] = log ? gr[i] - d_exp(yr[i]) * d : yr[i] * (gr[i] - d);
    __syncthreads();
  }
}

template <class T>
__global__ void softmax_backward_cols(const T* g, const T* y, T* gin, int64_t outer, int64_t n, int64_t inner,
                                      bool log) {
  using Acc = AccT<T>;
  const int64_t cols = outer * inner;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < cols; j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t a = j / inner, c = j - a * inner, base = a * n * inner + c;
    Acc dot = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = base + i * inner;
      dot += log ? Acc(g[k]) : Acc(g[k]) * Acc(y[k]);
    }
    const T d = static_cast<T>(dot);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = base + i * inner;
      gin[k] = log ? g[k] - d_exp(y[k]) * d : y[k] * (g[k] - d);
    }
  }
}

}  // namespace

void CudaKernels::softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out) {
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    launch_softmax<T>(ptr<const T>(x), ptr<T>(out), outer, n, inner, log, stream_);
  });
}

void CudaKernels::softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t outer, int64_t n,
                                   int64_t inner, bool log, Tensor& grad_in) {
  if (outer * inner == 0 || n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(out.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = ptr<const T>(grad_out);
    const T* y = ptr<const T>(out);
    T* gi = ptr<T>(grad_in);
    if (inner == 1 && n <= kWarpRowLimit) {
      const int64_t blocks = (outer + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
      softmax_backward_rows_warp<T><<<static_cast<unsigned>(std::min(blocks, kMaxBlocks)), kWarp * kWarpRowsPerBlock,
                                      0, stream_>>>(g, y, gi, outer, n, log);
      CUDA_LAUNCH_CHECK(softmax_backward_rows_warp);
    } else if (inner == 1) {
      softmax_backward_rows_block<T><<<static_cast<unsigned>(std::min(outer, kMaxBlocks)), kSoftmaxBlock, 0,
                                       stream_>>>(g, y, gi, outer, n, log);
      CUDA_LAUNCH_CHECK(softmax_backward_rows_block);
    } else {
      softmax_backward_cols<T><<<blocks_for(outer * inner), kThreads, 0, stream_>>>(g, y, gi, outer, n, inner, log);
      CUDA_LAUNCH_CHECK(softmax_backward_cols);
    }
  });
}

}  // namespace minidl
