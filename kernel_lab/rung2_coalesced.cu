// Rung 2: global-memory coalescing. The arithmetic is rung 1's; only the mapping of threads to
// outputs changes. threadIdx.x now picks the COLUMN of C, so the 32 threads of a warp read 32
// consecutive floats of a row of B (one 128-byte transaction instead of 32) and write 32
// consecutive floats of C, while they all read the same element of A (one broadcast). The
// hardware merges ("coalesces") the accesses of a warp that fall into the same 32-byte sectors;
// the whole speedup over rung 1 comes from that.
#include "kernel_lab/lab_common.h"
#include "kernel_lab/matmul_lab.h"

namespace minidl::kernel_lab {
namespace {

constexpr int kBlock = 32;

__global__ void coalesced_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                 int m, int n, int k) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;  // varies along the warp: coalesced
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += a[row * k + i] * b[i * n + col];
  c[row * n + col] = acc;
}

}  // namespace

void matmul_coalesced(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  detail::check_sizes("coalesced", m, n, k);
  const dim3 block(kBlock, kBlock);
  const dim3 grid(detail::ceil_div(n, kBlock), detail::ceil_div(m, kBlock));
  detail::check_grid_y("coalesced", grid.y);
  coalesced_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  CUDA_LAUNCH_CHECK(coalesced_kernel);
}

}  // namespace minidl::kernel_lab
