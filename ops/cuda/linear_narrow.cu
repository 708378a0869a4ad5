// The three products of a linear layer with few output features (a classifier's last layer: 10
// classes), written here because cuBLAS(Lt) does them badly. A row of 10 floats is 40 bytes, so
// every cuBLASLt kernel falls back to unaligned (align1) tiles, and tiles of 32 or 64 outputs
// leave most of each tile, and most of the GPU, idle. On an H200, for the MNIST MLP's last layer
// (256 -> 10) at batch 64 and 512, cuBLASLt's best of about 180 configurations (as its tuner
// timed them) took about 7 and 7.3 us for the forward, 4.1 and 7 us for the weight gradient, plus
// 1.6 and 4.5 us for the bias gradient's reduction, and 3.4 and 3.6 us for the input gradient.
// Inside the training step's CUDA graph (CUPTI) these kernels take 3.0 and 3.5 us, 2.9 and 5.7 us
// (with the bias gradient), 2.0 and 3.6 us.
//
//   narrow_linear:   c [M, N] = x [M, K] w [N, K]^T + bias, then ReLU; N <= 16. One block per row
//                    of c: threads stride along k (coalesced loads of x and w), each keeping N sums,
//                    then butterfly sums across each warp and the warps' sums in order. After a
//                    layer split along k and a ReLU (linear_relu_linear), the same kernel first
//                    finishes that layer's row, so x costs no kernel of its own.
//   small_k_gemm:    c [M, N] = alpha a [M, K] b [K, N] + beta c; K <= 16. One thread per output,
//                    coalesced along N. Masked by a ReLU's output (linear_relu_linear's backward),
//                    it is the whole gradient of the layer before the ReLU, up to its GEMMs.
//   narrow_weight_grad: c [M, N] = a [K, M]^T b [K, N] and row_sums [M] = a summed over K; M <= 16.
//                    A block is 8 columns by 64 lanes of k over all of k (a's rows staged in shared
//                    memory), summed across the lanes in a fixed order: deterministic, one launch,
//                    no block waits for another. Where b is a ReLU's output, the same pass also
//                    makes the bias gradient of the layer before the ReLU, so that neither pass
//                    on the step's critical path sums over the rows.
//
// Products accumulate in T; the bias gradients are summed across threads (or warps) in AccT, like
// the reductions.
#include <limits>

#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kNarrowMax = 16;  // the widest output each kernel keeps in registers
constexpr int kMaxWarps = 4;

// With FromSlices, each row of x is first made from the split product of the layer before
// (gemm_bias_split_k): the slices summed in order onto x_bias, then ReLU, as sum_slices_bias does,
// and written to x for the backward.
template <class T, bool Relu, bool FromSlices>
__global__ void narrow_linear_kernel(const T* __restrict__ x_in, const T* __restrict__ w, const T* __restrict__ bias,
                                     T* __restrict__ c, int n, int k, const T* __restrict__ parts,
                                     const T* __restrict__ x_bias, int slices, int64_t slice_size,
                                     T* __restrict__ x_out) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  __shared__ T warp_sums[kMaxWarps][kNarrowMax];
  const int row = blockIdx.x, lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  T sum[kNarrowMax];
#pragma unroll
  for (int j = 0; j < kNarrowMax; ++j) sum[j] = T(0);
  const size_t row_start = static_cast<size_t>(row) * k;
#pragma unroll 4
  for (int i = static_cast<int>(threadIdx.x); i < k; i += static_cast<int>(blockDim.x)) {
    T v;
    if constexpr (FromSlices) {
      v = x_bias[i];
#pragma unroll 8  // the slices' loads in flight together
      for (int s = 0; s < slices; ++s) v += __ldg(&parts[s * slice_size + row_start + i]);
      v = v > T(0) || v != v ? v : T(0);
      x_out[row_start + i] = v;
    } else {
      v = x_in[row_start + i];
    }
#pragma unroll
    for (int j = 0; j < kNarrowMax; ++j)
      if (j < n) sum[j] += v * __ldg(w + static_cast<size_t>(j) * k + i);
  }
#pragma unroll
  for (int j = 0; j < kNarrowMax; ++j) {
    if (j < n) {
      T s = sum[j];
      for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
      if (lane == 0) warp_sums[warp][j] = s;
    }
  }
  __syncthreads();
  const int j = static_cast<int>(threadIdx.x);
  if (j < n) {
    T v = bias ? bias[j] : T(0);
    T total = T(0);
    for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) total += warp_sums[i][j];
    v += total;
    if (Relu) v = v > T(0) || v != v ? v : T(0);
    c[static_cast<size_t>(row) * n + j] = v;
  }
}

// With mask_by, an element of c is kept only where mask_by's is positive: the gradient of a narrow
// layer's input through the ReLU before it (linear_relu_linear).
template <class T, bool Masked>
__global__ void small_k_gemm_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int m, int n,
                                    int k, T alpha, T beta, const T* __restrict__ mask_by) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  const int64_t total = static_cast<int64_t>(m) * n;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total; idx += int64_t(gridDim.x) * blockDim.x) {
    const int row = static_cast<int>(idx / n), col = static_cast<int>(idx - int64_t(row) * n);
    T sum = T(0);
#pragma unroll
    for (int j = 0; j < kNarrowMax; ++j)  // unrolled: every load in flight at once
      if (j < k) sum += a[static_cast<size_t>(row) * k + j] * b[static_cast<size_t>(j) * n + col];
    if constexpr (Masked) c[idx] = mask_by[idx] > T(0) ? sum : T(0);
    else c[idx] = beta == T(0) ? alpha * sum : alpha * sum + beta * c[idx];
  }
}

// A block is 8 columns of c by 64 lanes of k over all of k, so no block waits for another (a
// cross-block reduction's fence and second pass cost more than the whole product here). a's rows
// are staged in shared memory a chunk at a time, read once by coalesced loads: every lane then
// reads them from there, and only its column of b from global memory.
constexpr int kColumns = 8, kKLanes = 64, kGradThreads = kColumns * kKLanes, kGradWarps = kGradThreads / 32;
constexpr int kChunkBytes = 32 * 1024;
constexpr int kSumLanes = kGradThreads / kNarrowMax;  // lanes of k per row sum

// With ThroughRelu, b is the output of a ReLU before the narrow layer whose weight w [m, n] is given,
// and the block also makes that ReLU's layer's bias gradient, the column sums of
// (a @ w) * (b > 0): sum over j of w[j][col] * (the sum of a[., j] over the rows where b > 0).
template <class T, bool ThroughRelu>
__global__ void __launch_bounds__(kGradThreads)
    narrow_weight_grad_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                              T* __restrict__ row_sums, int m, int n, int k, const T* __restrict__ w,
                              T* __restrict__ relu_bias_grad) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  using Acc = AccT<T>;
  constexpr int kChunkRows = kChunkBytes / (kNarrowMax * int(sizeof(T)));
  __shared__ __align__(16) unsigned char staged[kChunkBytes];  // a's rows, then the warps' sums
  __shared__ Acc row_part[kSumLanes][kNarrowMax];
  T(*chunk)[kNarrowMax] = reinterpret_cast<T(*)[kNarrowMax]>(staged);
  const int col = static_cast<int>(blockIdx.x) * kColumns + static_cast<int>(threadIdx.x);
  const int thread = static_cast<int>(threadIdx.y) * kColumns + static_cast<int>(threadIdx.x);
  const int lane = thread % 32, warp = thread / 32;
  // The first column group also sums a's rows (the bias gradient): thread = lane * 16 + j.
  const bool sums_rows = row_sums && blockIdx.x == 0;
  const int sum_j = thread % kNarrowMax, sum_lane = thread / kNarrowMax;
  Acc row_sum = 0;
  T sum[kNarrowMax];
  T kept[ThroughRelu ? kNarrowMax : 1];  // a summed over the rows where b > 0
#pragma unroll
  for (int j = 0; j < kNarrowMax; ++j) sum[j] = T(0);
#pragma unroll
  for (int j = 0; j < (ThroughRelu ? kNarrowMax : 1); ++j) kept[j] = T(0);
  for (int base = 0; base < k; base += kChunkRows) {
    const int rows = min(kChunkRows, k - base);
    const T* from = a + static_cast<size_t>(base) * m;
#pragma unroll 8  // the loads in flight together, not one round trip each
    for (int e = thread; e < rows * m; e += kGradThreads) chunk[e / m][e % m] = from[e];
    __syncthreads();
#pragma unroll 8
    for (int r = static_cast<int>(threadIdx.y); r < rows; r += kKLanes) {
      const T bv = col < n ? b[static_cast<size_t>(base + r) * n + col] : T(0);
#pragma unroll
      for (int j = 0; j < kNarrowMax; ++j) {
        if (j < m) {
          sum[j] += chunk[r][j] * bv;
          if constexpr (ThroughRelu) kept[j] += bv > T(0) ? chunk[r][j] : T(0);
        }
      }
    }
    if (sums_rows && sum_j < m)
      for (int r = sum_lane; r < rows; r += kSumLanes) row_sum += Acc(chunk[r][sum_j]);
    __syncthreads();
  }
  // A warp holds 8 columns by 4 lanes of k (lanes 8 and 16 apart): those 4 first, then the warps
  // in order through shared memory.
  T(*warp_part)[kNarrowMax][kColumns] = reinterpret_cast<T(*)[kNarrowMax][kColumns]>(staged);
  T(*kept_part)[kNarrowMax][kColumns] =
      reinterpret_cast<T(*)[kNarrowMax][kColumns]>(staged + kGradWarps * kNarrowMax * kColumns * sizeof(T));
#pragma unroll
  for (int j = 0; j < kNarrowMax; ++j) {
    if (j < m) {
      T v = sum[j];
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      if (lane < kColumns) warp_part[warp][j][lane] = v;
      if constexpr (ThroughRelu) {
        T kv = kept[j];
        kv += __shfl_xor_sync(0xffffffffu, kv, 8);
        kv += __shfl_xor_sync(0xffffffffu, kv, 16);
        if (lane < kColumns) kept_part[warp][j][lane] = kv;
      }
    }
  }
  if (sums_rows) row_part[sum_lane][sum_j] = row_sum;
  __syncthreads();
  if (thread < m * kColumns) {
    const int j = thread / kColumns, x = thread % kColumns;
    T total = T(0);
    for (int w = 0; w < kGradWarps; ++w) total += warp_part[w][j][x];
    const int out_col = static_cast<int>(blockIdx.x) * kColumns + x;
    if (out_col < n) c[static_cast<size_t>(j) * n + out_col] = total;
  } else if (sums_rows && thread - m * kColumns < m) {
    const int j = thread - m * kColumns;
    Acc total = Acc(0);
    for (int l = 0; l < kSumLanes; ++l) total += row_part[l][j];
    row_sums[j] = static_cast<T>(total);
  }
  if constexpr (ThroughRelu) {
    // The last kColumns threads: no other output above uses them.
    const int x = thread - (kGradThreads - kColumns), out_col = static_cast<int>(blockIdx.x) * kColumns + x;
    if (x >= 0 && out_col < n) {
      Acc total = Acc(0);
      for (int j = 0; j < m; ++j) {
        Acc kept_j = Acc(0);
        for (int v = 0; v < kGradWarps; ++v) kept_j += Acc(kept_part[v][j][x]);
        total += Acc(w[static_cast<size_t>(j) * n + out_col]) * kept_j;
      }
      relu_bias_grad[out_col] = static_cast<T>(total);
    }
  }
}

bool fits_int(int64_t v) { return v <= std::numeric_limits<int>::max(); }

}  // namespace

namespace {

// The launch of narrow_linear_kernel: from x, or, where parts is defined, from the slices that
// make x (written).
bool launch_narrow_linear(cudaStream_t stream, const Tensor& x, const Tensor& w, const Tensor& bias, bool relu,
                          Tensor& c, const Tensor& parts, const Tensor& x_bias) {
  const int64_t rows = c.size(0), n = c.size(1), k = x.size(1);
  const bool from_slices = parts.defined();
  // bfloat16 / float16 go to cuBLASLt (tensor cores, float32 accumulation): these kernels are float32's.
  if (is_reduced_floating(c.dtype())) return false;
  if (n > kNarrowMax || !x.is_contiguous() || !w.is_contiguous() || !c.is_contiguous() ||
      !fits_int(x.numel()) || !fits_int(rows) || (bias.defined() && !bias.is_contiguous()) ||
      (from_slices && (!parts.is_contiguous() || !x_bias.is_contiguous() || !fits_int(parts.size(0)))))
    return false;
  dispatch_floating(c.dtype(), "narrow_linear", [&](auto tag) {
    using T = decltype(tag);
    // A block per row, a thread per two elements of k (up to 128 threads, then looping): short
    // dependent chains, and small blocks, so that a batch of rows fits on the GPU at once.
    const unsigned threads = static_cast<unsigned>(std::clamp<int64_t>((k / 2 + 31) / 32 * 32, 32, kMaxWarps * 32));
    const T* b = bias.defined() ? ptr<const T>(bias) : nullptr;
    if (from_slices) {
      auto kernel = relu ? narrow_linear_kernel<T, true, true> : narrow_linear_kernel<T, false, true>;
      launch_early("narrow_linear_kernel", kernel, static_cast<unsigned>(rows), threads, 0, stream,
                   static_cast<const T*>(nullptr), ptr<const T>(w), b, ptr<T>(c), int(n), int(k),
                   ptr<const T>(parts), ptr<const T>(x_bias), int(parts.size(0)), rows * k, ptr<T>(x));
    } else {
      auto kernel = relu ? narrow_linear_kernel<T, true, false> : narrow_linear_kernel<T, false, false>;
      launch_early("narrow_linear_kernel", kernel, static_cast<unsigned>(rows), threads, 0, stream, ptr<const T>(x),
                   ptr<const T>(w), b, ptr<T>(c), int(n), int(k), static_cast<const T*>(nullptr),
                   static_cast<const T*>(nullptr), 0, int64_t{0}, static_cast<T*>(nullptr));
    }
  });
  return true;
}

}  // namespace

bool CudaKernels::narrow_linear(const Tensor& x, const Tensor& w, const Tensor& bias, bool relu, Tensor& c) {
  cuda::DeviceGuard guard(device_);
  return launch_narrow_linear(stream_, x, w, bias, relu, c, Tensor(), Tensor());
}

bool CudaKernels::narrow_linear_from_slices(const Tensor& parts, const Tensor& x_bias, Tensor& x, const Tensor& w,
                                            const Tensor& bias, Tensor& c) {
  cuda::DeviceGuard guard(device_);
  return launch_narrow_linear(stream_, x, w, bias, false, c, parts, x_bias);
}

bool CudaKernels::small_k_gemm(const Tensor& a, const Tensor& b, Tensor& c, double alpha, double beta,
                               const Tensor& mask_by) {
  const int64_t m = c.size(0), n = c.size(1), k = a.size(1);
  if (is_reduced_floating(a.dtype()) || a.dtype() != c.dtype()) return false;  // as in launch_narrow_linear
  if (k > kNarrowMax || !a.is_contiguous() || !b.is_contiguous() || !c.is_contiguous() || !fits_int(m) ||
      !fits_int(n) || (mask_by.defined() && !mask_by.is_contiguous()))
    return false;
  dispatch_floating(c.dtype(), "small_k_gemm", [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = mask_by.defined() ? small_k_gemm_kernel<T, true> : small_k_gemm_kernel<T, false>;
    launch_early("small_k_gemm_kernel", kernel, blocks_for(m * n), kThreads, 0, stream_, ptr<const T>(a),
                 ptr<const T>(b), ptr<T>(c), int(m), int(n), int(k), static_cast<T>(alpha), static_cast<T>(beta),
                 mask_by.defined() ? ptr<const T>(mask_by) : nullptr);
  });
  return true;
}

bool CudaKernels::narrow_weight_grad(cudaStream_t stream, const Tensor& a, const Tensor& b, Tensor& c,
                                     Tensor* row_sums, const Tensor& relu_next_w, Tensor* relu_bias_grad) {
  const int64_t m = c.size(0), n = c.size(1), k = a.size(0);
  const bool through_relu = relu_bias_grad != nullptr;
  // cuBLAS's, as in launch_narrow_linear; so is a master weight's float32 gradient from 16-bit inputs.
  if (is_reduced_floating(a.dtype()) || a.dtype() != c.dtype() ||
      (row_sums && row_sums->dtype() != c.dtype()) || (through_relu && relu_bias_grad->dtype() != c.dtype()))
    return false;
  if (m == 0 || m > kNarrowMax || n == 0 || k == 0 || !a.is_contiguous() || !b.is_contiguous() ||
      !c.is_contiguous() || !fits_int(a.numel()) || !fits_int(b.numel()) ||
      (through_relu && (!relu_next_w.is_contiguous() || !relu_bias_grad->is_contiguous())))
    return false;
  dispatch_floating(c.dtype(), "narrow_weight_grad", [&](auto tag) {
    using T = decltype(tag);
    const auto blocks = static_cast<unsigned>((n + kColumns - 1) / kColumns);
    static_assert(2 * kGradWarps * kNarrowMax * kColumns * sizeof(T) <= kChunkBytes);
    const auto kernel = through_relu ? narrow_weight_grad_kernel<T, true> : narrow_weight_grad_kernel<T, false>;
    launch_early("narrow_weight_grad_kernel", kernel, blocks, dim3(kColumns, kKLanes), 0, stream, ptr<const T>(a),
                 ptr<const T>(b), ptr<T>(c), row_sums ? ptr<T>(*row_sums) : nullptr, int(m), int(n), int(k),
                 through_relu ? ptr<const T>(relu_next_w) : nullptr, through_relu ? ptr<T>(*relu_bias_grad) : nullptr);
  });
  return true;
}

}  // namespace minidl
