#pragma once
// Hopper's warpgroup products (wgmma), for the kernels that need sm_90a: a warpgroup (4 warps, 128
// threads) multiplies a 64 x 16 tile of A by a 16 x 128 tile of B, both read from shared memory
// through descriptors, into 64 float32 accumulators a thread, asynchronously. The accumulator layout
// is mma.sync's m16n8 one repeated along n: warp w of the group holds rows 16 w + lane / 4 and
// + 8; d[4 j .. 4 j + 3] are columns 8 j + 2 (lane % 4) and + 1 of the first row, then of the second.
//
// Operands are K-major tiles of 64 16-bit elements a row (128 bytes) in the 128-byte swizzle: the
// 16-byte chunk c of row r sits at r * 128 + ((c ^ (r % 8)) * 16), tiles aligned to 1024 bytes. A
// product's 16 elements of k at column kk of the tile start kk * 2 bytes further.
#include <cstdint>

namespace minidl::cuda {

/// The descriptor of a K-major 128-byte-swizzled tile whose rows start at shared address `addr`:
/// groups of 8 rows 1024 bytes apart (the stride byte offset), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<uint64_t>(16 >> 4) << 16 |
         static_cast<uint64_t>(1024 >> 4) << 32 | uint64_t(1) << 62;
}

/// Orders this thread's earlier register and shared-memory accesses before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most N committed groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Keeps the compiler from moving reads or writes of the accumulators across this point (after a
/// wgmma_wait, before the epilogue reads them).
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
/// Makes shared memory written by ordinary stores and cp.async visible to wgmma's reads.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The 64 accumulators as asm operands %0-%63, and their list in the instruction.
#define MINIDL_WGMMA_D_REGISTERS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define MINIDL_WGMMA_D_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

/// d += A B: A 64 x 16 and B 16 x 128, K-major, bfloat16 (or float16 where !kBFloat16).
template <bool kBFloat16>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (kBFloat16)
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MINIDL_WGMMA_D_REGISTERS
                 ", %64, %65, 1, 1, 1, 0, 0;\n"
                 : MINIDL_WGMMA_D_OPERANDS
                 : "l"(desc_a), "l"(desc_b));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MINIDL_WGMMA_D_REGISTERS
                 ", %64, %65, 1, 1, 1, 0, 0;\n"
                 : MINIDL_WGMMA_D_OPERANDS
                 : "l"(desc_a), "l"(desc_b));
}

#undef MINIDL_WGMMA_D_REGISTERS
#undef MINIDL_WGMMA_D_OPERANDS

}  // namespace minidl::cuda
