// Rung 1: the first kernel everyone writes. One thread computes one element of C by walking a row
// of A and a column of B. It is correct and simple, and slow for a reason worth seeing: the thread
// index that varies fastest inside a warp (threadIdx.x) picks the ROW of C. The 32 threads of a
// warp therefore read A at 32 addresses K floats apart (32 separate memory transactions for 128
// useful bytes) and write C at 32 addresses N floats apart, while they all read the same element
// of B. Rung 2 swaps the two indices and nothing else.
#include "kernel_lab/lab_common.h"
#include "kernel_lab/matmul_lab.h"

namespace minidl::kernel_lab {
namespace {

constexpr int kBlock = 32;  // 32 x 32 = 1024 threads per block

__global__ void naive_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m,
                             int n, int k) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;  // varies along the warp: the uncoalesced choice
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.f;
  for (int i = 0; i < k; ++i) acc += a[row * k + i] * b[i * n + col];
  c[row * n + col] = acc;
}

}  // namespace

void matmul_naive(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  detail::check_sizes("naive", m, n, k);
  const dim3 block(kBlock, kBlock);
  const dim3 grid(detail::ceil_div(m, kBlock), detail::ceil_div(n, kBlock));
  detail::check_grid_y("naive", grid.y);
  naive_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  CUDA_LAUNCH_CHECK(naive_kernel);
}

}  // namespace minidl::kernel_lab
