// The float64 reference of the kernel lab. Deliberately simple (rung 3's tiling in double, one
// output per thread) and independent of cuBLAS, so the numbers it checks cannot share its bugs; at
// 4096^3 it takes tens of milliseconds on an H100, so every entry is checked, none sampled.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernel_lab/lab_common.h"
#include "kernel_lab/reference.h"

namespace minidl::kernel_lab {
namespace {

constexpr int kTile = 16;

__global__ void reference_kernel(const float* __restrict__ a, const float* __restrict__ b, double* __restrict__ c,
                                 double* __restrict__ c_abs, int m, int n, int k) {
  __shared__ double as[kTile][kTile];
  __shared__ double bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  double sum = 0, sum_abs = 0;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    as[ty][tx] = (row < m && k0 + tx < k) ? double{a[int64_t{row} * k + k0 + tx]} : 0.0;
    bs[ty][tx] = (k0 + ty < k && col < n) ? double{b[int64_t{k0 + ty} * n + col]} : 0.0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile; ++i) {
      sum = fma(as[ty][i], bs[i][tx], sum);
      sum_abs = fma(fabs(as[ty][i]), fabs(bs[i][tx]), sum_abs);
    }
    __syncthreads();
  }
  if (row < m && col < n) {
    c[int64_t{row} * n + col] = sum;
    c_abs[int64_t{row} * n + col] = sum_abs;
  }
}

// Non-negative doubles order like their bit patterns read as unsigned integers, so atomicMax on the
// bits is a maximum of the values.
__global__ void max_error_kernel(const float* __restrict__ c, const double* __restrict__ ref,
                                 const double* __restrict__ ref_abs, int64_t count, unsigned long long* result) {
  double worst = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const double value = c[i];
    double error = fabs(value - ref[i]) / fmax(ref_abs[i], 1e-300);
    if (!isfinite(value) || isnan(error)) error = INFINITY;
    worst = fmax(worst, error);
  }
  for (int offset = 16; offset > 0; offset /= 2) worst = fmax(worst, __shfl_xor_sync(0xffffffffu, worst, offset));
  __shared__ double warp_worst[32];
  if (threadIdx.x % 32 == 0) warp_worst[threadIdx.x / 32] = worst;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < blockDim.x / 32; ++w) worst = fmax(worst, warp_worst[w]);
    atomicMax(result, static_cast<unsigned long long>(__double_as_longlong(worst)));
  }
}

}  // namespace

void reference_matmul_f64(const float* a, const float* b, double* c, double* c_abs, int m, int n, int k,
                          cudaStream_t stream) {
  detail::check_sizes("reference", m, n, k);
  const dim3 block(kTile, kTile), grid(detail::ceil_div(n, kTile), detail::ceil_div(m, kTile));
  detail::check_grid_y("reference", grid.y);
  reference_kernel<<<grid, block, 0, stream>>>(a, b, c, c_abs, m, n, k);
  CUDA_LAUNCH_CHECK(reference_kernel);
}

double max_relative_error(const float* c, const double* ref, const double* ref_abs, int64_t count,
                          cudaStream_t stream) {
  unsigned long long* result = nullptr;
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&result), sizeof(*result), stream));
  CUDA_CHECK(cudaMemsetAsync(result, 0, sizeof(*result), stream));
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((count + threads - 1) / threads, 4096);
  max_error_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(c, ref, ref_abs, count, result);
  CUDA_LAUNCH_CHECK(max_error_kernel);
  unsigned long long bits = 0;
  CUDA_CHECK(cudaMemcpyAsync(&bits, result, sizeof(bits), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaFreeAsync(result, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double worst = 0;
  std::memcpy(&worst, &bits, sizeof(worst));
  return worst;
}

}  // namespace minidl::kernel_lab
