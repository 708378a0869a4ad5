// A float32 weight gradient over a short batch, c [M, N] = a [K, M]^T b [K, N] with K <= 64, and
// the bias gradient, a summed over K, beside it: the first layer of an MLP at batch 64, whose input
// needs no gradient, so that this product ends the backward and the optimizer waits for it. With
// mask_by (the layer's ReLU output, a's layout), a is first masked where it is not positive: the
// ReLU's backward, otherwise a pass of its own between the input gradient and this product.
// cuBLAS(Lt) tiles it as a long product: for the MNIST MLP's first layer (512 x 784 over k = 64) on
// an H200, inside the training step's graph, its fastest timed configuration took 6.6 us in
// float32 (a SIMT kernel of 104 blocks stepping through k 8 at a time) and 4.5 us in TF32 (tensor
// cores), each after a 2.3-2.8 us ReLU backward. With this kernel the step went from 1.55M to
// 1.62M images/s in float32 and from 1.72M to 1.80M in TF32 (docs/benchmarks.md).
//
// Here all of k fits in shared memory at once: a block stages its 64 rows of a and 64 columns of
// b over the whole of k with every load in flight together, then each thread of two groups, each
// over half of k, makes a 4 x 4 tile of c from shared memory, and the groups' sums are added. The
// products are float32 (in TF32 mode too, where the step was still faster than with cuBLAS's
// tensor cores), in a fixed order, bias sums in double like the reductions: deterministic.
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kTile = 64, kMaxK = 64, kKGroups = 2, kGroupThreads = 256, kShortKThreads = kGroupThreads * kKGroups;
constexpr int kVectorsPerRow = kTile / 4;                                 // float4s in a tile's row
constexpr int kLoadsPerThread = kMaxK * kVectorsPerRow / kShortKThreads;  // of a and of b each
constexpr int kOutputsPerThread = 4;
constexpr int kSumLanes = kShortKThreads / kTile, kKPerSumLane = kMaxK / kSumLanes;  // the bias sums' lanes of k
// Measured on the MNIST MLP's 401,408 outputs; larger products are left to cuBLAS's larger tiles.
constexpr int64_t kMaxOutputs = int64_t(1) << 20;

__global__ void __launch_bounds__(kShortKThreads)
    short_k_weight_grad_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                               float* __restrict__ row_sums, const float* __restrict__ mask_by, int m, int n,
                               int k) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  __shared__ __align__(16) float a_tile[kMaxK][kTile];
  __shared__ __align__(16) float b_tile[kMaxK][kTile];
  const int row0 = static_cast<int>(blockIdx.y) * kTile, col0 = static_cast<int>(blockIdx.x) * kTile;
  const int t = static_cast<int>(threadIdx.x);
  float4 a_load[kLoadsPerThread], b_load[kLoadsPerThread], mask[kLoadsPerThread];
#pragma unroll
  for (int l = 0; l < kLoadsPerThread; ++l) {  // every load issued before any is stored
    const int i = t + l * kShortKThreads, kk = i / kVectorsPerRow, q = (i % kVectorsPerRow) * 4;
    a_load[l] = b_load[l] = mask[l] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (kk < k && row0 + q < m) {
      a_load[l] = __ldg(reinterpret_cast<const float4*>(a + size_t(kk) * m + row0 + q));
      if (mask_by) mask[l] = __ldg(reinterpret_cast<const float4*>(mask_by + size_t(kk) * m + row0 + q));
    }
    if (kk < k && col0 + q < n) b_load[l] = __ldg(reinterpret_cast<const float4*>(b + size_t(kk) * n + col0 + q));
  }
#pragma unroll
  for (int l = 0; l < kLoadsPerThread; ++l) {
    const int i = t + l * kShortKThreads, kk = i / kVectorsPerRow, q = (i % kVectorsPerRow) * 4;
    if (mask_by) {
      a_load[l].x = mask[l].x > 0.f ? a_load[l].x : 0.f;
      a_load[l].y = mask[l].y > 0.f ? a_load[l].y : 0.f;
      a_load[l].z = mask[l].z > 0.f ? a_load[l].z : 0.f;
      a_load[l].w = mask[l].w > 0.f ? a_load[l].w : 0.f;
    }
    *reinterpret_cast<float4*>(&a_tile[kk][q]) = a_load[l];
    *reinterpret_cast<float4*>(&b_tile[kk][q]) = b_load[l];
  }
  __syncthreads();
  if (row_sums && blockIdx.x == 0) {  // lanes of k for each row, then their sums in order
    __shared__ double lane_sums[kSumLanes][kTile];
    const int row = t % kTile, lane = t / kTile;
    double sum = 0;
    for (int kk = lane * kKPerSumLane; kk < min(k, (lane + 1) * kKPerSumLane); ++kk) sum += a_tile[kk][row];
    lane_sums[lane][row] = sum;
    __syncthreads();
    if (t < kTile && row0 + t < m) {
      double total = 0;
      for (int l = 0; l < kSumLanes; ++l) total += lane_sums[l][t];
      row_sums[row0 + t] = static_cast<float>(total);
    }
  }
  // Two groups of 256 threads take half of k each: twice the warps an SM can switch between while
  // one waits on shared memory. In a group a warp is 2 rows of 16 threads: its a values are two
  // broadcasts, its b values 256 bytes in a row.
  constexpr int kKPerGroup = kMaxK / kKGroups;
  const int group = t / kGroupThreads, u = t % kGroupThreads;
  const int ty = u / kVectorsPerRow, tx = u % kVectorsPerRow;
  float acc[kOutputsPerThread][4] = {};
  const int k_end = min(k, (group + 1) * kKPerGroup);
#pragma unroll 8
  for (int kk = group * kKPerGroup; kk < k_end; ++kk) {
    const float4 av = *reinterpret_cast<const float4*>(&a_tile[kk][ty * 4]);
    const float4 bv = *reinterpret_cast<const float4*>(&b_tile[kk][tx * 4]);
    const float as[4] = {av.x, av.y, av.z, av.w}, bs[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
    for (int i = 0; i < kOutputsPerThread; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(as[i], bs[j], acc[i][j]);
  }
  // The second group's sums go through shared memory (a's tile, read by now) to the first's.
  static_assert(kKGroups == 2, "the groups' sums are added in one step");
  __syncthreads();
  float4* partial = reinterpret_cast<float4*>(&a_tile[0][0]) + u;  // its row i at partial[i * kGroupThreads]
  if (group == 1) {
#pragma unroll
    for (int i = 0; i < kOutputsPerThread; ++i)
      partial[i * kGroupThreads] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
  }
  __syncthreads();
  const int col = col0 + tx * 4;
  if (group == 1 || col >= n) return;
#pragma unroll
  for (int i = 0; i < kOutputsPerThread; ++i) {
    const int row = row0 + ty * 4 + i;
    const float4 p = partial[i * kGroupThreads];
    if (row < m)
      *reinterpret_cast<float4*>(c + size_t(row) * n + col) =
          make_float4(acc[i][0] + p.x, acc[i][1] + p.y, acc[i][2] + p.z, acc[i][3] + p.w);
  }
}

}  // namespace

bool CudaKernels::short_k_weight_grad(cudaStream_t stream, const Tensor& a, const Tensor& b, Tensor& c,
                                      Tensor* row_sums, const Tensor& mask_by) {
  const int64_t m = c.size(0), n = c.size(1), k = a.size(0);
  if (a.dtype() != kFloat32 || b.dtype() != kFloat32 || c.dtype() != kFloat32 ||
      (mask_by.defined() && (mask_by.dtype() != kFloat32 || mask_by.shape() != a.shape() ||
                             !mask_by.is_contiguous() || !aligned_to(16, {mask_by.raw_data()}))) ||
      (row_sums && (row_sums->dtype() != kFloat32 || !row_sums->is_contiguous())))
    return false;
  if (k == 0 || k > kMaxK || m == 0 || n == 0 || m % 4 != 0 || n % 4 != 0 || m * n > kMaxOutputs ||
      !a.is_contiguous() || !b.is_contiguous() || !c.is_contiguous() ||
      !aligned_to(16, {a.raw_data(), b.raw_data(), c.raw_data()}))
    return false;
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  launch_early("short_k_weight_grad_kernel", short_k_weight_grad_kernel, grid, kShortKThreads, 0, stream,
               ptr<const float>(a), ptr<const float>(b), ptr<float>(c), row_sums ? ptr<float>(*row_sums) : nullptr,
               mask_by.defined() ? ptr<const float>(mask_by) : nullptr, int(m), int(n), int(k));
  return true;
}

}  // namespace minidl
