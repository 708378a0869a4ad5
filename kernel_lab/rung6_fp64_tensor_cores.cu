// Rung 6: float32 products on the FP64 tensor cores. Hopper's tensor cores multiply float64 too
// (mma.m16n8k16 with .f64 operands, compute capability 9.0): 128 multiply-adds per clock per SM,
// as many as its float32 lanes, but a warp issues 2,048 of them with one instruction, where rungs 1-5
// issue one FFMA per 32. A product of two float32 values is exact in float64 and the sums run in
// float64, so every output is the exact dot product up to float64 rounding, then rounded once to
// float32: more accurate than any float32 rung or cuBLAS's SGEMM, not less, unlike TF32.
//
// The pieces:
//  - cp.async copies the tiles of A and B from global to shared memory without passing through
//    registers, four stages ahead, so the loads of later tiles are in flight while a tile is used.
//  - A block computes 64 x 64 of C with 4 warps of 32 x 32, each warp 2 x 4 tensor-core tiles of
//    16 x 8 per step of 16 along k; where 32 x 64 tiles with warps of 16 x 32 give more blocks (the
//    tiles cuBLAS's DGEMM takes at the MNIST MLP's sizes; fp64_tensor_core_plan), those: twice the
//    blocks, half the shared memory each. The fragments are read from the float32 tiles and converted to
//    float64 as they are read (the layout of each is PTX's for mma.m16n8k16.f64: lane = 4 g + q,
//    A's element i at row g + 8 (i % 2), k q + 4 (i / 2); B's at k q + 4 i, column g; C's at row
//    g + 8 (i / 2), column 2 q + i % 2). The tiles are padded so that a warp's reads are
//    conflict-free.
//  - Split-K for small outputs: where there are too few 64 x 64 tiles to fill the GPU, the S blocks
//    of a thread block cluster (S = 2, 4 or 8) each take one slice of k for the same tile, then
//    each adds a 1/S share of the tile's rows from the S blocks' shared memory (distributed shared
//    memory), in rank order, and writes it. No partial sums go through global memory and no second
//    kernel runs.
#include <cooperative_groups.h>

#include "core/cuda.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.cuh"
#include "kernel_lab/lab_common.h"
#include "kernel_lab/matmul_lab.h"

namespace minidl::kernel_lab {
namespace {

// A block's tile is TM x kTile (TM = 64 or 32 rows of C by 64 columns).
constexpr int kTile = 64, kStep = 16, kThreads = 128, kStages = 4;
constexpr int kPitchA = kStep + 4;  // as[row][k]: rows 20 floats apart, conflict-free fragment reads
constexpr int kPitchB = kTile + 8;  // bs[k][col]: k-rows 72 floats apart, likewise
template <int TM>
constexpr int kStageFloats = TM * kPitchA + kStep * kPitchB;
constexpr int kPartPitch = kTile + 2;  // the block's part of C, [TM][66] doubles, after the last step
static_assert(64 * kPartPitch * 2 <= kStages * kStageFloats<64> && 32 * kPartPitch * 2 <= kStages * kStageFloats<32>,
              "the part fits in the stages' memory");

__device__ __forceinline__ void mma_f64(double (&c)[4], const double (&a)[8], const double (&b)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
      "{%12,%13,%14,%15}, {%0,%1,%2,%3};"
      : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]),
        "d"(b[2]), "d"(b[3]));
#else
  __trap();  // the launcher refuses GPUs below compute capability 9.0
#endif
}

// Copies `bytes` (16, or 4 on the scalar path) from global to shared memory, or zeros where !in.
template <int kBytes>
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool in) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src), "r"(in ? 16 : 0));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(to), "l"(src), "r"(in ? 4 : 0));
}

// Queues the copies of one step's tiles: A rows row0.., k k0.. (zeros past the slice's end kend or
// the matrix's edge), B k-rows k0.., columns col0... Vec: 16-byte copies (K, N multiples of 4,
// aligned pointers); else 4-byte ones.
template <int TM, bool Vec>
__device__ __forceinline__ void issue_tiles(float* stage, const float* __restrict__ a, const float* __restrict__ b,
                                            int m, int n, int k, int row0, int col0, int k0, int kend, int t) {
  float* as = stage;
  float* bs = stage + TM * kPitchA;
  constexpr int kWidth = Vec ? 4 : 1;
  constexpr int kCopiesA = TM * kStep / kWidth / kThreads, kCopiesB = kTile * kStep / kWidth / kThreads;  // 1-8
#pragma unroll
  for (int l = 0; l < kCopiesA; ++l) {
    const int i = t + l * kThreads;
    const int row = i / (kStep / kWidth), kk = i % (kStep / kWidth) * kWidth;  // A: along k, row by row
    const bool in = row0 + row < m && k0 + kk < kend;
    copy_async<4 * kWidth>(as + row * kPitchA + kk, in ? a + (row0 + row) * k + k0 + kk : a, in);
  }
#pragma unroll
  for (int l = 0; l < kCopiesB; ++l) {
    const int i = t + l * kThreads;
    const int krow = i / (kTile / kWidth), col = i % (kTile / kWidth) * kWidth;  // B: along a row of N
    const bool in_b = k0 + krow < kend && col0 + col < n;
    copy_async<4 * kWidth>(bs + krow * kPitchB + col, in_b ? b + (k0 + krow) * n + col0 + col : b, in_b);
  }
}

// grid (S, column tiles, row tiles), clusters of S along x: block `rank` of a cluster takes k's
// slice [rank * slice_k, (rank + 1) * slice_k).
template <int TM, int S, bool Vec>
__global__ void __launch_bounds__(kThreads) fp64_tensor_core_kernel(const float* __restrict__ a,
                                                                   const float* __restrict__ b, float* __restrict__ c,
                                                                   int m, int n, int k, int slice_k) {
  namespace cg = cooperative_groups;
  constexpr int kMi = TM / 32;  // a warp's 16-row tensor-core tiles: its tile is 16 kMi x 32
  __shared__ __align__(16) float smem[kStages * kStageFloats<TM>];
  const int rank = S > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const int kbegin = rank * slice_k, kend = min(k, kbegin + slice_k);
  const int row0 = static_cast<int>(blockIdx.z) * TM, col0 = static_cast<int>(blockIdx.y) * kTile;
  const int t = static_cast<int>(threadIdx.x), lane = t % 32, warp = t / 32;
  const int wm = warp / 2 * (TM / 2), wn = warp % 2 * 32, g = lane / 4, q = lane % 4;
  const int steps = kend > kbegin ? (kend - kbegin + kStep - 1) / kStep : 0;
  auto issue = [&](int s) {
    issue_tiles<TM, Vec>(smem + s % kStages * kStageFloats<TM>, a, b, m, n, k, row0, col0, kbegin + s * kStep, kend,
                         t);
  };

  double acc[kMi][4][4] = {};
  // The first kStages - 1 steps' copies, one commit group each (empty groups past the last step keep
  // the count of groups in flight the same in every iteration).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) issue(s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  for (int s = 0; s < steps; ++s) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));  // this thread's copies of step s landed
    __syncthreads();  // everyone's have, and everyone is done with the stage the next copies overwrite
    if (s + kStages - 1 < steps) issue(s + kStages - 1);
    asm volatile("cp.async.commit_group;\n" ::);
    const float* as = smem + s % kStages * kStageFloats<TM>;
    const float* bs = as + TM * kPitchA;
    double bf[4][4];
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) bf[ni][i] = bs[(q + 4 * i) * kPitchB + wn + ni * 8 + g];
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi) {
      double af[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) af[i] = as[(wm + mi * 16 + g + 8 * (i % 2)) * kPitchA + q + 4 * (i / 2)];
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) mma_f64(acc[mi][ni], af, bf[ni]);
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::);

  auto store = [&](int row, int col, double v) {
    if (row < m && col < n) c[row * n + col] = static_cast<float>(v);  // the one rounding
  };
  if constexpr (S == 1) {
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          store(row0 + wm + mi * 16 + g + 8 * (i / 2), col0 + wn + ni * 8 + 2 * q + i % 2, acc[mi][ni][i]);
  } else {
    __syncthreads();  // every warp's last reads of the stages done: they now hold the block's part
    double(*part)[kPartPitch] = reinterpret_cast<double(*)[kPartPitch]>(smem);
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i) part[wm + mi * 16 + g + 8 * (i / 2)][wn + ni * 8 + 2 * q + i % 2] = acc[mi][ni][i];
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every block's part written
    // This block's TM / S rows: every part's values loaded before any is added, so the reads of the
    // other blocks' shared memory are in flight together, then added in rank order.
    constexpr int kRows = TM / S, kPerThread = kRows * kTile / kThreads;
    double parts[S][kPerThread];
#pragma unroll
    for (int p = 0; p < S; ++p)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int i = t + j * kThreads;
        parts[p][j] = *cluster.map_shared_rank(&part[rank * kRows + i / kTile][i % kTile], p);
      }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      double v = parts[0][j];
#pragma unroll
      for (int p = 1; p < S; ++p) v += parts[p][j];
      const int i = t + j * kThreads;
      store(row0 + rank * kRows + i / kTile, col0 + i % kTile, v);
    }
    cluster.sync();  // the other blocks may still be reading this one's part
  }
}

template <int TM, int S, bool Vec>
void launch(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  const int slice_k = detail::ceil_div(detail::ceil_div(k, S), kStep) * kStep;
  const dim3 grid(S, detail::ceil_div(n, kTile), detail::ceil_div(m, TM));
  cuda::launch_in_clusters("fp64_tensor_core_kernel", fp64_tensor_core_kernel<TM, S, Vec>, grid, kThreads, S,
                           /*early=*/false, 0, stream, a, b, c, m, n, k, slice_k);
}

template <int TM, int S>
void launch_vec_or_not(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  if (detail::can_use_float4(a, b, c, n, k)) launch<TM, S, true>(a, b, c, m, n, k, stream);
  else launch<TM, S, false>(a, b, c, m, n, k, stream);
}

template <int TM>
void launch_split(int split, const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  switch (split) {
    case 1: return launch_vec_or_not<TM, 1>(a, b, c, m, n, k, stream);
    case 2: return launch_vec_or_not<TM, 2>(a, b, c, m, n, k, stream);
    case 4: return launch_vec_or_not<TM, 4>(a, b, c, m, n, k, stream);
    default: return launch_vec_or_not<TM, 8>(a, b, c, m, n, k, stream);
  }
}

// The most slices (a power of two, at most a portable cluster of 8) that keep `tiles` blocks under
// about 1.6 waves of one block an SM, each slice at least two steps of k. Measured on an H100 at
// 64 x 64 tiles: 64 tiles ran fastest in 2 slices, 104 in 2, 32 in 4 to 8, 8 in 8.
int split_for(int tiles, int k, int sms) {
  const int budget = sms * 8 / 5;
  int split = 1;
  while (split < 8 && tiles * split * 2 <= budget && k >= 2 * kStep * split * 2) split *= 2;
  return split;
}

}  // namespace

Fp64TensorCorePlan fp64_tensor_core_plan(int m, int n, int k) {
  // 32-row tiles where 64 x 64 ones are fewer than the SMs and give fewer blocks, slices counted.
  // Measured on an H100 (% of cuBLAS's SGEMM, 64 rows against 32): 64 x 784 x 512 114% against
  // 123% (64 blocks against 128), 64 x 9216 x 128 41% against 55% (16 against 32), 777 x 1313 x 555
  // 73% against 84% (117 against 234); at 512 x 784 x 512, 128 blocks either way, 112% against 84%.
  const int columns = detail::ceil_div(n, kTile);
  const int tiles64 = detail::ceil_div(m, 64) * columns, tiles32 = detail::ceil_div(m, 32) * columns;
  const int sms = cuda::multiprocessor_count(cuda::current_device());
  const int split64 = split_for(tiles64, k, sms);
  if (tiles64 >= sms) return {64, split64};
  const int split32 = split_for(tiles32, k, sms);
  return tiles32 * split32 > tiles64 * split64 ? Fp64TensorCorePlan{32, split32} : Fp64TensorCorePlan{64, split64};
}

void matmul_fp64_tensor_cores(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  detail::check_sizes("fp64 tensor cores", m, n, k);
  MINIDL_CHECK(cuda::thread_block_clusters(), "kernel_lab fp64 tensor cores: needs mma.m16n8k16 on float64 and "
               "thread block clusters (compute capability 9.0 or later), which this GPU does not have");
  detail::check_grid_y("fp64 tensor cores", static_cast<unsigned>(detail::ceil_div(n, kTile)));
  const Fp64TensorCorePlan plan = fp64_tensor_core_plan(m, n, k);
  detail::check_grid_y("fp64 tensor cores", static_cast<unsigned>(detail::ceil_div(m, plan.tile_rows)));
  if (plan.tile_rows == 32) launch_split<32>(plan.split, a, b, c, m, n, k, stream);
  else launch_split<64>(plan.split, a, b, c, m, n, k, stream);
}

}  // namespace minidl::kernel_lab
