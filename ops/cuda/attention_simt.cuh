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

// Rows [first, first + kSimtCols) of a [n, E] matrix (rows `row_stride` elements apart, a multiple
// of 4) into a dense tile; rows at or past n read as zeros.
template <int E>
__device__ __forceinline__ void simt_load_tile(float* tile, const float* matrix, int64_t row_stride, int first,
                                               int n) {
  constexpr int chunks_per_row = E / 4;                       // 16-byte chunks
  constexpr int rows_per_step = kSimtThreads / chunks_per_row;  // rows the block's threads cover at once
  static_assert(kSimtThreads % chunks_per_row == 0 && kSimtCols % rows_per_step == 0, "whole rows per step");
  // Pointer steps down the rows, as attention_mma.cuh's load_tile.
  const int col = threadIdx.x % chunks_per_row;
  int r = threadIdx.x / chunks_per_row;
  const float* from = matrix + int64_t(first + r) * row_stride + col * 4;
  const int64_t step = rows_per_step * row_stride;
  uint32_t to = smem_addr(tile) + (r * E + col * 4) * 4;
#pragma unroll
  for (; r < kSimtCols; r += rows_per_step, from += step, to += rows_per_step * E * 4) {
    const bool valid = first + r < n;
    cp_async_16(to, valid ? from : matrix, valid);
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

// acc[r] += a[r] * row for each of the thread's R rows: one shared-memory read feeds them all.
template <int R, int C>
__device__ __forceinline__ void axpy_rows(float4 (&acc)[R][C], const float (&a)[R], const float* row, int part) {
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const float4 b = reinterpret_cast<const float4*>(row)[4 * i + part];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      acc[r][i].x = fmaf(a[r], b.x, acc[r][i].x);
      acc[r][i].y = fmaf(a[r], b.y, acc[r][i].y);
      acc[r][i].z = fmaf(a[r], b.z, acc[r][i].z);
      acc[r][i].w = fmaf(a[r], b.w, acc[r][i].w);
    }
  }
}

// The thread's quarter (`part`) of row `row` of a [n, 16 C] matrix, rows `row_stride` elements apart;
// zeros past n.
template <int C>
__device__ __forceinline__ void load_row(float4 (&dst)[C], const float* matrix, int64_t row_stride, int row, int n,
                                         int part) {
#pragma unroll
  for (int i = 0; i < C; ++i)
    dst[i] = row < n ? reinterpret_cast<const float4*>(matrix + int64_t(row) * row_stride)[4 * i + part]
                     : make_float4(0.f, 0.f, 0.f, 0.f);
}

template <int C>
__device__ __forceinline__ void store_row(float* matrix, int64_t row_stride, const float4 (&src)[C], int row, int n,
                                          int part, float f) {
  if (row >= n) return;
#pragma unroll
  for (int i = 0; i < C; ++i)
    reinterpret_cast<float4*>(matrix + int64_t(row) * row_stride)[4 * i + part] =
        make_float4(src[i].x * f, src[i].y * f, src[i].z * f, src[i].w * f);
}

// Bit j: whether query `row`'s score against key c0 + j (c0 a multiple of 16) is kept, for the
// kSimtCols keys of a tile. A Philox block holds keys j and j + 8 of the row (and of row +- 8, which
// another thread holds here: DropoutMask's blocks fit the tensor-core kernel's layout).
__device__ __forceinline__ uint32_t simt_keep_bits(const DropoutMask& drop, int b, int row, int c0) {
  static_assert(kSimtCols == 32, "one bit per key of the tile");
  const bool far_row = (row >> 3) & 1;
  uint32_t bits = 0;
#pragma unroll
  for (int g = 0; g < kSimtCols / 16; ++g)
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const uint4 r = drop.block(b, row, c0 + 16 * g + m);
      const uint32_t near = drop.kept(far_row ? r.z : r.x), far = drop.kept(far_row ? r.w : r.y);
      bits |= near << (16 * g + m) | far << (16 * g + m + 8);
    }
  return bits;
}

/// Rows a thread holds: two where the registers allow (each value read from shared memory then
/// feeds two rows' FMAs, halving the shared-memory traffic that bounds this kernel), one at head
/// size 128.
template <int E>
constexpr int kSimtRowsPerThread = E == 128 ? 1 : 2;
/// Rows of a block.
template <int E>
constexpr int kSimtBlockRows = kSimtRows * kSimtRowsPerThread<E>;

/// grid ceil(rows / kSimtBlockRows<E>) * B, 128 threads, simt_smem_bytes<E, P>() of dynamic shared
/// memory. A thread's rows are r0 + threadIdx.x / 4 + 32 r.
template <int E, Pass P, bool Dropout>
__global__ void __launch_bounds__(kSimtThreads) attention_simt_kernel(const Params<float> p) {
  constexpr int C = E / 16;  // float4 chunks a thread holds of a head vector
  constexpr int R = kSimtRowsPerThread<E>;
  constexpr int Rows = kSimtBlockRows<E>;
  constexpr int Cols = kSimtCols;
  constexpr int tile_elems = Cols * E;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* col_tiles = reinterpret_cast<float*>(smem_raw);  // [stage][a|b][Cols][E]
  float* col_values = col_tiles + 4 * tile_elems;          // kGradKV: [stage][lse2|delta][Cols]

  const bool rows_are_queries = P != Pass::kGradKV;
  const int n_rows = rows_are_queries ? p.L : p.S, n_cols = rows_are_queries ? p.S : p.L;
  const int b = blockIdx.x % p.B;
  const int r0 = row_block<Rows>(blockIdx.x / p.B, n_rows, rows_are_queries && p.causal) * Rows;
  const int part = threadIdx.x & 3;
  int row[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row[r] = r0 + threadIdx.x / 4 + kSimtRows * r;
  // This batch's q, k, v and dO, each where its HeadLayout places it (attention_mma.cuh).
  const float* q = p.q + p.q_at.batch(b);
  const float* k = p.k + p.k_at.batch(b);
  const float* v = p.v + p.v_at.batch(b);
  const float* grad_out = P == Pass::kForward ? nullptr : p.grad_out + p.grad_out_at.batch(b);
  const float scale_log2 = p.scale * kLog2e;
  DropoutMask drop{};
  if constexpr (Dropout) drop = DropoutMask::make(p);

  int t_begin = 0, t_end = (n_cols + Cols - 1) / Cols;
  if (p.causal) {
    if (rows_are_queries) t_end = min(t_end, (min(r0 + Rows, n_rows) - 1) / Cols + 1);
    else t_begin = r0 / Cols;
  }
  const float* col_a = rows_are_queries ? k : q;
  const float* col_b = rows_are_queries ? v : grad_out;
  const int64_t col_a_stride = rows_are_queries ? p.k_at.row : p.q_at.row;
  const int64_t col_b_stride = rows_are_queries ? p.v_at.row : p.grad_out_at.row;
  auto load_cols = [&](int t) {
    const int stage = t & 1;
    simt_load_tile<E>(col_tiles + (2 * stage) * tile_elems, col_a, col_a_stride, t * Cols, n_cols);
    simt_load_tile<E>(col_tiles + (2 * stage + 1) * tile_elems, col_b, col_b_stride, t * Cols, n_cols);
    if constexpr (P == Pass::kGradKV) {
      load_column_values<Cols>(col_values + (2 * stage) * Cols, p.lse + int64_t(b) * p.L, t * Cols, p.L, kLog2e);
      load_column_values<Cols>(col_values + (2 * stage + 1) * Cols, p.delta + int64_t(b) * p.L, t * Cols, p.L, 1.f);
    }
  };
  if (t_begin < t_end) load_cols(t_begin);
  cp_async_commit();

  // The rows' operands: Q (and dO) for the query-row passes, K and V for kGradKV.
  float4 ra[R][C], rb[R][P == Pass::kForward ? 1 : C];
  float row_lse2[R], row_delta[R], row_m[R], row_l[R];
  float4 acc[R][C], acc2[R][P == Pass::kGradKV ? C : 1];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if constexpr (P == Pass::kGradKV) {
      load_row(ra[r], k, p.k_at.row, row[r], n_rows, part);
      load_row(rb[r], v, p.v_at.row, row[r], n_rows, part);
    } else {
      load_row(ra[r], q, p.q_at.row, row[r], n_rows, part);
      if constexpr (P == Pass::kGradQ) load_row(rb[r], grad_out, p.grad_out_at.row, row[r], n_rows, part);
    }
    const bool in = row[r] < p.L;
    row_lse2[r] = P == Pass::kGradQ && in ? p.lse[int64_t(b) * p.L + row[r]] * kLog2e : 0.f;
    row_delta[r] = P == Pass::kGradQ && in ? p.delta[int64_t(b) * p.L + row[r]] : 0.f;
    row_m[r] = -INFINITY, row_l[r] = 0.f;
    for (auto& a : acc[r]) a = make_float4(0.f, 0.f, 0.f, 0.f);
    for (auto& a : acc2[r]) a = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  auto valid = [&](int r, int col) {
    if (col >= n_cols || row[r] >= n_rows) return false;
    if (!p.causal) return true;
    return rows_are_queries ? col <= row[r] : row[r] <= col;
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
    const bool edge = c0 + Cols > n_cols || r0 + Rows > n_rows ||
                      (p.causal && (rows_are_queries ? c0 + Cols - 1 > r0 : r0 + Rows - 1 > c0));

    if constexpr (P == Pass::kForward) {
      // Online softmax in log2 units, as in attention_mma.cuh; the quad's threads hold the same
      // scores (a sum of the same four parts in a commuted order), so each keeps the whole row sum.
      float s[R][Cols];
      float m_use[R], tile_max[R];
#pragma unroll
      for (int r = 0; r < R; ++r) tile_max[r] = -INFINITY;
#pragma unroll
      for (int j = 0; j < Cols; ++j)
#pragma unroll
        for (int r = 0; r < R; ++r) {  // rows inner: the column's shared-memory values serve all R
          float x = dot(ra[r], tile_a + j * E, part) * scale_log2;
          if (edge && !valid(r, c0 + j)) x = -INFINITY;
          s[r][j] = x;
          tile_max[r] = fmaxf(tile_max[r], x);
        }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float m_new = fmaxf(row_m[r], tile_max[r]);
        m_use[r] = m_new == -INFINITY ? 0.f : m_new;
        const float alpha = exp2f(row_m[r] - m_use[r]);
        row_m[r] = m_new;
        row_l[r] *= alpha;
#pragma unroll
        for (int i = 0; i < C; ++i)
          acc[r][i] = make_float4(acc[r][i].x * alpha, acc[r][i].y * alpha, acc[r][i].z * alpha, acc[r][i].w * alpha);
      }
      uint32_t keep_bits[R];
#pragma unroll
      for (int r = 0; r < R; ++r) keep_bits[r] = Dropout ? simt_keep_bits(drop, b, row[r], c0) : ~0u;
#pragma unroll
      for (int j = 0; j < Cols; ++j) {
        float e2[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          e2[r] = exp2f(s[r][j] - m_use[r]);
          row_l[r] += e2[r];  // the undropped sum
          if constexpr (Dropout) e2[r] = keep_bits[r] >> j & 1 ? e2[r] : 0.f;
        }
        axpy_rows(acc, e2, tile_b + j * E, part);
      }
    } else {
      const float* col_lse2 = col_values + (2 * (t & 1)) * Cols;
      const float* col_delta = col_lse2 + Cols;
      [[maybe_unused]] uint32_t keep_bits[P == Pass::kGradQ ? R : 1];
      if constexpr (Dropout && P == Pass::kGradQ) {
#pragma unroll
        for (int r = 0; r < R; ++r) keep_bits[r] = simt_keep_bits(drop, b, row[r], c0);
      }
      // Unrolled for the scheduler to overlap the shuffles of several columns; less at head size 128,
      // where the two accumulators leave no registers for more.
#pragma unroll(E == 128 ? 2 : 4)
      for (int j = 0; j < Cols; ++j) {
        float prob[R], ds[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float lse2 = P == Pass::kGradQ ? row_lse2[r] : col_lse2[j];
          const float delta = P == Pass::kGradQ ? row_delta[r] : col_delta[j];
          const float s = dot(ra[r], tile_a + j * E, part);
          const float dp = dot(rb[r], tile_b + j * E, part);
          prob[r] = exp2f(s * scale_log2 - lse2);
          if ((edge && !valid(r, c0 + j)) || lse2 == -INFINITY) prob[r] = 0.f;
          if constexpr (Dropout) {
            // Z = mask / keep_prob: dV uses P Z, and dS = P (dP Z - delta), as attention_mma.cuh.
            bool keep;
            if constexpr (P == Pass::kGradQ) keep = keep_bits[r] >> j & 1;
            else keep = drop.keep(b, c0 + j, row[r]);
            const float z = keep ? p.inv_keep : 0.f;
            ds[r] = prob[r] * (dp * z - delta);
            prob[r] *= z;
          } else {
            ds[r] = prob[r] * (dp - delta);
          }
        }
        if constexpr (P == Pass::kGradKV) {
          axpy_rows(acc, prob, tile_b + j * E, part);  // dV += P^T dO
          axpy_rows(acc2, ds, tile_a + j * E, part);   // dK += dS^T Q
        } else {
          axpy_rows(acc, ds, tile_a + j * E, part);  // dQ += dS K
        }
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

#pragma unroll
  for (int r = 0; r < R; ++r) {
    if constexpr (P == Pass::kForward) {
      store_row(p.out + p.out_at.batch(b), p.out_at.row, acc[r], row[r], p.L, part,
                (row_l[r] > 0.f ? 1.f / row_l[r] : 0.f) * (Dropout ? p.inv_keep : 1.f));
      if (part == 0 && row[r] < p.L)
        p.lse[int64_t(b) * p.L + row[r]] = row_l[r] > 0.f ? row_m[r] * kLn2 + logf(row_l[r]) : -INFINITY;
    } else if constexpr (P == Pass::kGradKV) {
      store_row(p.out2 + p.out2_at.batch(b), p.out2_at.row, acc[r], row[r], p.S, part, 1.f);   // dV
      store_row(p.out + p.out_at.batch(b), p.out_at.row, acc2[r], row[r], p.S, part, p.scale);  // dK
    } else {
      store_row(p.out + p.out_at.batch(b), p.out_at.row, acc[r], row[r], p.L, part, p.scale);  // dQ
    }
  }
}

}  // namespace minidl::cuda::attention
