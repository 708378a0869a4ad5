// Rung 4b: 2-D register blocking with vectorized (float4) loads. Each thread now computes an 8 x 8
// patch of C: per step of the dot product it loads 8 values of A and 8 of B into registers and does
// all 64 multiply-adds between them, so one shared-memory value feeds 8 multiply-adds (rung 4a: 1
// value of B fed 8, but every value of A fed 1). The block tile is 128 x 128 with BK = 8: 256
// threads, 64 outputs each.
//
// Three details make the loads cheap:
//  - Global loads are float4 (one 16-byte instruction instead of four), when K and N are multiples
//    of 4 and the pointers 16-byte aligned; otherwise the same kernel is instantiated with four
//    guarded scalar loads per float4 (detail::load4<false>), so odd sizes stay correct.
//  - The A tile is stored TRANSPOSED in shared memory (as[k][m]): a thread's 8 rows of A for one k
//    are then adjacent and arrive as two float4 loads, like its 8 columns of B.
//  - Bank conflicts. Shared memory has 32 banks of 4 bytes; a warp's 128-bit load takes one pass
//    per 128 distinct bytes only if no two addresses need the same bank. Giving each thread 8
//    ADJACENT columns would put the 16 threads of a warp's row 32 bytes apart: 4-way conflicts.
//    Instead a thread owns columns tc*4..tc*4+3 and 64+tc*4..64+tc*4+3 (rows likewise), so the 16
//    threads read 256 contiguous bytes: two passes, no conflict. The transposed store of A has the
//    same issue (two k-rows 128 floats apart share banks); padding each row by 4 floats fixes it.
#include "kernel_lab/lab_common.h"
#include "kernel_lab/matmul_lab.h"

namespace minidl::kernel_lab {
namespace {

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256
constexpr int kPadA = 4;                         // keeps the transposed stores conflict-free and rows 16-byte aligned
static_assert(BM * BK / 4 == kThreads && BK * BN / 4 == kThreads, "each thread loads one float4 of A and one of B");

template <bool Vec>
__global__ void __launch_bounds__(kThreads, 2) register_2d_kernel(const float* __restrict__ a,
                                                                  const float* __restrict__ b, float* __restrict__ c,
                                                                  int m, int n, int k) {
  __shared__ __align__(16) float as[BK][BM + kPadA];  // transposed: as[kk][r] = A[block_row + r][k0 + kk]
  __shared__ __align__(16) float bs[BK][BN];

  const int tid = threadIdx.x;
  const int tr = tid / (BN / TN), tc = tid % (BN / TN);  // 16 x 16 threads; a warp is 2 thread rows
  const int block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;
  // Loading: A row tid/2, k-quad tid%2 (two threads read one 32-byte sector); B row tid/32, 32
  // threads along a 512-byte row.
  const int a_row = tid / (BK / 4), a_k = (tid % (BK / 4)) * 4;
  const int b_row = tid / (BN / 4), b_col = (tid % (BN / 4)) * 4;

  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < k; k0 += BK) {
    const float4 av = detail::load4<Vec>(a, block_row + a_row, k0 + a_k, m, k);
    as[a_k + 0][a_row] = av.x;
    as[a_k + 1][a_row] = av.y;
    as[a_k + 2][a_row] = av.z;
    as[a_k + 3][a_row] = av.w;
    *reinterpret_cast<float4*>(&bs[b_row][b_col]) = detail::load4<Vec>(b, k0 + b_row, block_col + b_col, k, n);
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float af[TM], bf[TN];
      *reinterpret_cast<float4*>(&af[0]) = *reinterpret_cast<const float4*>(&as[kk][tr * 4]);
      *reinterpret_cast<float4*>(&af[4]) = *reinterpret_cast<const float4*>(&as[kk][BM / 2 + tr * 4]);
      *reinterpret_cast<float4*>(&bf[0]) = *reinterpret_cast<const float4*>(&bs[kk][tc * 4]);
      *reinterpret_cast<float4*>(&bf[4]) = *reinterpret_cast<const float4*>(&bs[kk][BN / 2 + tc * 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += af[i] * bf[j];
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = block_row + (i < 4 ? tr * 4 + i : BM / 2 + tr * 4 + i - 4);
    detail::store4<Vec>(c, row, block_col + tc * 4, m, n, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
    detail::store4<Vec>(c, row, block_col + BN / 2 + tc * 4, m, n,
                        make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]));
  }
}

}  // namespace

void matmul_register_2d(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  detail::check_sizes("regblock 2d", m, n, k);
  const dim3 grid(detail::ceil_div(n, BN), detail::ceil_div(m, BM));
  detail::check_grid_y("regblock 2d", grid.y);
  if (detail::can_use_float4(a, b, c, n, k)) {
    register_2d_kernel<true><<<grid, kThreads, 0, stream>>>(a, b, c, m, n, k);
    CUDA_LAUNCH_CHECK(register_2d_kernel<true>);
  } else {
    register_2d_kernel<false><<<grid, kThreads, 0, stream>>>(a, b, c, m, n, k);
    CUDA_LAUNCH_CHECK(register_2d_kernel<false>);
  }
}

}  // namespace minidl::kernel_lab
