// Float32 products on FP64 tensor cores: c [M, N] = a op(b) (+ bias, ReLU), float32 in and out,
// each product exact in float64 and the sums in float64, rounded once.
#pragma once
#include <cooperative_groups.h>
#include <cstdint>

namespace dmma {

constexpr int kTile = 64, kStep = 16, kThreads = 128, kPitch = kTile + 8;  // pitch: 2-wavefront fragment loads

__device__ __forceinline__ void mma16816(double (&c)[4], const double (&a)[8], const double (&b)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, "
      "{%12,%13,%14,%15}, {%0,%1,%2,%3};"
      : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]),
        "d"(b[2]), "d"(b[3]));
}

// An operand's 64 x kK float32 tile in shared memory, copied by cp.async (zero where outside the
// matrix or past the slice), converted to float64 as the fragments are read.
// KMajor: element (row, kk) at p[row * ld + kk], staged [row][k]; else at p[kk * ld + row], staged [k][row].
template <bool KMajor, int kK, int kThr, int kRows = kTile>
struct Tile {
  static constexpr int kPitchK = kK + 4;     // [row][k]: conflict-free fragment reads
  static constexpr int kPitchR = kRows + 8;  // [k][row]
  static constexpr int kFloats = KMajor ? kRows * kPitchK : kK * kPitchR;
  static constexpr int kChunks = kRows * kK / 4 / kThr;  // 16-byte copies a thread
  __device__ static __forceinline__ void issue(float* s, const float* __restrict__ p, int ld, int row0, int rows, int k0,
                                               int kend, int t) {
#pragma unroll
    for (int l = 0; l < kChunks; ++l) {
      const int idx = t + l * kThr;
      int row, kk;
      float* dst;
      if constexpr (KMajor) {
        row = idx / (kK / 4), kk = k0 + idx % (kK / 4) * 4;
        dst = s + row * kPitchK + idx % (kK / 4) * 4;
      } else {
        row = idx % (kRows / 4) * 4, kk = k0 + idx / (kRows / 4);
        dst = s + (idx / (kRows / 4)) * kPitchR + row;
      }
      const bool in = row0 + row < rows && kk < kend;
      const float* src = in ? (KMajor ? p + size_t(row0 + row) * ld + kk : p + size_t(kk) * ld + row0 + row) : p;
      const unsigned dst_s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_s), "l"(src), "r"(in ? 16 : 0));
    }
  }
  __device__ static __forceinline__ double at(const float* s, int row, int kk) {
    const float f = KMajor ? s[row * kPitchK + kk] : s[kk * kPitchR + row];
#ifdef DMMA_INT_CONVERT
    // Timing probe only: the float64 bits built with integer instructions, exact for normal numbers
    // and zeros (not for subnormals, infinities or NaN).
    const unsigned u = __float_as_uint(f), mag = u & 0x7FFFFFFFu, sign = u & 0x80000000u;
    const unsigned hi = mag == 0 ? sign : sign + (mag >> 3) + 0x38000000u;
    return __hiloint2double(static_cast<int>(hi), static_cast<int>(u << 29));
#else
    return static_cast<double>(f);
#endif
  }
};

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

constexpr int kStages = 4;

template <bool AK, bool BK, int G, int SUB = 1, int MI = 2>
__host__ __device__ constexpr int smem_floats() {
  return kStages * (Tile<AK, kStep * G * SUB, kThreads * G, 32 * MI>::kFloats + Tile<BK, kStep * G * SUB, kThreads * G>::kFloats);
}

// grid (S, column tiles, row tiles); the S blocks of a cluster take consecutive slices of k
// (slice_k a multiple of 4) and add their parts in rank order from shared memory. G groups of 4
// warps split each stage's k (16 a group) and add their sums in group order.
template <bool AK, bool BK, bool Relu, int S, int G, int SUB, int MI>
__global__ void __launch_bounds__(kThreads * G, 1) gemm_kernel(const float* __restrict__ a, int lda, const float* __restrict__ b,
                                                       int ldb, const float* __restrict__ bias, float* __restrict__ c,
                                                       int ldc, int m, int n, int k, int slice_k) {
  namespace cg = cooperative_groups;
  constexpr int kK = kStep * G * SUB, kThr = kThreads * G;
  constexpr int kTileM = 32 * MI;
  using TA = Tile<AK, kK, kThr, kTileM>;
  using TB = Tile<BK, kK, kThr>;
  constexpr int kStageFloats = TA::kFloats + TB::kFloats;
  extern __shared__ __align__(16) float smem[];
  const int rank = S > 1 ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const int kbegin = rank * slice_k, kend = min(k, kbegin + slice_k);
  const int row0 = static_cast<int>(blockIdx.z) * kTileM, col0 = static_cast<int>(blockIdx.y) * kTile;
  const int t = static_cast<int>(threadIdx.x), lane = t & 31, warp = (t >> 5) & 3, group = t >> 7;
  const int wm = (warp >> 1) * 16 * MI, wn = (warp & 1) * 32, g = lane >> 2, q = lane & 3, kg = group * kStep;
  double acc[MI][4][4] = {};
  const int steps = kend > kbegin ? (kend - kbegin + kK - 1) / kK : 0;
  auto issue = [&](int s) {
    float* st = smem + (s % kStages) * kStageFloats;
    TA::issue(st, a, lda, row0, m, kbegin + s * kK, kend, t);
    TB::issue(st + TA::kFloats, b, ldb, col0, n, kbegin + s * kK, kend, t);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) issue(s);
    cp_async_commit();
  }
  for (int s = 0; s < steps; ++s) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (s + kStages - 1 < steps) issue(s + kStages - 1);
    cp_async_commit();
    const float* as = smem + (s % kStages) * kStageFloats;
    const float* bs = as + TA::kFloats;
#pragma unroll
    for (int sub = 0; sub < SUB; ++sub) {
      const int ks = kg + sub * kStep * G;
      double bf[4][4];
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i) bf[ni][i] = TB::at(bs, wn + ni * 8 + g, ks + q + 4 * i);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        double af[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) af[i] = TA::at(as, wm + mi * 16 + g + 8 * (i % 2), ks + q + 4 * (i / 2));
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma16816(acc[mi][ni], af, bf[ni]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  constexpr int kPartPitch = kTile + 2;
  static_assert(kTileM * kPartPitch * 2 <= smem_floats<AK, BK, G, SUB, MI>(), "the part fits the stages");
  double(*part)[kPartPitch] = reinterpret_cast<double(*)[kPartPitch]>(smem);
  auto put = [&](bool add) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          double& slot = part[wm + mi * 16 + g + 8 * (e / 2)][wn + ni * 8 + 2 * q + (e % 2)];
          slot = add ? slot + acc[mi][ni][e] : acc[mi][ni][e];
        }
  };
  if constexpr (G == 2) {  // the groups' sums in group order: group 0's, plus group 1's
    if (group == 0) put(false);
    __syncthreads();
    if (group == 1) put(true);
    __syncthreads();
  } else {
    put(false);
    __syncthreads();
  }
  auto finish = [&](int row, int col, double v) {
    if (row >= m || col >= n) return;
    if (bias) v += static_cast<double>(bias[col]);
    float f = static_cast<float>(v);
    if constexpr (Relu) f = f > 0.f || f != f ? f : 0.f;
    c[size_t(row) * ldc + col] = f;
  };
  if constexpr (S == 1) {
    for (int i = t; i < kTileM * kTile; i += kThr) finish(row0 + i / kTile, col0 + i % kTile, part[i / kTile][i % kTile]);
  } else {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    constexpr int kRowsPerBlock = kTileM / S, kPerThread = kRowsPerBlock * kTile / kThr;
    // Every part's values loaded before any is added: the loads from the other blocks' shared memory
    // are in flight together, not one round trip after another.
    double parts[S][kPerThread];
#pragma unroll
    for (int p = 0; p < S; ++p)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int i = t + j * kThr;
        parts[p][j] = *cluster.map_shared_rank(&part[rank * kRowsPerBlock + i / kTile][i % kTile], p);
      }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int i = t + j * kThr;
      double v = parts[0][j];
#pragma unroll
      for (int p = 1; p < S; ++p) v += parts[p][j];
      finish(row0 + rank * kRowsPerBlock + i / kTile, col0 + i % kTile, v);
    }
    cluster.sync();
  }
}

template <bool AK, bool BK, bool Relu, int S, int G, int SUB = 1, int MI = 2>
cudaError_t launch(cudaStream_t stream, const float* a, int lda, const float* b, int ldb, const float* bias, float* c,
                   int ldc, int m, int n, int k) {
  const int slice_k = (k + S * 4 - 1) / (S * 4) * 4;
  constexpr size_t bytes = smem_floats<AK, BK, G, SUB, MI>() * sizeof(float);
  auto kernel = gemm_kernel<AK, BK, Relu, S, G, SUB, MI>;
  static bool once = [&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)) == cudaSuccess; }();
  (void)once;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(S, (n + kTile - 1) / kTile, (m + 32 * MI - 1) / (32 * MI));
  config.blockDim = dim3(kThreads * G);
  config.dynamicSmemBytes = bytes;
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = S, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, a, lda, b, ldb, bias, c, ldc, m, n, k, slice_k);
}

}  // namespace dmma
