#pragma once
// The PTX of the tensor-core kernels (the attention of attention_mma.cuh, the TF32 weight gradient
// of conv2d_weight_grad_tf32.cu), each wrapped in a function of its own: cp.async copies into
// shared memory, ldmatrix loads of 8x8 16-bit matrices, the m16n8k16 tensor-core product with
// float32 accumulation, TF32 products, and float32 products to float32 accuracy on TF32 tensor
// cores (mma_3xtf32).
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace minidl::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, zero-filled when `valid` is false (rows past the end).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
// The same through L1, for data other loads of the block read again soon.
__device__ __forceinline__ void cp_async_16_l1(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
// 8 bytes through L1 (cp.async.cg copies only 16).
__device__ __forceinline__ void cp_async_8(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a b for one 16x8 tile: a 16x16 (4 registers), b 16x8 (2), d 16x8 float32 (4).
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Float32 on TF32 tensor cores, as PyTorch's float32 memory-efficient attention computes it
// (CUTLASS's "3xTF32"): each value x = big + small, big its TF32 rounding (10 explicit bits) and
// small the TF32 rounding of the rest, so a product is big*big + big*small + small*big, and only
// small*small (about 2^-22 of it, under float32's own rounding) is left out.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

/// N float32 operand registers split into TF32 big and small parts.
template <int N>
struct Tf32Pair {
  uint32_t big[N], small[N];
  __device__ __forceinline__ explicit Tf32Pair(const uint32_t (&x)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float f = __uint_as_float(x[i]);
      big[i] = to_tf32(f);
      small[i] = to_tf32(f - __uint_as_float(big[i]));
    }
  }
};

// d += a b for one 16x8 tile: a 16x8 TF32 (4 registers), b 8x8 (2), d 16x8 float32 (4).
__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// d += a b in float32 accuracy, b = registers first and first + 1 of `b`; the small terms first.
template <int N>
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32Pair<4>& a, const Tf32Pair<N>& b, int first) {
  mma_1688_tf32(d, a.small, b.big[first], b.big[first + 1]);
  mma_1688_tf32(d, a.big, b.small[first], b.small[first + 1]);
  mma_1688_tf32(d, a.big, b.big[first], b.big[first + 1]);
}

}  // namespace minidl::cuda
