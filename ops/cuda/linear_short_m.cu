// A float32 product over a short batch, c [M <= 64, N] = a [M, K] op(b) (+ bias [N], then ReLU):
// a linear layer's forward (op(b) = w^T, w [N, K]) and its input gradient (op(b) = w, w [K, N]) at
// batch 64, the MNIST MLP's step. With so few rows cuBLAS's tiles cover a small part of the GPU, so
// it splits k across blocks and adds the parts in a kernel of its own (or ours, sum_slices_bias):
// at batch 64 on an H200, inside the step's graph, the first layer's forward took 5.5 us and its
// sum 1.5, the second layer's input gradient 4.2 and 1.7, mostly the latency of two dependent
// kernels and their round trips through memory (docs/benchmarks.md).
//
// Here the parts never leave the chip: the 8 blocks of a thread block cluster (compute capability
// 9.0 on) each take an eighth of k for one 64 x 32 tile of c, staging all of it in shared memory
// with every load in flight together, and then each block adds one eighth of the tile's rows from
// the 8 blocks' shared memory, in rank order (deterministic), with the bias and the ReLU.
#include <cooperative_groups.h>

#include "core/cuda/launch.cuh"
#include "ops/backend_setting.h"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kRows = 64;                    // c's rows at most
constexpr int kCols = 32;                    // c's columns a cluster covers
constexpr int kSlices = 8;                   // blocks of a cluster, one slice of k each
constexpr int kMaxSliceK = 100;              // a slice's length at most
constexpr int kMaxK = kSlices * kMaxSliceK;  // 800
constexpr int kBlockThreads = 256;
constexpr int kRowsPerThread = 4, kColsPerThread = 2;  // 16 x 16 threads over the 64 x 32 tile
// Rows along k are kMaxSliceK floats apart, 4 banks on from the row before: the 8 rows that 8
// threads read 16 bytes of, at once, fall in 8 different 16-byte bank groups.
constexpr int kPitch = kMaxSliceK;
static_assert(kPitch % 32 == 4, "rows 4 banks apart");
constexpr int kVectors = kMaxSliceK / 4;  // float4s along a row's slice
constexpr int kLoadsA = (kRows * kVectors + kBlockThreads - 1) / kBlockThreads;
constexpr int kLoadsB = (kCols * kVectors + kBlockThreads - 1) / kBlockThreads;
constexpr int kMaxColumns = 1024;  // measured on 256 and 512; wider products are left to cuBLAS

// BTransposed: b is w [N, K] (a forward: k contiguous in both operands), staged like a as
// [column][k]; else b [K, N], staged as [k][column]. A thread's columns are j * 16 + tx from the
// former (16 threads reading 16 bytes each from 16 rows, each one bank group on), 2 tx + j from the
// latter (16 threads reading 8 bytes each from one row).
template <bool BTransposed>
__device__ __forceinline__ int thread_col(int tx, int j) {
  return BTransposed ? j * (kCols / kColsPerThread) + tx : tx * kColsPerThread + j;
}

template <bool BTransposed, bool Relu>
__global__ void __launch_bounds__(kBlockThreads)
    short_m_gemm_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                        float* __restrict__ c, int m, int n, int k, int slice_k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  wait_for_earlier_kernels();
  let_next_kernel_start();
  // After the products a_tile holds the block's part of c, [kRows][kCols].
  __shared__ __align__(16) float a_tile[kRows][kPitch];
  __shared__ __align__(16) float b_tile[BTransposed ? kCols : kMaxSliceK][BTransposed ? kPitch : kCols];
  const int rank = static_cast<int>(cluster.block_rank());
  const int k0 = rank * slice_k, len = max(0, min(slice_k, k - k0));  // both multiples of 4
  const int col0 = static_cast<int>(blockIdx.y) * kCols;
  const int t = static_cast<int>(threadIdx.x);
  // Every load issued before any is stored; consecutive threads read consecutive float4s of a row.
  float4 a_load[kLoadsA], b_load[kLoadsB];
#pragma unroll
  for (int l = 0; l < kLoadsA; ++l) {
    const int i = t + l * kBlockThreads, row = i / kVectors, kk = i % kVectors * 4;
    a_load[l] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < m && kk < len) a_load[l] = __ldg(reinterpret_cast<const float4*>(a + size_t(row) * k + k0 + kk));
  }
#pragma unroll
  for (int l = 0; l < kLoadsB; ++l) {
    const int i = t + l * kBlockThreads;
    b_load[l] = make_float4(0.f, 0.f, 0.f, 0.f);
    if constexpr (BTransposed) {
      const int col = i / kVectors, kk = i % kVectors * 4;
      if (col < kCols && col0 + col < n && kk < len)
        b_load[l] = __ldg(reinterpret_cast<const float4*>(b + size_t(col0 + col) * k + k0 + kk));
    } else {
      const int q = i % (kCols / 4) * 4, kk = i / (kCols / 4);
      if (col0 + q < n && kk < len) b_load[l] = __ldg(reinterpret_cast<const float4*>(b + size_t(k0 + kk) * n + col0 + q));
    }
  }
#pragma unroll
  for (int l = 0; l < kLoadsA; ++l) {
    const int i = t + l * kBlockThreads, row = i / kVectors, kk = i % kVectors * 4;
    if (row < kRows) *reinterpret_cast<float4*>(&a_tile[row][kk]) = a_load[l];
  }
#pragma unroll
  for (int l = 0; l < kLoadsB; ++l) {
    const int i = t + l * kBlockThreads;
    if constexpr (BTransposed) {
      const int col = i / kVectors, kk = i % kVectors * 4;
      if (col < kCols) *reinterpret_cast<float4*>(&b_tile[col][kk]) = b_load[l];
    } else {
      const int q = i % (kCols / 4) * 4, kk = i / (kCols / 4);
      if (kk < kMaxSliceK) *reinterpret_cast<float4*>(&b_tile[kk][q]) = b_load[l];
    }
  }
  __syncthreads();
  // A warp is 2 rows of 16 threads: its a values are two broadcasts.
  const int ty = t / (kCols / kColsPerThread), tx = t % (kCols / kColsPerThread);
  float acc[kRowsPerThread][kColsPerThread] = {};
#pragma unroll 2
  for (int kk = 0; kk < len; kk += 4) {  // four steps of k at a time: float4s along k
    float av[kRowsPerThread][4], bv[kColsPerThread][4];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const float4 v = *reinterpret_cast<const float4*>(&a_tile[ty * kRowsPerThread + i][kk]);
      av[i][0] = v.x, av[i][1] = v.y, av[i][2] = v.z, av[i][3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      if constexpr (BTransposed) {
        const float4 v = *reinterpret_cast<const float4*>(&b_tile[thread_col<true>(tx, j)][kk]);
        bv[j][0] = v.x, bv[j][1] = v.y, bv[j][2] = v.z, bv[j][3] = v.w;
      }
    }
    if constexpr (!BTransposed) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 v = *reinterpret_cast<const float2*>(&b_tile[kk + q][thread_col<false>(tx, 0)]);
        bv[0][q] = v.x, bv[1][q] = v.y;
      }
    }
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
        for (int j = 0; j < kColsPerThread; ++j) acc[i][j] = fmaf(av[i][q], bv[j][q], acc[i][j]);
  }
  __syncthreads();  // every thread's reads of a_tile done: it now takes the block's part
  float(*part)[kCols] = reinterpret_cast<float(*)[kCols]>(&a_tile[0][0]);
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) part[ty * kRowsPerThread + i][thread_col<BTransposed>(tx, j)] = acc[i][j];
  cluster.sync();  // every block's part written
  // This block's eighth of the rows, a warp a row: the parts added in rank order, then bias and ReLU
  // as sum_slices_bias does them.
  constexpr int kRowsPerBlock = kRows / kSlices;
  static_assert(kRowsPerBlock * kCols == kBlockThreads, "one output a thread");
  const int tile_row = rank * kRowsPerBlock + t / kCols, tile_col = t % kCols, col = col0 + tile_col;
  float sum = bias && col < n ? bias[col] : 0.f;
#pragma unroll
  for (int s = 0; s < kSlices; ++s) sum += *cluster.map_shared_rank(&part[tile_row][tile_col], s);
  if constexpr (Relu) sum = sum > 0.f || sum != sum ? sum : 0.f;
  if (tile_row < m && col < n) c[size_t(tile_row) * n + col] = sum;
  cluster.sync();  // the other blocks may still read this one's part
#endif
}

}  // namespace

bool CudaKernels::short_m_gemm(const Tensor& a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                               Tensor& c) {
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2 || a.dtype() != kFloat32 || b.dtype() != kFloat32 ||
      c.dtype() != kFloat32 || (bias.defined() && (bias.dtype() != kFloat32 || !bias.is_contiguous())))
    return false;
  const int64_t m = c.size(0), n = c.size(1), k = a.size(1);
  if (a.size(0) != m || (trans_b ? b.size(0) != n || b.size(1) != k : b.size(0) != k || b.size(1) != n)) return false;
  if (m == 0 || m > kRows || n == 0 || n > kMaxColumns || k < kSlices * 4 || k > kMaxK || k % 4 != 0 ||
      (!trans_b && n % 4 != 0) || !a.is_contiguous() || !b.is_contiguous() || !c.is_contiguous() ||
      !aligned_to(16, {a.raw_data(), b.raw_data()}) || !thread_block_clusters() || allow_tf32_matmul())
    return false;
  // Slices of a multiple of 4 (whole float4s), the last one shorter where k asks.
  const int slice_k = static_cast<int>((k + kSlices * 4 - 1) / (kSlices * 4) * 4);
  const dim3 grid(kSlices, static_cast<unsigned>((n + kCols - 1) / kCols));
  const float* bias_data = bias.defined() ? ptr<const float>(bias) : nullptr;
  // Not started early: placed beside the kernel before it, waiting, these blocks' products took
  // about twice as long (docs/benchmarks.md).
  const auto launch = [&](auto kernel) {
    launch_in_clusters("short_m_gemm_kernel", kernel, grid, kBlockThreads, kSlices, false, 0, stream_,
                       ptr<const float>(a), ptr<const float>(b), bias_data, ptr<float>(c), int(m), int(n), int(k),
                       slice_k);
  };
  if (trans_b) relu ? launch(short_m_gemm_kernel<true, true>) : launch(short_m_gemm_kernel<true, false>);
  else relu ? launch(short_m_gemm_kernel<false, true>) : launch(short_m_gemm_kernel<false, false>);
  return true;
}

}  // namespace minidl
