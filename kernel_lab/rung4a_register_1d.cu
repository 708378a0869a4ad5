// Rung 4a: 1-D register blocking. Rung 3 spends two shared-memory loads on every multiply-add.
// Here each thread computes TM = 8 outputs stacked in one column of C: per step of the dot product
// it loads one value of B into a register and uses it for 8 multiply-adds, one per row. The block
// tile grows to 64 x 64 (512 threads, 8 outputs each) with a K-slice of BK = 8, so each block loads
// 64x8 of A and 8x64 of B per step and does 64*64*8 multiply-adds with them.
//
// Shared-memory accesses per multiply-add fall from 2 to about 1/8 (B) + 1/4 (A, read as float4
// broadcasts along k). The arithmetic intensity per thread is still low: 8 results per thread; rung
// 4b grows it to 64.
#include "kernel_lab/lab_common.h"
#include "kernel_lab/matmul_lab.h"

namespace minidl::kernel_lab {
namespace {

constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
constexpr int kThreads = BM * BN / TM;  // 512
static_assert(BM * BK == kThreads && BK * BN == kThreads, "each thread loads one element of A and one of B");

// No __launch_bounds__: with it ptxas squeezes the kernel into 40 registers for three blocks per SM
// and spills; without it, 45 registers and two blocks per SM (1024 threads).
__global__ void register_1d_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                   int m, int n, int k) {
  __shared__ __align__(16) float as[BM][BK];  // rows of A: each thread's 8 k-values are one float4 pair
  __shared__ float bs[BK][BN];

  const int tid = threadIdx.x;
  const int thread_col = tid % BN;        // the column of C this thread owns; a warp: 32 columns, one row group
  const int thread_row = tid / BN;        // 0..7: which group of TM rows
  const int block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;
  // Loading: A tile 64 x 8, one element each, 8 consecutive threads read one 32-byte row piece;
  // B tile 8 x 64, one element each, a warp reads 32 consecutive floats.
  const int a_row = tid / BK, a_col = tid % BK;
  const int b_row = tid / BN, b_col = tid % BN;

  float acc[TM] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
    const int ar = block_row + a_row, ak = k0 + a_col;
    as[a_row][a_col] = (ar < m && ak < k) ? a[ar * k + ak] : 0.f;
    const int bk = k0 + b_row, bc = block_col + b_col;
    bs[b_row][b_col] = (bk < k && bc < n) ? b[bk * n + bc] : 0.f;
    __syncthreads();

#pragma unroll
    for (int i = 0; i < BK; ++i) {
      const float b_value = bs[i][thread_col];  // one register, reused TM times below
#pragma unroll
      for (int r = 0; r < TM; ++r) acc[r] += as[thread_row * TM + r][i] * b_value;
    }
    __syncthreads();
  }

  const int col = block_col + thread_col;
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int row = block_row + thread_row * TM + r;
    if (row < m && col < n) c[row * n + col] = acc[r];
  }
}

}  // namespace

void matmul_register_1d(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  detail::check_sizes("regblock 1d", m, n, k);
  const dim3 grid(detail::ceil_div(n, BN), detail::ceil_div(m, BM));
  detail::check_grid_y("regblock 1d", grid.y);
  register_1d_kernel<<<grid, kThreads, 0, stream>>>(a, b, c, m, n, k);
  CUDA_LAUNCH_CHECK(register_1d_kernel);
}

}  // namespace minidl::kernel_lab
