#pragma once
// The float32 attention kernel of ops/cuda/attention.cu: the passes of attention_mma.cuh (same
// rows / columns roles, same tiles of columns double-buffered through cp.async) on plain FP32 FMA,
// since float32 means strict float32 here (no TF32 tensor cores).
//
// Four neighbouring threads share a row: each holds a quarter of the row's head vectors
// (interleaved 16-byte chunks, so that a quad's shared-memory reads are one contiguous 64-byte
// span that the warp's other quads share by broadcast) and a dot product ends in two shuffles.
#include "ops/cuda/attention_mma.cuh"

namespace minidl::cuda::attention {

constexpr int kSimtThreads = 128;
constexpr int kSimtRows = kSimtThreads / 4;
constexpr int kSimtCols = 32;

template <int E, Pass P>
constexpr int simt_smem_bytes() {
  int bytes = 2 * 2 * kSimtCols * E * int(sizeof(float));
  if (P == Pass::kGradKV) bytes += 2 * 2 * kSimtCols * int(sizeof(float));
  return bytes;
}

template <int E>
__device__ __forceinline__ void simt_load_tile(float* tile, const float* matrix, int first, int n) {
  constexpr int chunks_per_row = E / 4;
  const uint32_t base = smem_addr(tile);
  for (int c = threadIdx.x; c < kSimtCols * chunks_per_row; c += kSimtThreads) {
    const int r = c / chunks_per_row, col = c % chunks_per_row;
    const bool valid = first + r < n;
    const float* from = valid ? matrix + int64_t(first + r) * E + col * 4 : matrix;
    cp_async_16(base + (r * E + col * 4) * 4, from, valid);
  }
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

template <int C>
__device__ __forceinline__ float dot(const float4 (&a)[C], const float* row, int part) {
  float x = 0.f;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const float4 b = reinterpret_cast<const float4*>(row)[4 * i + part];
    x = fmaf(a[i].x, b.x, x);
    x = fmaf(a[i].y, b.y, x);
    x = fmaf(a[i].z, b.z, x);
    x = fmaf(a[i].w, b.w, x);
  }
  return quad_sum(x);
}

template <int C>
__device__ __forceinline__ void axpy(float4 (&acc)[C], float a, const float* row, int part) {
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const float4 b = reinterpret_cast<const float4*>(row)[4 * i + part];
    acc[i].x = fmaf(a, b.x, acc[i].x);
    acc[i].y = fmaf(a, b.y, acc[i].y);
    acc[i].z = fmaf(a, b.z, acc[i].z);
    acc[i].w = fmaf(a, b.w, acc[i].w);
  }
}

template <int C>
__device__ __forceinline__ void load_row(float4 (&dst)[C], const float* matrix, int row, int n, int part) {
#pragma unroll
  for (int i = 0; i < C; ++i)
    dst[i] = row < n ? reinterpret_cast<const float4*>(matrix + int64_t(row) * (16 * C))[4 * i + part]
                     : make_float4(0.f, 0.f, 0.f, 0.f);
}

template <int C>
__device__ __forceinline__ void store_row(float* matrix, const float4 (&src)[C], int row, int n, int part, float f) {
  if (row >= n) return;
#pragma unroll
  for (int i = 0; i < C; ++i)
    reinterpret_cast<float4*>(matrix + int64_t(row) * (16 * C))[4 * i + part] =
        make_float4(src[i].x * f, src[i].y * f, src[i].z * f, src[i].w * f);
}

/// grid ceil(rows / 32) * B, 128 threads, simt_smem_bytes<E, P>() of dynamic shared memory.
template <int E, Pass P>
__global__ void __launch_bounds__(kSimtThreads) attention_simt_kernel(const Params<float> p) {
  constexpr int C = E / 16;  // float4 chunks a thread holds of a head vector
  constexpr int Cols = kSimtCols;
  constexpr int tile_elems = Cols * E;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* col_tiles = reinterpret_cast<float*>(smem_raw);  // [stage][a|b][Cols][E]
  float* col_values = col_tiles + 4 * tile_elems;          // kGradKV: [stage][lse2|delta][Cols]

  const bool rows_are_queries = P != Pass::kGradKV;
  const int n_rows = rows_are_queries ? p.L : p.S, n_cols = rows_are_queries ? p.S : p.L;
  const int b = blockIdx.x % p.B;
  const int r0 = row_block<kSimtRows>(blockIdx.x / p.B, n_rows, rows_are_queries && p.causal) * kSimtRows;
  const int part = threadIdx.x & 3;
  const int row = r0 + threadIdx.x / 4;
  const int64_t q_off = int64_t(b) * p.L * E, k_off = int64_t(b) * p.S * E;
  const float scale_log2 = p.scale * kLog2e;

  int t_begin = 0, t_end = (n_cols + Cols - 1) / Cols;
  if (p.causal) {
    if (rows_are_queries) t_end = min(t_end, (min(r0 + kSimtRows, n_rows) - 1) / Cols + 1);
    else t_begin = r0 / Cols;
  }
  const float* col_a = rows_are_queries ? p.k + k_off : p.q + q_off;
  const float* col_b = rows_are_queries ? p.v + k_off : p.grad_out + q_off;
  auto load_cols = [&](int t) {
    const int stage = t & 1;
    simt_load_tile<E>(col_tiles + (2 * stage) * tile_elems, col_a, t * Cols, n_cols);
    simt_load_tile<E>(col_tiles + (2 * stage + 1) * tile_elems, col_b, t * Cols, n_cols);
    if constexpr (P == Pass::kGradKV) {
      load_column_values<Cols>(col_values + (2 * stage) * Cols, p.lse + int64_t(b) * p.L, t * Cols, p.L, kLog2e);
      load_column_values<Cols>(col_values + (2 * stage + 1) * Cols, p.delta + int64_t(b) * p.L, t * Cols, p.L, 1.f);
    }
  };
  if (t_begin < t_end) load_cols(t_begin);
  cp_async_commit();

  // The row's operands: Q (and dO) for the query-row passes, K and V for kGradKV.
  float4 ra[C], rb[P == Pass::kForward ? 1 : C];
  if constexpr (P == Pass::kGradKV) {
    load_row(ra, p.k + k_off, row, n_rows, part);
    load_row(rb, p.v + k_off, row, n_rows, part);
  } else {
    load_row(ra, p.q + q_off, row, n_rows, part);
    if constexpr (P == Pass::kGradQ) load_row(rb, p.grad_out + q_off, row, n_rows, part);
  }
  float row_lse2 = 0.f, row_delta = 0.f;
  if constexpr (P == Pass::kGradQ) {
    row_lse2 = row < p.L ? p.lse[int64_t(b) * p.L + row] * kLog2e : 0.f;
    row_delta = row < p.L ? p.delta[int64_t(b) * p.L + row] : 0.f;
  }
  float row_m = -INFINITY, row_l = 0.f;
  float4 acc[C], acc2[P == Pass::kGradKV ? C : 1];
  for (auto& a : acc) a = make_float4(0.f, 0.f, 0.f, 0.f);
  for (auto& a : acc2) a = make_float4(0.f, 0.f, 0.f, 0.f);

  auto valid = [&](int col) {
    if (col >= n_cols) return false;
    if (!p.causal) return true;
    return rows_are_queries ? col <= row : row <= col;
  };

  for (int t = t_begin; t < t_end; ++t) {
    if (t + 1 < t_end) {
      load_cols(t + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* tile_a = col_tiles + (2 * (t & 1)) * tile_elems;
    const float* tile_b = tile_a + tile_elems;
    const int c0 = t * Cols;
    const bool edge = c0 + Cols > n_cols ||
                      (p.causal && (rows_are_queries ? c0 + Cols - 1 > r0 : r0 + kSimtRows - 1 > c0));

    if constexpr (P == Pass::kForward) {
      // Online softmax in log2 units, as in attention_mma.cuh; the quad's threads hold the same
      // scores (a sum of the same four parts in a commuted order), so each keeps the whole row sum.
      float s[Cols];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < Cols; ++j) {
        float x = dot(ra, tile_a + j * E, part) * scale_log2;
        if (edge && !valid(c0 + j)) x = -INFINITY;
        s[j] = x;
        tile_max = fmaxf(tile_max, x);
      }
      const float m_new = fmaxf(row_m, tile_max);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(row_m - m_use);
      row_m = m_new;
      row_l *= alpha;
#pragma unroll
      for (int i = 0; i < C; ++i) acc[i] = make_float4(acc[i].x * alpha, acc[i].y * alpha, acc[i].z * alpha, acc[i].w * alpha);
#pragma unroll
      for (int j = 0; j < Cols; ++j) {
        const float e2 = exp2f(s[j] - m_use);
        row_l += e2;
        axpy(acc, e2, tile_b + j * E, part);
      }
    } else {
      const float* col_lse2 = col_values + (2 * (t & 1)) * Cols;
      const float* col_delta = col_lse2 + Cols;
// Unrolled for the scheduler to overlap the shuffles of several columns; less at head size 128,
      // where the two accumulators leave no registers for more.
#pragma unroll(E == 128 ? 2 : 4)
      for (int j = 0; j < Cols; ++j) {
        const float lse2 = P == Pass::kGradQ ? row_lse2 : col_lse2[j];
        const float delta = P == Pass::kGradQ ? row_delta : col_delta[j];
        const float s = dot(ra, tile_a + j * E, part);
        const float dp = dot(rb, tile_b + j * E, part);
        float prob = exp2f(s * scale_log2 - lse2);
        if ((edge && !valid(c0 + j)) || lse2 == -INFINITY) prob = 0.f;
        const float ds = prob * (dp - delta);
        if constexpr (P == Pass::kGradKV) {
          axpy(acc, prob, tile_b + j * E, part);  // dV += P^T dO
          axpy(acc2, ds, tile_a + j * E, part);   // dK += dS^T Q
        } else {
          axpy(acc, ds, tile_a + j * E, part);  // dQ += dS K
        }
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

  if constexpr (P == Pass::kForward) {
    store_row(p.out + q_off, acc, row, p.L, part, row_l > 0.f ? 1.f / row_l : 0.f);
    if (part == 0 && row < p.L)
      p.lse[int64_t(b) * p.L + row] = row_l > 0.f ? row_m * kLn2 + logf(row_l) : -INFINITY;
  } else if constexpr (P == Pass::kGradKV) {
    store_row(p.out2 + k_off, acc, row, p.S, part, 1.f);
    store_row(p.out + k_off, acc2, row, p.S, part, p.scale);
  } else {
    store_row(p.out + q_off, acc, row, p.L, part, p.scale);
  }
}

}  // namespace minidl::cuda::attention
