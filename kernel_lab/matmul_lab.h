#pragma once
// The SGEMM kernel lab: a ladder of hand-written float32 matrix-multiply kernels, each one step
// faster than the last, for learning how GPU kernels are made. Every rung computes
//
//     C = A * B     A: M x K, B: K x N, C: M x N, all row-major float32 in device memory
//
// for any M, N, K >= 1 (edges are guarded; the vectorized rungs take their float4 path only where
// K and N are multiples of 4 and the pointers are 16-byte aligned, and a scalar guarded path
// otherwise). Indices are 32-bit: each matrix must have fewer than about 2^31 elements. A launcher
// queues the kernel on `stream` and returns; it throws minidl::Error for bad sizes or a failed launch.
// docs/kernels.md walks through the rungs; apps/bench_ops times them against cuBLAS and the CPU.
//
//   for (const auto& rung : kernel_lab::kRungs) rung.launch(a, b, c, m, n, k, stream);
#include <cuda_runtime_api.h>

#include <cstddef>

namespace minidl::kernel_lab {

/// (1) One thread per output, threadIdx.x walking down a column of C: a warp reads 32 rows of A.
void matmul_naive(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);
/// (2) The same with threadIdx.x walking along a row of C: a warp reads one row of B, coalesced.
void matmul_coalesced(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);
/// (3) 32 x 32 tiles of A and B staged in shared memory; each value read from global memory once per tile.
void matmul_tiled(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);
/// (4a) 64 x 64 block tiles; each thread computes 8 outputs of one column, reusing each B value 8 times.
void matmul_register_1d(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);
/// (4b) 128 x 128 block tiles, 8 x 8 outputs per thread, float4 loads, A stored transposed in shared memory.
void matmul_register_2d(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);
/// (5) Block tile -> warp tile -> thread tile, double-buffered shared memory. The first call for a
/// shape times the tile configurations below on the given buffers (it synchronizes `stream`) and
/// keeps the fastest for that shape, as cudnn.benchmark does; later calls only queue the kernel.
void matmul_warptile(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);

/// Rung 5's tile configurations, callable directly (the tests run each on every shape).
enum class WarptileConfig { Large128x128, Large128x128K16, Wide128x128, Wide128x128K16, Small64x64 };
inline constexpr WarptileConfig kWarptileConfigs[] = {WarptileConfig::Large128x128, WarptileConfig::Large128x128K16,
                                                      WarptileConfig::Wide128x128, WarptileConfig::Wide128x128K16,
                                                      WarptileConfig::Small64x64};
void matmul_warptile_with(WarptileConfig config, const float* a, const float* b, float* c, int m, int n, int k,
                          cudaStream_t stream);
/// The configuration matmul_warptile picked for this shape (Large128x128 before its first call).
WarptileConfig warptile_config(int m, int n, int k);
const char* warptile_config_name(WarptileConfig config);
/// (6) Float32 in and out, the products and sums in float64 on the FP64 tensor cores (mma.m16n8k16,
/// compute capability 9.0 or later; it throws minidl::Error below that), tiles copied by cp.async
/// four steps ahead, and split-K across a thread block cluster where the output has few tiles.
void matmul_fp64_tensor_cores(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);
/// How rung 6 takes a product on the current device: block tiles of `tile_rows` (64 or 32) rows by
/// 64 columns, 32 where 64 x 64 tiles would be fewer than its SMs and 32-row ones give more blocks;
/// and `split` slices of k (1, 2, 4 or 8), the most that keep the blocks under about 1.6 waves.
struct Fp64TensorCorePlan {
  int tile_rows, split;
};
Fp64TensorCorePlan fp64_tensor_core_plan(int m, int n, int k);

using MatmulLauncher = void (*)(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);

/// One rung of the ladder: a short name for tables, what it changes over the rung before, its launcher,
/// and the compute capability it needs (major * 10 + minor; 0: any CUDA GPU).
struct Rung {
  const char* name;
  const char* change;
  MatmulLauncher launch;
  int min_compute_capability = 0;
};

inline constexpr Rung kRungs[] = {
    {"1 naive", "one thread per output; a warp reads 32 rows of A (uncoalesced)", matmul_naive},
    {"2 coalesced", "a warp walks along a row of C: loads of B and stores of C coalesce", matmul_coalesced},
    {"3 smem tiled", "32x32 tiles in shared memory: each global value loaded once per tile", matmul_tiled},
    {"4a regblock 1d", "8 outputs per thread in a column: each B value in a register serves 8 FMAs",
     matmul_register_1d},
    {"4b regblock 2d", "8x8 outputs per thread, float4 loads, A transposed in shared memory", matmul_register_2d},
    {"5 warptile", "block -> warp -> thread tiles, double-buffered shared memory", matmul_warptile},
    {"6 fp64 mma", "float64 products on tensor cores, cp.async stages, split-K in a cluster",
     matmul_fp64_tensor_cores, 90},
};
inline constexpr std::size_t kRungCount = sizeof(kRungs) / sizeof(kRungs[0]);

}  // namespace minidl::kernel_lab
