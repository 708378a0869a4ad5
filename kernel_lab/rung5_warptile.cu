// Rung 5: warp tiling and double buffering, the structure of CUTLASS's SIMT GEMMs and cuBLAS's.
//
// Three levels of tiles. A BLOCK computes a BM x BN tile of C (128 x 128 for large problems), staging
// BK = 8 columns of A and rows of B in shared memory at a time. Each WARP of the block owns a WM x WN
// part of it (64 x 32: the 8 warps tile 128 x 128 as 2 x 4), and each THREAD of a warp owns
// (WM/32) x (WN/16) sub-tiles of 4 x 4 inside the warp's (2 x 2 of them: 8 x 8 outputs). The lanes
// sit as 8 rows x 4 columns, so one sub-tile iteration of a warp covers 32 x 16 outputs:
//
//      warp tile 64 x 32         lane (ly, lx) = (lane / 4, lane % 4) owns, in each of the four
//      +--------+--------+       32 x 16 quarters, rows ly*4 .. ly*4+3 and columns lx*4 .. lx*4+3
//      | 32x16  | 32x16  |
//      +--------+--------+
//      | 32x16  | 32x16  |
//      +--------+--------+
//
// Why the warp level matters: per step of the dot product a warp reads from shared memory only the
// 64 values of A and 32 of B that its own tile needs, each float4 fetched once and broadcast to the
// lanes that share it: one pass per load, against up to two in rung 4b, where a warp spans two
// thread rows of the whole 128-wide block. The warp's working set is compact, and the
// same structure maps onto tensor-core instructions (mma) later.
//
// Double buffering. Shared memory holds two stages. While the block computes on stage s, every
// thread has already issued the global loads of the next tile into registers; after the compute it
// writes them to stage s^1, and one __syncthreads per tile (instead of two) separates the stages.
// The global-memory latency hides behind 8 steps of 64 multiply-adds. Inside a tile the fragments
// are double-buffered too: the shared loads for step kk+1 are issued before the multiply-adds of kk.
//
// Occupancy. 256 threads x at most 128 registers (__launch_bounds__(256, 2)) lets two blocks share
// an SM: one computes while the other waits at its barrier. 16.3 KB of shared memory per block is far
// below the 228 KB of an H100 SM; registers, not shared memory, bound the occupancy here.
//
// Configurations. Which tile is fastest depends on the shape and on the GPU, so matmul_warptile
// times them on the first call for a shape and keeps the fastest, as cudnn.benchmark does for
// convolutions:
//   128 x 128, BK 8,  8 warps of 64 x 32, 8 x 8 outputs per thread (two blocks per SM);
//   128 x 128, BK 16, 8 warps of 64 x 32, 8 x 8 outputs per thread (up to 255 registers);
//   128 x 128, BK 8 or 16, 4 warps of 64 x 64, 8 x 16 outputs per thread: more reuse of each
//   fragment, and two blocks per SM at up to 255 registers each;
//   64 x 64,   BK 8,  4 warps of 32 x 32, 4 x 8 outputs per thread, for shapes that give fewer
//   128 x 128 tiles than the GPU has SMs.
// Vectorized global loads and stores need K % 4 == 0, N % 4 == 0 and 16-byte aligned pointers; the
// same kernel is instantiated with guarded scalar loads for every other shape.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "kernel_lab/lab_common.h"
#include "kernel_lab/matmul_lab.h"

namespace minidl::kernel_lab {
namespace {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int kMinBlocks_>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, kMinBlocks = kMinBlocks_;
  static constexpr int kWarps = (BM / WM) * (BN / WN);
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kSubM = WM / 32, kSubN = WN / 16;  // 4 x 4 sub-tiles per thread along m and n
  static constexpr int TM = kSubM * 4, TN = kSubN * 4;    // outputs per thread
  static constexpr int kLoadsA = BM * BK / 4 / kThreads, kLoadsB = BK * BN / 4 / kThreads;
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 32 == 0 && WN % 16 == 0, "warp tiles must tile the block");
  static_assert(BK % 4 == 0 && kLoadsA * 4 * kThreads == BM * BK && kLoadsB * 4 * kThreads == BK * BN,
                "every thread loads the same number of float4 of each tile");
};

using Large = TileConfig<128, 128, 8, 64, 32, 2>;     // 256 threads, 8 x 8 outputs each
using LargeK16 = TileConfig<128, 128, 16, 64, 32, 1>; // 256 threads, 8 x 8 outputs each
using Wide = TileConfig<128, 128, 8, 64, 64, 2>;      // 128 threads, 8 x 16 outputs each
using WideK16 = TileConfig<128, 128, 16, 64, 64, 2>;  // 128 threads, 8 x 16 outputs each
using Small = TileConfig<64, 64, 8, 32, 32, 4>;       // 128 threads, 4 x 8 outputs each
constexpr int kPadA = 4;  // the transposed A rows: conflict-free stores, still 16-byte aligned

template <class Cfg, bool Vec>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    warptile_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m, int n,
                    int k) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  constexpr int TM = Cfg::TM, TN = Cfg::TN, kThreads = Cfg::kThreads;
  __shared__ __align__(16) float as[2][BK][BM + kPadA];  // two stages; A transposed: as[s][kk][r]
  __shared__ __align__(16) float bs[2][BK][BN];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int warp_m = (warp / (BN / WN)) * WM, warp_n = (warp % (BN / WN)) * WN;  // the warp tile in the block
  const int lane_m = (lane / 4) * 4, lane_n = (lane % 4) * 4;                    // the lane in a 32 x 16 sub-tile
  const int block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;

  // Global -> registers -> shared memory, in two halves so the loads can fly during the compute.
  float4 a_stage[Cfg::kLoadsA], b_stage[Cfg::kLoadsB];
  auto load_tile = [&](int k0) {
#pragma unroll
    for (int i = 0; i < Cfg::kLoadsA; ++i) {
      const int idx = tid + i * kThreads, r = idx / (BK / 4), kq = (idx % (BK / 4)) * 4;
      a_stage[i] = detail::load4<Vec>(a, block_row + r, k0 + kq, m, k);
    }
#pragma unroll
    for (int i = 0; i < Cfg::kLoadsB; ++i) {
      const int idx = tid + i * kThreads, r = idx / (BN / 4), cq = (idx % (BN / 4)) * 4;
      b_stage[i] = detail::load4<Vec>(b, k0 + r, block_col + cq, k, n);
    }
  };
  auto store_tile = [&](int s) {
#pragma unroll
    for (int i = 0; i < Cfg::kLoadsA; ++i) {
      const int idx = tid + i * kThreads, r = idx / (BK / 4), kq = (idx % (BK / 4)) * 4;
      as[s][kq + 0][r] = a_stage[i].x;
      as[s][kq + 1][r] = a_stage[i].y;
      as[s][kq + 2][r] = a_stage[i].z;
      as[s][kq + 3][r] = a_stage[i].w;
    }
#pragma unroll
    for (int i = 0; i < Cfg::kLoadsB; ++i) {
      const int idx = tid + i * kThreads, r = idx / (BN / 4), cq = (idx % (BN / 4)) * 4;
      *reinterpret_cast<float4*>(&bs[s][r][cq]) = b_stage[i];
    }
  };

  // Registers: the thread tile, and two slots of fragments (step kk and step kk+1).
  float acc[TM][TN] = {};
  float af[2][TM], bf[2][TN];
  auto load_fragments = [&](int s, int kk, int slot) {
#pragma unroll
    for (int i = 0; i < Cfg::kSubM; ++i)
      *reinterpret_cast<float4*>(&af[slot][i * 4]) =
          *reinterpret_cast<const float4*>(&as[s][kk][warp_m + i * 32 + lane_m]);
#pragma unroll
    for (int j = 0; j < Cfg::kSubN; ++j)
      *reinterpret_cast<float4*>(&bf[slot][j * 4]) =
          *reinterpret_cast<const float4*>(&bs[s][kk][warp_n + j * 16 + lane_n]);
  };

  const int tiles = detail::ceil_div(k, BK);
  load_tile(0);
  store_tile(0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int s = t & 1;
    const bool has_next = t + 1 < tiles;
    if (has_next) load_tile((t + 1) * BK);  // in flight during the compute below

    load_fragments(s, 0, 0);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk + 1 < BK) load_fragments(s, kk + 1, (kk + 1) & 1);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(af[kk & 1][i], bf[kk & 1][j], acc[i][j]);
    }

    // Stage s^1 was last read in iteration t-1, which every thread finished before the barrier
    // that ended it, so it may be overwritten now; the barrier below publishes it for iteration t+1.
    if (has_next) store_tile(s ^ 1);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < Cfg::kSubM; ++i)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int row = block_row + warp_m + i * 32 + lane_m + r;
#pragma unroll
      for (int j = 0; j < Cfg::kSubN; ++j) {
        const float* v = &acc[i * 4 + r][j * 4];
        detail::store4<Vec>(c, row, block_col + warp_n + j * 16 + lane_n, m, n, make_float4(v[0], v[1], v[2], v[3]));
      }
    }
}

template <class Cfg>
void launch(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  const dim3 grid(detail::ceil_div(n, Cfg::BN), detail::ceil_div(m, Cfg::BM));
  detail::check_grid_y("warptile", grid.y);
  if (detail::can_use_float4(a, b, c, n, k)) {
    warptile_kernel<Cfg, true><<<grid, Cfg::kThreads, 0, stream>>>(a, b, c, m, n, k);
    CUDA_LAUNCH_CHECK(warptile_kernel_float4);
  } else {
    warptile_kernel<Cfg, false><<<grid, Cfg::kThreads, 0, stream>>>(a, b, c, m, n, k);
    CUDA_LAUNCH_CHECK(warptile_kernel_scalar);
  }
}

}  // namespace

const char* warptile_config_name(WarptileConfig config) {
  switch (config) {
    case WarptileConfig::Large128x128: return "128x128 BK8 (8 warps of 64x32)";
    case WarptileConfig::Large128x128K16: return "128x128 BK16 (8 warps of 64x32)";
    case WarptileConfig::Wide128x128: return "128x128 BK8 (4 warps of 64x64)";
    case WarptileConfig::Wide128x128K16: return "128x128 BK16 (4 warps of 64x64)";
    case WarptileConfig::Small64x64: return "64x64 BK8 (4 warps of 32x32)";
  }
  return "?";
}

void matmul_warptile_with(WarptileConfig config, const float* a, const float* b, float* c, int m, int n, int k,
                          cudaStream_t stream) {
  detail::check_sizes("warptile", m, n, k);
  switch (config) {
    case WarptileConfig::Large128x128: return launch<Large>(a, b, c, m, n, k, stream);
    case WarptileConfig::Large128x128K16: return launch<LargeK16>(a, b, c, m, n, k, stream);
    case WarptileConfig::Wide128x128: return launch<Wide>(a, b, c, m, n, k, stream);
    case WarptileConfig::Wide128x128K16: return launch<WideK16>(a, b, c, m, n, k, stream);
    case WarptileConfig::Small64x64: return launch<Small>(a, b, c, m, n, k, stream);
  }
}

namespace {

std::mutex picks_mutex;
std::map<std::tuple<int, int, int>, WarptileConfig> picks;  // (m, n, k) -> the fastest configuration

// Times each configuration on the caller's buffers (one warm-up run, then the best of three) and
// returns the fastest.
WarptileConfig fastest_config(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  WarptileConfig best = WarptileConfig::Large128x128;
  float best_ms = -1;
  for (WarptileConfig config : kWarptileConfigs) {
    matmul_warptile_with(config, a, b, c, m, n, k, stream);
    float ms = -1;
    for (int rep = 0; rep < 3; ++rep) {
      CUDA_CHECK(cudaEventRecord(start, stream));
      matmul_warptile_with(config, a, b, c, m, n, k, stream);
      CUDA_CHECK(cudaEventRecord(stop, stream));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms = ms < 0 ? t : std::min(ms, t);
    }
    if (best_ms < 0 || ms < best_ms) best = config, best_ms = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace

WarptileConfig warptile_config(int m, int n, int k) {
  std::lock_guard lock(picks_mutex);
  const auto it = picks.find({m, n, k});
  return it == picks.end() ? WarptileConfig::Large128x128 : it->second;
}

void matmul_warptile(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  detail::check_sizes("warptile", m, n, k);
  WarptileConfig config;
  {
    std::lock_guard lock(picks_mutex);
    const auto it = picks.find({m, n, k});
    config = it != picks.end() ? it->second : (picks[{m, n, k}] = fastest_config(a, b, c, m, n, k, stream));
  }
  matmul_warptile_with(config, a, b, c, m, n, k, stream);
}

}  // namespace minidl::kernel_lab
