// Rung 3: shared-memory tiling (blocking). In rungs 1-2 every thread fetches its whole row of A and
// column of B from global memory, so each value is fetched 32 times per block (once per thread that
// needs it) and the caches absorb what they can. Here the block first copies a 32 x 32 tile of A and
// one of B into shared memory (each thread one element of each, coalesced), waits, and then every
// thread takes its 32 products from there. Global traffic drops 32-fold; the kernel is now limited
// by shared memory: every fused multiply-add needs a shared load of B. The loads of A cost less:
// as[ty][i] is one address for the whole warp (a broadcast), and four consecutive ones come in one
// 128-bit load. Rung 4 attacks the rest by reusing values held in registers.
#include "kernel_lab/lab_common.h"
#include "kernel_lab/matmul_lab.h"

namespace minidl::kernel_lab {
namespace {

constexpr int kTile = 32;

__global__ void __launch_bounds__(kTile * kTile) tiled_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                                             float* __restrict__ c, int m, int n, int k) {
  __shared__ __align__(16) float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;

  float acc = 0.f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    // Each thread brings one element of each tile; zeros past the edges keep the inner loop unguarded.
    as[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : 0.f;
    bs[ty][tx] = (k0 + ty < k && col < n) ? b[(k0 + ty) * n + col] : 0.f;
    __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
    for (int i = 0; i < kTile; i += 4) {
      const float4 a4 = *reinterpret_cast<const float4*>(&as[ty][i]);  // a[row][k0+i .. k0+i+3]
      acc += a4.x * bs[i][tx];
      acc += a4.y * bs[i + 1][tx];
      acc += a4.z * bs[i + 2][tx];
      acc += a4.w * bs[i + 3][tx];
    }
    __syncthreads();  // everyone is done reading before the next tile overwrites them
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

}  // namespace

void matmul_tiled(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  detail::check_sizes("smem tiled", m, n, k);
  const dim3 block(kTile, kTile);
  const dim3 grid(detail::ceil_div(n, kTile), detail::ceil_div(m, kTile));
  detail::check_grid_y("smem tiled", grid.y);
  tiled_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  CUDA_LAUNCH_CHECK(tiled_kernel);
}

}  // namespace minidl::kernel_lab
