#pragma once
// What the rungs of the kernel lab share: size checks on the host, and the guarded loads and stores
// of four consecutive floats that let the tiled rungs handle any M, N, K. Included by .cu files only.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/cuda/check.h"
#include "core/error.h"

namespace minidl::kernel_lab::detail {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// Sizes every rung accepts: M, N, K >= 1 and 32-bit indices with room for a tile past each edge
/// (the tiled rungs form row * K + k for a row up to 256 past the last one before the guard drops it).
inline void check_sizes(const char* rung, int m, int n, int k) {
  MINIDL_CHECK(m >= 1 && n >= 1 && k >= 1, "kernel_lab ", rung, ": expected M, N, K >= 1, got M=", m, " N=", n,
               " K=", k);
  constexpr int64_t kLimit = int64_t{1} << 31;
  const int64_t pad = 256;
  MINIDL_CHECK((m + pad) * (k + pad) < kLimit && (k + pad) * (n + pad) < kLimit && (m + pad) * (n + pad) < kLimit,
               "kernel_lab ", rung, ": the lab indexes with 32-bit ints; M=", m, " N=", n, " K=", k,
               " gives a matrix of 2^31 elements or more");
}

/// Grid dimension y (and z) is limited to 65535 blocks.
inline void check_grid_y(const char* rung, unsigned blocks_y) {
  MINIDL_CHECK(blocks_y <= 65535u, "kernel_lab ", rung, ": needs ", blocks_y,
               " blocks along grid y, more than the 65535 CUDA allows; the matrix is too tall for this rung");
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// The float4 paths need every row of A, B and C to start on a 16-byte boundary.
inline bool can_use_float4(const float* a, const float* b, const float* c, int n, int k) {
  return k % 4 == 0 && n % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
}

/// Elements (row, col .. col+3) of a rows x cols row-major matrix, zeros outside it. Vec: one
/// 16-byte load, valid when cols % 4 == 0, col % 4 == 0 and the matrix is 16-byte aligned (then
/// the four are all inside or all outside); otherwise four guarded scalar loads.
template <bool Vec>
__device__ __forceinline__ float4 load4(const float* __restrict__ p, int row, int col, int rows, int cols) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (row < rows) {
    const float* q = p + row * cols + col;
    if constexpr (Vec) {
      if (col < cols) v = *reinterpret_cast<const float4*>(q);
    } else {
      if (col < cols) v.x = q[0];
      if (col + 1 < cols) v.y = q[1];
      if (col + 2 < cols) v.z = q[2];
      if (col + 3 < cols) v.w = q[3];
    }
  }
  return v;
}

/// Writes (row, col .. col+3) of a rows x cols row-major matrix, dropping what falls outside it;
/// Vec as for load4.
template <bool Vec>
__device__ __forceinline__ void store4(float* __restrict__ p, int row, int col, int rows, int cols, float4 v) {
  if (row >= rows) return;
  float* q = p + row * cols + col;
  if constexpr (Vec) {
    if (col < cols) *reinterpret_cast<float4*>(q) = v;
  } else {
    if (col < cols) q[0] = v.x;
    if (col + 1 < cols) q[1] = v.y;
    if (col + 2 < cols) q[2] = v.z;
    if (col + 3 < cols) q[3] = v.w;
  }
}

}  // namespace minidl::kernel_lab::detail
