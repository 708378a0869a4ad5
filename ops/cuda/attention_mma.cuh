#pragma once
// The tensor-core attention kernel of ops/cuda/attention.cu: mma.sync m16n8k16 (float32
// accumulation) for bfloat16 and float16, and for float32 m16n8k8 TF32 products three times over
// (mma_ptx.cuh's mma_3xtf32: big and small parts, float32's accuracy on tensor cores; plain
// FP32 FMA ran 0.65-0.70x of PyTorch at L = 1,024), on operands read from shared memory.
//
// One kernel serves the three passes. A block owns 64 "rows" (16 per warp) and walks the other
// side's "columns" in tiles of kCols, double-buffered in shared memory through cp.async:
//   kForward: rows = queries, columns = keys.   S = Q K^T, online softmax, O += P V.
//   kGradKV:  rows = keys, columns = queries.    S^T = K Q^T, dP^T = V dO^T,
//                                                dV += P^T dO, dK += dS^T Q.
//   kGradQ:   rows = queries, columns = keys.    S = Q K^T, dP = dO V^T, dQ += dS K.
//   kGradKVQ: kGradKV, and dQ += dS K added into a float32 buffer with atomics: FlashAttention-2's
//             backward. Each tile's dS^T goes through shared memory (dQ's rows are the tile's
//             queries, which every warp's keys feed), and dQ's bits depend on the atomics' order.
// kGradKV + kGradQ is the deterministic backward (set_deterministic): it recomputes S and dP for
// dQ, seven products per tile pair instead of five, and needs no float32 dQ buffer.
//
// Each warp's rows stay in shared memory and are re-read with ldmatrix for every tile, not kept in
// registers: with head size 128 the accumulators of kGradKV (dK and dV, 128 floats a thread) leave
// no room for them.
//
// Dropout (the kernels' Dropout flag, false compiles it out): out = (dropout(P) / keep_prob) V as
// FlashAttention-2 does it, the keep mask drawn from Philox (DropoutMask); logsumexp stays the
// undropped softmax's. A forward whose backward will run also stores the mask, a bit a score, and
// the backward passes read it instead of drawing it again: with a Philox call for every four
// scores, drawing in all three passes cost about 0.04 ms of the 0.2 ms a bfloat16 layer of
// char_gpt's attention took (384 heads of 64, L = 256). Without a stored mask (kernels called
// directly) every pass redraws it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <curand_kernel.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/mma_ptx.cuh"

namespace minidl::cuda::attention {

enum class Pass { kForward, kGradKV, kGradKVQ, kGradQ };

/// Whether the pass's rows are keys (kGradKV, kGradKVQ) rather than queries.
constexpr bool rows_are_keys(Pass p) { return p == Pass::kGradKV || p == Pass::kGradKVQ; }

constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps;  // rows of a block
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// Where a [B1, B2, rows, E] view (any strides, a unit last one) keeps row i of the kernels' batch
/// bh = b1 B2 + b2: at element batch(bh) + i * row. So q, k, v read in place from [batch, heads]
/// views of one packed projection, and outputs go to PyTorch's [B1, rows, B2, E] layout. A 3-D
/// [B, rows, E] tensor is b2 = 1. The strides are int64: a batch's offset can pass 2^31.
struct HeadLayout {
  int64_t b2 = 1;                   // B2, the inner batch dim (heads)
  int64_t s0 = 0, s1 = 0, row = 0;  // the strides of b1, b2 and the rows, in elements
  // In 32-bit arithmetic (bh, and so B2, fit an int): the elementwise kernels of the backward take
  // it every few elements, where a 64-bit division would cost more than their loads.
  __host__ __device__ __forceinline__ int64_t batch(int bh) const {
    const int heads = static_cast<int>(b2), outer = bh / heads;
    return outer * s0 + (bh - outer * heads) * s1;
  }
};

/// The problem, shared by the kernels of all passes. Each tensor's rows are where its HeadLayout
/// says; lse and delta are contiguous float32 [B, L].
template <class T>
struct Params {
  const T* q;
  const T* k;
  const T* v;
  const T* grad_out;  // the backward's dO
  T* out;             // kForward: O; kGradKV: dK; kGradQ: dQ
  T* out2;            // kGradKV: dV
  float* dq_accum;    // kGradKVQ: float32 [B, L, E], zero before the launch; dQ / scale after it
  float* lse;         // written by kForward, read by the backward (natural log)
  const float* delta;  // rowsum(dO * O), the backward
  HeadLayout q_at, k_at, v_at, grad_out_at, out_at, out2_at;
  int B, L, S;
  float scale;
  bool causal;
  // Dropout: where the keep mask's Philox draws start (core/random.h's PhiloxDraw: seed and
  // offset, or offset past a graph's device-side [seed, base offset]), and keep_prob = 1 - p.
  uint64_t rng_seed, rng_offset;
  const uint64_t* rng_device_state;
  float keep_prob, inv_keep;  // inv_keep = 1 / keep_prob, 0 where keep_prob = 0
  uint8_t* keep_bits;  // the stored mask (DropoutMask::stored): kForward writes it, the backward reads it; or null
};

/// The dropout keep mask as a pure function of (seed, offset, b, query i, key j), so that every pass
/// and every thread layout draws the same one. A score takes 16 bits of a Philox4x32-10 draw, so a
/// block (one Philox call, four 32-bit draws) covers eight: queries i and i + 8 against keys j,
/// j + 1, j + 8 and j + 9, for i of the form 16 n + m and j of the form 16 n + 2 m', m < 8 and
/// m' < 4. Those are the eight scores a query-row thread holds of a pair of m16n8 accumulator tiles
/// (the forward, the dQ pass): one call for eight, where a whole 32-bit draw a score took one for
/// four, and the Philox rounds were 0.021 of the forward's 0.057 ms (bfloat16, 384 heads of 64,
/// L = 256). A key-row thread (the dK/dV pass, redrawing) uses half of each block it draws. Score
/// (b, i, j) is half j & 1 (the low 16 bits for even j) of draw 2 (i >> 3 & 1) + (j >> 3 & 1) of
/// the block at counter offset / 4 + (b Lb + i8) Sb / 2 + j8 / 2, with i8 = 8 (i >> 4) + (i & 7),
/// Lb = 8 ceil(L / 16) and likewise j8, Sb; it is kept where those bits u, as a uniform
/// (u + 1) / 2^16 on (0, 1], are <= keep_prob: with probability floor(2^16 keep_prob) / 2^16, within
/// 2^-16 of keep_prob (FlashAttention-2 takes 8 bits a score). A forward reserves 2 B Lb Sb draws
/// (DropoutMask::draws); scores past L or S only read unused draws.
///
/// A stored mask (`stored`, DropoutMask::stored_bytes) keeps a byte per block: bit 4 h + k whether
/// half h of draw k was kept, at (b, i8, j8 / 2) of a [B, Lp, Sp / 2] array with Lp = 32 ceil(L / 64)
/// and Sp = 32 ceil(S / 64). So a 64 x 64 tile pair's blocks are 32 rows of 16 bytes on 16-byte
/// boundaries, which the backward passes copy into shared memory with their tiles (stage_stored).
struct DropoutMask {
  uint2 key;
  uint64_t base;        // the counter of the block of score (0, 0, 0)
  uint64_t row_blocks;  // Sb / 2: blocks along a query pair's keys
  uint64_t batch_blocks;  // Lb Sb / 2
  uint32_t keep_below;  // a score is kept where its 16 bits are below this: floor(2^16 keep_prob)
  uint8_t* stored;  // the mask as the forward kept it, or null: every pass draws it
  int64_t stored_pitch;  // Sp / 2, the bytes of a query pair's row
  int64_t stored_batch;  // Lp Sp / 2

  __host__ __device__ static uint64_t blocks_along(int n) { return 8 * ((static_cast<uint64_t>(n) + 15) / 16); }
  /// The Philox draws a forward reserves for B x L x S scores: four a block.
  __host__ static uint64_t draws(int64_t B, int64_t L, int64_t S) {
    return 2 * static_cast<uint64_t>(B) * blocks_along(static_cast<int>(L)) * blocks_along(static_cast<int>(S));
  }
  __host__ __device__ static int64_t stored_rows(int64_t L) { return 32 * ((L + 63) / 64); }
  __host__ __device__ static int64_t stored_pitch_of(int64_t S) { return 16 * ((S + 63) / 64); }
  /// The bytes of a stored mask for B x L x S scores.
  __host__ static int64_t stored_bytes(int64_t B, int64_t L, int64_t S) {
    return B * stored_rows(L) * stored_pitch_of(S);
  }

  template <class T>
  __device__ __forceinline__ static DropoutMask make(const Params<T>& p) {
    const uint64_t* state = p.rng_device_state;
    const uint64_t seed = state ? state[0] : p.rng_seed;
    const uint64_t offset = p.rng_offset + (state ? state[1] : 0);  // both whole Philox blocks
    DropoutMask m;
    m.key = make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    m.base = offset / 4;
    m.row_blocks = blocks_along(p.S) / 2;
    m.batch_blocks = blocks_along(p.L) * m.row_blocks;
    m.keep_below = static_cast<uint32_t>(static_cast<double>(p.keep_prob) * 65536.0);
    m.stored = p.keep_bits;
    m.stored_pitch = stored_pitch_of(p.S);
    m.stored_batch = stored_rows(p.L) * m.stored_pitch;
    return m;
  }
  /// The four draws of the block holding query i's score against key j, in the order (i0, j0),
  /// (i0, j0 + 8), (i0 + 8, j0), (i0 + 8, j0 + 8), where i0 and j0 are i and j with bit 3 cleared
  /// (and j0 with bit 0: its two halves are keys j0 and j0 + 1).
  __device__ __forceinline__ uint4 block(int b, int i, int j) const {
    const uint64_t i8 = static_cast<uint64_t>((i >> 4) * 8 + (i & 7));
    const uint64_t j8 = static_cast<uint64_t>((j >> 4) * 8 + (j & 7));
    const uint64_t c = base + static_cast<uint64_t>(b) * batch_blocks + i8 * row_blocks + j8 / 2;
    return curand_Philox4x32_10(make_uint4(static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, 0u), key);
  }
  /// Whether half `h` (0: the low 16 bits) of `draw` keeps its score.
  __device__ __forceinline__ uint32_t kept(uint32_t draw, int h) const {
    return ((draw >> (16 * h)) & 0xffffu) < keep_below;
  }
  /// The keep bits of a block's four draws in one half (bit k: draw k).
  __device__ __forceinline__ uint32_t kept_bits(const uint4& r, int h) const {
    return kept(r.x, h) | kept(r.y, h) << 1 | kept(r.z, h) << 2 | kept(r.w, h) << 3;
  }
  __device__ __forceinline__ bool keep(int b, int i, int j) const {
    const uint4 r = block(b, i, j);
    const int c = ((i >> 3) & 1) * 2 + ((j >> 3) & 1);
    return kept(c == 0 ? r.x : c == 1 ? r.y : c == 2 ? r.z : r.w, j & 1);
  }
  /// Bit 4 nt + e: whether element e of accumulator tile nt (Nt of them, 8 columns each) is kept,
  /// for the thread whose rows are row_lo and row_lo + 8 and whose columns are c + 8 nt + {0, 1}
  /// (c = the tile's first column + 2 (lane % 4)); rows are queries or keys. One block per tile
  /// pair where the rows are queries, two (half of each used) where they are keys.
  template <int Nt, bool RowsAreKeys>
  __device__ __forceinline__ uint32_t tile_bits(int b, int row_lo, int c) const {
    static_assert(Nt % 2 == 0 && Nt * 4 <= 32, "tile pairs, one bit per element");
    uint32_t bits = 0;
#pragma unroll
    for (int nt = 0; nt < Nt; nt += 2) {
      if constexpr (RowsAreKeys) {  // queries col and col + 1: two blocks, each in the half of key row_lo
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) {
          const uint4 r = block(b, c + nt * 8 + odd, row_lo);
          bits |= in_tiles<true>(kept_bits(r, row_lo & 1), nt, odd);
        }
      } else {  // keys col and col + 1 (even c): the two halves of one block
        const uint4 r = block(b, row_lo, c + nt * 8);
        bits |= in_tiles<false>(kept_bits(r, 0), nt, 0) | in_tiles<false>(kept_bits(r, 1), nt, 1);
      }
    }
    return bits;
  }
  /// Copies the stored blocks of a tile pair into shared memory (cp.async, in the caller's group):
  /// rows r0.. (64) against columns c0.. (Cols), as [query pairs][bytes of key pairs], 16 bytes a
  /// row where the rows are keys (Cols / 2 rows) and Cols / 4 where they are queries (32 rows).
  template <int Cols, bool RowsAreKeys>
  __device__ __forceinline__ void stage_stored(uint8_t* dst, int b, int r0, int c0) const {
    constexpr int rows = RowsAreKeys ? Cols / 2 : 32, width = RowsAreKeys ? 16 : Cols / 4;
    static_assert(width == 16 || width == 8, "16- or 8-byte copies");
    const int i = threadIdx.x;
    if (i >= rows) return;
    const int64_t i8 = RowsAreKeys ? c0 / 2 + i : r0 / 2 + i, byte = RowsAreKeys ? r0 / 4 : c0 / 4;
    const uint8_t* src = stored + b * stored_batch + i8 * stored_pitch + byte;
    if constexpr (width == 16) cp_async_16(smem_addr(dst + i * 16), src, true);
    else cp_async_8(smem_addr(dst + i * 8), src);
  }
  /// tile_bits from a tile pair's blocks staged in shared memory (stage_stored).
  template <int Nt, bool RowsAreKeys>
  __device__ __forceinline__ static uint32_t staged_tile_bits(const uint8_t* staged) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int r = 8 * warp + (lane >> 2), m = lane & 3;  // the thread's pair of rows; of columns, 2 m + 8 nt
    uint32_t bits = 0;
#pragma unroll
    for (int nt = 0; nt < Nt; nt += 2) {
      if constexpr (RowsAreKeys) {  // key pair r: half of byte r / 2 of the query pairs 4 nt + 2 m + odd
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) {
          const uint32_t byte = staged[(4 * nt + 2 * m + odd) * 16 + r / 2];
          bits |= in_tiles<true>(byte >> (4 * (r & 1)) & 0xfu, nt, odd);
        }
      } else {  // query pair r: byte 2 nt + m, both halves (odd = 0, 1)
        const uint32_t byte = staged[r * (Nt * 2) + 2 * nt + m];
        bits |= in_tiles<false>(byte & 0xfu, nt, 0) | in_tiles<false>(byte >> 4, nt, 1);
      }
    }
    return bits;
  }
  /// Stores a query-row tile's `keep` (tile_bits' layout): the forward, for its backward.
  template <int Nt>
  __device__ __forceinline__ void store_tile_bits(uint32_t keep, int b, int row_lo, int c) const {
    const int64_t i8 = (row_lo >> 4) * 8 + (row_lo & 7);
    uint8_t* row = stored + b * stored_batch + i8 * stored_pitch;
#pragma unroll
    for (int nt = 0; nt < Nt; nt += 2) {
      const int col = c + nt * 8;  // j8 = 8 (col >> 4) + (col & 7), even
      const uint32_t byte = of_tiles(keep, nt, 0) | of_tiles(keep, nt, 1) << 4;
      row[4 * (col >> 4) + ((col & 7) >> 1)] = static_cast<uint8_t>(byte);
    }
  }

 private:
  /// A block's four keep bits (bit k: draw k) at their places in a thread's tile bits: elements
  /// e = odd (row_lo) and 2 + odd (row_lo + 8) of tiles nt (column c + 8 nt + odd) and nt + 1.
  /// Draws 1 and 2 are the far column and the far row where the rows are queries, and the other
  /// way round where they are keys.
  template <bool RowsAreKeys>
  __device__ __forceinline__ static uint32_t in_tiles(uint32_t kept_bits, int nt, int odd) {
    const uint32_t lo_lo = kept_bits & 1, far_both = kept_bits >> 3 & 1;
    const uint32_t far_col = kept_bits >> (RowsAreKeys ? 2 : 1) & 1, far_row = kept_bits >> (RowsAreKeys ? 1 : 2) & 1;
    return lo_lo << (4 * nt + odd) | far_row << (4 * nt + 2 + odd) | far_col << (4 * (nt + 1) + odd) |
           far_both << (4 * (nt + 1) + 2 + odd);
  }
  /// The inverse of in_tiles<false>: the block's four keep bits from a query-row thread's tile bits.
  __device__ __forceinline__ static uint32_t of_tiles(uint32_t keep, int nt, int odd) {
    return (keep >> (4 * nt + odd) & 1) | (keep >> (4 * (nt + 1) + odd) & 1) << 1 |
           (keep >> (4 * nt + 2 + odd) & 1) << 2 | (keep >> (4 * (nt + 1) + 2 + odd) & 1) << 3;
  }
};

/// The row block of a block's blockIdx.x / B. With causal, the query blocks of most work (the
/// last ones) start first, so that the short ones fill the end of the wave.
template <int Rows>
__device__ __forceinline__ int row_block(int index, int n_rows, bool last_first) {
  return last_first ? (n_rows + Rows - 1) / Rows - 1 - index : index;
}

// Two floats as one register of two 16-bit values, `lo` in the low half (the lower column).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

template <class T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}

// ---- tiles ----

// What a shared-memory tile holds: float32 for float32, the raw bits of a 16-bit type.
template <class T>
using Smem = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;

// Shared-memory row pitch in elements: 16 bytes past the row, so that the 8 rows one ldmatrix
// phase reads fall in 8 different 16-byte bank groups (E = 32, 64, 128 would otherwise alias).
// For float32 (4 floats past the row), p_times_cols's scalar reads of rows 2t and 2t + 1 then
// also fall in 32 different banks.
template <class T, int E>
constexpr int kPitch = E + 16 / int(sizeof(T));

// Rows [first, first + rows) of a [n, E] matrix (rows `row_stride` elements apart, 16-byte aligned)
// into a tile of kPitch<T, E>; rows at or past n read as zeros (a zero key or value contributes
// nothing once its probability is masked to 0, and uninitialized memory could hold NaN, which
// 0 * NaN would spread).
template <class T, int E, int Rows>
__device__ __forceinline__ void load_tile(const Smem<T>* tile_base, const T* matrix, int64_t row_stride, int first,
                                          int n) {
  constexpr int per_chunk = 16 / int(sizeof(T));                // elements of a 16-byte chunk
  constexpr int chunks_per_row = E / per_chunk;
  constexpr int rows_per_step = kWarps * 32 / chunks_per_row;  // rows the block's threads cover at once
  static_assert(kWarps * 32 % chunks_per_row == 0 && Rows % rows_per_step == 0, "whole rows per step");
  // Each thread keeps its column and walks its rows by pointer steps: a runtime row stride, unlike
  // the constant E of a contiguous matrix, would otherwise have every row's offset held in registers.
  const int col = threadIdx.x % chunks_per_row;
  int r = threadIdx.x / chunks_per_row;
  const T* from = matrix + int64_t(first + r) * row_stride + col * per_chunk;
  const int64_t step = rows_per_step * row_stride;
  uint32_t to = smem_addr(tile_base + r * kPitch<T, E> + col * per_chunk);
#pragma unroll
  for (; r < Rows; r += rows_per_step, from += step, to += rows_per_step * kPitch<T, E> * int(sizeof(T))) {
    const bool valid = first + r < n;
    cp_async_16(to, valid ? from : matrix, valid);
  }
}

// Per-column float32 values (lse in log2 units, or delta) of a tile, 0 past n.
template <int Cols>
__device__ __forceinline__ void load_column_values(float* dst, const float* src, int first, int n, float factor) {
  for (int c = threadIdx.x; c < Cols; c += kWarps * 32) dst[c] = first + c < n ? src[first + c] * factor : 0.f;
}

// acc[Nt][4] += A (this warp's 16 rows of `rows`, all E) times B^T, B = the tile's kCols rows
// `cols` (Nt = kCols / 8): the scores of the warp's rows against the tile's columns.
template <class T, int E, int Nt>
__device__ __forceinline__ void rows_times_cols_t(float (&acc)[Nt][4], const Smem<T>* rows, const Smem<T>* cols) {
  constexpr int pitch = kPitch<T, E>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int mi = lane >> 3;
  if constexpr (std::is_same_v<T, float>) {
    // ldmatrix moves 32-bit elements as pairs of 16-bit ones: an 8x8 16-bit matrix is an 8x4 float
    // one, and a thread receives element (lane / 4, lane % 4), the m16n8k8 operand layout.
    const uint32_t a_base = smem_addr(rows + (warp * 16 + (lane & 15)) * pitch + (lane >> 4) * 4);
    const uint32_t b_base = smem_addr(cols + ((mi >> 1) * 8 + (lane & 7)) * pitch + (mi & 1) * 4);
#pragma unroll
    for (int kk = 0; kk < E / 8; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, a_base + kk * 8 * 4);
      const Tf32Pair<4> sa(a);
#pragma unroll
      for (int np = 0; np < Nt / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, b_base + (np * 16 * pitch + kk * 8) * 4);
        const Tf32Pair<4> sb(b);
        mma_3xtf32(acc[2 * np], sa, sb, 0);
        mma_3xtf32(acc[2 * np + 1], sa, sb, 2);
      }
    }
  } else {
    const uint32_t a_base = smem_addr(rows + (warp * 16 + (lane & 15)) * pitch + (lane >> 4) * 8);
    const uint32_t b_base = smem_addr(cols + ((mi >> 1) * 8 + (lane & 7)) * pitch + (mi & 1) * 8);
#pragma unroll
    for (int kk = 0; kk < E / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4(a, a_base + kk * 32);
#pragma unroll
      for (int np = 0; np < Nt / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, b_base + (np * 16 * pitch + kk * 16) * 2);
        mma_16816<T>(acc[2 * np], a, b[0], b[1]);
        mma_16816<T>(acc[2 * np + 1], a, b[2], b[3]);
      }
    }
  }
}

// acc[E / 8][4] += P (16 x kCols, as float accumulators p[Nt][4] of the warp's rows) times the
// tile `cols` [kCols, E]. The accumulator layout of a 16x8 product is the A-operand layout of two
// neighbouring 16x8 tiles, so P goes to the tensor cores straight from registers.
template <class T, int E, int Nt>
__device__ __forceinline__ void p_times_cols(float (&acc)[E / 8][4], const float (&p)[Nt][4], const Smem<T>* cols) {
  constexpr int pitch = kPitch<T, E>;
  const int lane = threadIdx.x & 31;
  if constexpr (std::is_same_v<T, float>) {
    // An m16n8k8 A operand holds columns t and t + 4 (t = lane % 4) where the accumulator holds
    // 2t and 2t + 1: the product runs over the tile's 8 columns in the order 0, 2, 4, 6, 1, 3, 5, 7,
    // B's rows taken in the same order, so P needs no shuffle.
    const float* b_base = cols + 2 * (lane & 3) * pitch + (lane >> 2);
#pragma unroll
    for (int j = 0; j < Nt; ++j) {
      const uint32_t a[4] = {__float_as_uint(p[j][0]), __float_as_uint(p[j][2]), __float_as_uint(p[j][1]),
                             __float_as_uint(p[j][3])};
      const Tf32Pair<4> sa(a);
#pragma unroll
      for (int nt = 0; nt < E / 8; ++nt) {
        const float* b = b_base + j * 8 * pitch + nt * 8;
        const uint32_t raw[2] = {__float_as_uint(b[0]), __float_as_uint(b[pitch])};
        mma_3xtf32(acc[nt], sa, Tf32Pair<2>(raw), 0);
      }
    }
  } else {
    const int mi = lane >> 3;
    const uint32_t b_base = smem_addr(cols + ((mi & 1) * 8 + (lane & 7)) * pitch + (mi >> 1) * 8);
#pragma unroll
    for (int j = 0; j < Nt / 2; ++j) {
      uint32_t a[4];
      a[0] = pack2<T>(p[2 * j][0], p[2 * j][1]);
      a[1] = pack2<T>(p[2 * j][2], p[2 * j][3]);
      a[2] = pack2<T>(p[2 * j + 1][0], p[2 * j + 1][1]);
      a[3] = pack2<T>(p[2 * j + 1][2], p[2 * j + 1][3]);
#pragma unroll
      for (int np = 0; np < E / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, b_base + (j * 16 * pitch + np * 16) * 2);
        mma_16816<T>(acc[2 * np], a, b[0], b[1]);
        mma_16816<T>(acc[2 * np + 1], a, b[2], b[3]);
      }
    }
  }
}

template <int N>
__device__ __forceinline__ void zero(float (&x)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.f;
}

// Stores the warp's 16 rows x E of acc (times `factor`) into rows of a [n, E] matrix (rows
// `row_stride` elements apart), skipping rows at or past n. Each thread writes pairs of
// neighbouring elements.
template <class T, int E>
__device__ __forceinline__ void store_rows(T* dst, int64_t row_stride, const float (&acc)[E / 8][4], int row_lo, int n,
                                           float factor_lo, float factor_hi) {
  const int lane = threadIdx.x & 31;
  const int col = 2 * (lane & 3);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row_lo + 8 * half;
    if (row >= n) continue;
    const float f = half ? factor_hi : factor_lo;
    T* out = dst + int64_t(row) * row_stride + col;
#pragma unroll
    for (int nt = 0; nt < E / 8; ++nt) {
      const float lo = acc[nt][2 * half] * f, hi = acc[nt][2 * half + 1] * f;
      if constexpr (std::is_same_v<T, float>) *reinterpret_cast<float2*>(out + nt * 8) = make_float2(lo, hi);
      else *reinterpret_cast<uint32_t*>(out + nt * 8) = pack2<T>(lo, hi);
    }
  }
}

// The warp's dS^T (16 keys x kCols queries, float accumulators) into the block's dS^T tile, 16-bit.
template <class T, int E, int Nt>
__device__ __forceinline__ void store_ds_t(uint16_t* ds_tile, const float (&ds)[Nt][4]) {
  constexpr int pitch = Nt * 8 + 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint16_t* row = ds_tile + (warp * 16 + (lane >> 2)) * pitch + 2 * (lane & 3);
#pragma unroll
  for (int nt = 0; nt < Nt; ++nt) {
    *reinterpret_cast<uint32_t*>(row + nt * 8) = pack2<T>(ds[nt][0], ds[nt][1]);
    *reinterpret_cast<uint32_t*>(row + 8 * pitch + nt * 8) = pack2<T>(ds[nt][2], ds[nt][3]);
  }
}

// dq_accum [L, E] rows c0.. += dS (the tile's Cols queries x the block's 64 keys, read transposed
// from the dS^T tile) times K (the block's keys, `keys` [64, E]). The 16x16 output pieces are
// shared among the warps; each adds its pieces with float32 atomics (one red.global.add each).
template <class T, int E, int Cols>
__device__ __forceinline__ void add_ds_times_keys(float* dq_accum, const uint16_t* ds_tile, const uint16_t* keys,
                                                  int c0, int L) {
  constexpr int pitch = Cols + 8;
  constexpr int col_pairs = E / 16, pieces = (Cols / 16) * col_pairs;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int mi = lane >> 3;
  for (int piece = warp; piece < pieces; piece += kWarps) {
    const int mt = piece / col_pairs, np = piece % col_pairs;
    float acc[2][4];
    zero(acc);
#pragma unroll
    for (int ks = 0; ks < kRows / 16; ++ks) {
      // A = dS [16 queries x 16 keys], stored as dS^T [keys][queries]: the transposing load.
      uint32_t a[4], b[4];
      ldmatrix_x4_trans(a, smem_addr(ds_tile + (ks * 16 + (mi >> 1) * 8 + (lane & 7)) * pitch + mt * 16 + (mi & 1) * 8));
      ldmatrix_x4_trans(b, smem_addr(keys + (ks * 16 + (mi & 1) * 8 + (lane & 7)) * kPitch<T, E> + np * 16 + (mi >> 1) * 8));
      mma_16816<T>(acc[0], a, b[0], b[1]);
      mma_16816<T>(acc[1], a, b[2], b[3]);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int query = c0 + mt * 16 + (lane >> 2) + 8 * half;
      if (query >= L) continue;
      float* row = dq_accum + int64_t(query) * E + np * 16 + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        atomicAdd(row + j * 8, acc[j][2 * half]);
        atomicAdd(row + j * 8 + 1, acc[j][2 * half + 1]);
      }
    }
  }
}

// Columns per tile: 32 in the key-row passes, whose two accumulators (dK and dV) take the
// registers: at 64 a bfloat16 pass over heads of 64 took 183 registers a thread without dropout,
// two blocks an SM, and 32 ran forward + backward up to 3% faster without dropout and 7% faster
// with it (384 heads, L = 256 and 1,024, an H200). 32 also for float32 at head size 128, whose
// tiles would otherwise leave room for one block an SM.
template <class T, int E, Pass P>
constexpr int kCols = (rows_are_keys(P) || (std::is_same_v<T, float> && E == 128)) ? 32 : 64;

// kGradKVQ's dS^T tile [kRows keys][kCols queries]: the pitch puts the 8 rows of a quad-wide
// 4-byte store, and of an ldmatrix phase, in different banks.
template <class T, int E, Pass P>
constexpr int kDsPitch = kCols<T, E, P> + 8;

// The backward's stored dropout mask of a tile pair in shared memory (DropoutMask::stage_stored):
// 64 x 64 or 64 x 32 scores, a nibble per four.
constexpr int kStagedMaskBytes = 64 * 64 / 8;

template <class T, int E, Pass P>
constexpr int smem_bytes() {
  constexpr int row_tiles = P == Pass::kForward ? 1 : 2;
  constexpr int tile = kPitch<T, E> * int(sizeof(T));  // bytes of a tile row
  int bytes = row_tiles * kRows * tile + 2 * 2 * kCols<T, E, P> * tile;
  if (rows_are_keys(P)) bytes += 2 * 2 * kCols<T, E, P> * int(sizeof(float));
  if (P == Pass::kGradKVQ) bytes += kRows * kDsPitch<T, E, P> * 2;
  if (P != Pass::kForward) bytes += 2 * kStagedMaskBytes;
  return bytes;
}

// Blocks an SM that the registers must leave room for (0: the compiler's choice). Every 16-bit pass
// at head sizes up to 64 fits four blocks in shared memory (55 KB at most), but left to itself the
// compiler took 139-168 registers a thread, three blocks; held to 128 it spills 12-72 bytes, and
// forward + backward ran 4-9% faster (bfloat16, 384 heads of 64, L = 256 and 1,024, with and
// without dropout, an H200).
template <class T, int E, Pass P>
constexpr int kMinBlocks = !std::is_same_v<T, float> && E <= 64 ? 4 : 0;

/// grid ceil(rows / 64) * B, 128 threads, smem_bytes<T, E, P>() of dynamic shared memory.
template <class T, int E, Pass P, bool Dropout>
__global__ void __launch_bounds__(kWarps * 32, (kMinBlocks<T, E, P>)) attention_mma_kernel(const Params<T> p) {
  static_assert(P != Pass::kGradKVQ || !std::is_same_v<T, float>, "float32 takes the dQ pass (kGradQ)");
  using S = Smem<T>;
  constexpr int Cols = kCols<T, E, P>;
  constexpr int Nt = Cols / 8;
  constexpr int tile_elems = Cols * kPitch<T, E>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  S* row_a = reinterpret_cast<S*>(smem_raw);
  S* row_b = row_a + kRows * kPitch<T, E>;  // the backward passes
  S* col_tiles = row_a + (P == Pass::kForward ? 1 : 2) * kRows * kPitch<T, E>;  // [stage][a|b]
  float* col_values = reinterpret_cast<float*>(col_tiles + 4 * tile_elems);  // keys' passes: [stage][lse2|delta]
  uint16_t* ds_tile = reinterpret_cast<uint16_t*>(col_values + 4 * Cols);    // kGradKVQ: dS^T
  // The backward's staged dropout mask, [stage][kStagedMaskBytes], after whatever the pass has.
  uint8_t* staged_mask = smem_raw + smem_bytes<T, E, P>() - (P == Pass::kForward ? 0 : 2 * kStagedMaskBytes);

  const bool rows_are_queries = !rows_are_keys(P);
  const int n_rows = rows_are_queries ? p.L : p.S, n_cols = rows_are_queries ? p.S : p.L;
  const int b = blockIdx.x % p.B;
  const int r0 = row_block<kRows>(blockIdx.x / p.B, n_rows, rows_are_queries && p.causal) * kRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row_lo = r0 + warp * 16 + (lane >> 2), row_hi = row_lo + 8;
  const int col_in_tile = 2 * (lane & 3);  // + 8 * nt + {0, 1}
  // This batch's q, k, v and dO, each where its HeadLayout places it (the outputs' at the end, so
  // that their pointers hold no registers through the loop).
  const T* q = p.q + p.q_at.batch(b);
  const T* k = p.k + p.k_at.batch(b);
  const T* v = p.v + p.v_at.batch(b);
  const T* grad_out = P == Pass::kForward ? nullptr : p.grad_out + p.grad_out_at.batch(b);
  const float scale_log2 = p.scale * kLog2e;
  DropoutMask drop{};
  if constexpr (Dropout) drop = DropoutMask::make(p);

  // The column tiles this block sees: with causal, a query block stops at its last query's
  // diagonal, and a key block starts at its first key's.
  int t_begin = 0, t_end = (n_cols + Cols - 1) / Cols;
  if (p.causal) {
    if (rows_are_queries) t_end = min(t_end, (min(r0 + kRows, n_rows) - 1) / Cols + 1);
    else t_begin = r0 / Cols;
  }

  // The two column operands: K and V for the query-row passes, Q and dO for kGradKV.
  const T* col_a = rows_are_queries ? k : q;
  const T* col_b = rows_are_queries ? v : grad_out;
  const int64_t col_a_stride = rows_are_queries ? p.k_at.row : p.q_at.row;
  const int64_t col_b_stride = rows_are_queries ? p.v_at.row : p.grad_out_at.row;
  auto load_cols = [&](int t) {
    const int stage = t & 1;
    load_tile<T, E, Cols>(col_tiles + (2 * stage) * tile_elems, col_a, col_a_stride, t * Cols, n_cols);
    load_tile<T, E, Cols>(col_tiles + (2 * stage + 1) * tile_elems, col_b, col_b_stride, t * Cols, n_cols);
    if constexpr (rows_are_keys(P)) {
      load_column_values<Cols>(col_values + (2 * stage) * Cols, p.lse + int64_t(b) * p.L, t * Cols, p.L, kLog2e);
      load_column_values<Cols>(col_values + (2 * stage + 1) * Cols, p.delta + int64_t(b) * p.L, t * Cols, p.L, 1.f);
    }
    if constexpr (Dropout && P != Pass::kForward)
      if (drop.stored)
        drop.stage_stored<Cols, rows_are_keys(P)>(staged_mask + stage * kStagedMaskBytes, b, r0, t * Cols);
  };

  if constexpr (P == Pass::kForward) {
    load_tile<T, E, kRows>(row_a, q, p.q_at.row, r0, n_rows);
  } else if constexpr (P == Pass::kGradQ) {
    load_tile<T, E, kRows>(row_a, q, p.q_at.row, r0, n_rows);
    load_tile<T, E, kRows>(row_b, grad_out, p.grad_out_at.row, r0, n_rows);
  } else {
    load_tile<T, E, kRows>(row_a, k, p.k_at.row, r0, n_rows);
    load_tile<T, E, kRows>(row_b, v, p.v_at.row, r0, n_rows);
  }
  if (t_begin < t_end) load_cols(t_begin);
  cp_async_commit();

  // Per-row state. kForward: running max (log2 units) and the thread's part of the row sum.
  // kGradQ: the rows' lse (log2 units) and delta.
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.f, 0.f};
  float row_lse2[2] = {0.f, 0.f}, row_delta[2] = {0.f, 0.f};
  if constexpr (P == Pass::kGradQ) {
    const float* lse = p.lse + int64_t(b) * p.L;
    const float* delta = p.delta + int64_t(b) * p.L;
    row_lse2[0] = row_lo < p.L ? lse[row_lo] * kLog2e : 0.f;
    row_lse2[1] = row_hi < p.L ? lse[row_hi] * kLog2e : 0.f;
    row_delta[0] = row_lo < p.L ? delta[row_lo] : 0.f;
    row_delta[1] = row_hi < p.L ? delta[row_hi] : 0.f;
  }
  float acc[E / 8][4];   // kForward: O; kGradKV: dV; kGradQ: dQ
  float acc2[rows_are_keys(P) ? E / 8 : 1][4];  // kGradKV, kGradKVQ: dK
  zero(acc);
  zero(acc2);

  for (int t = t_begin; t < t_end; ++t) {
    if (t + 1 < t_end) {
      load_cols(t + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const S* tile_a = col_tiles + (2 * (t & 1)) * tile_elems;
    const S* tile_b = tile_a + tile_elems;
    const int c0 = t * Cols;
    // Whether some score of this tile is masked: a row or column past the end (a padding row's
    // zeros would give finite scores, masked all the same so that no pass depends on that), or above
    // the causal diagonal.
    const bool edge = c0 + Cols > n_cols || r0 + kRows > n_rows ||
                      (p.causal && (rows_are_queries ? c0 + Cols - 1 > r0 : r0 + kRows - 1 > c0));

    float s[Nt][4];
    zero(s);
    rows_times_cols_t<T, E, Nt>(s, row_a, tile_a);
    // valid(i, col): whether row half i (row_lo / row_hi) sees column col.
    auto valid = [&](int half, int col) {
      const int row = half ? row_hi : row_lo;
      if (col >= n_cols || row >= n_rows) return false;
      if (!p.causal) return true;
      return rows_are_queries ? col <= row : row <= col;
    };

    if constexpr (P == Pass::kForward) {
      // Online softmax in log2 units; a row with no key so far keeps max -inf and uses 0 in its
      // exponents, so that exp2(-inf - 0) = 0 instead of exp2(-inf + inf) = NaN.
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < Nt; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int half = e >> 1, col = c0 + nt * 8 + col_in_tile + (e & 1);
          float x = s[nt][e] * scale_log2;
          if (edge && !valid(half, col)) x = -INFINITY;
          s[nt][e] = x;
          tile_max[half] = fmaxf(tile_max[half], x);
        }
      float alpha[2], m_use[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float m = tile_max[half];
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        const float m_new = fmaxf(row_m[half], m);
        m_use[half] = m_new == -INFINITY ? 0.f : m_new;
        alpha[half] = exp2f(row_m[half] - m_use[half]);
        row_m[half] = m_new;
        row_l[half] *= alpha[half];
      }
#pragma unroll
      for (int nt = 0; nt < Nt; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float e2 = exp2f(s[nt][e] - m_use[e >> 1]);
          s[nt][e] = e2;
          row_l[e >> 1] += e2;  // the undropped sum: logsumexp and the normalization
        }
      if constexpr (Dropout) {
        const uint32_t keep = drop.tile_bits<Nt, false>(b, row_lo, c0 + col_in_tile);
        if (drop.stored) drop.store_tile_bits<Nt>(keep, b, row_lo, c0 + col_in_tile);
#pragma unroll
        for (int nt = 0; nt < Nt; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (!(keep >> (4 * nt + e) & 1)) s[nt][e] = 0.f;
      }
#pragma unroll
      for (int nt = 0; nt < E / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] *= alpha[e >> 1];
      p_times_cols<T, E, Nt>(acc, s, tile_b);
    } else {
      // P = exp2(scores in log2 units - lse2), 0 where masked or where the query saw no key.
      float dp[Nt][4];
      zero(dp);
      rows_times_cols_t<T, E, Nt>(dp, row_b, tile_b);
      const float* col_lse2 = col_values + (2 * (t & 1)) * Cols;
      const float* col_delta = col_lse2 + Cols;
      [[maybe_unused]] uint32_t keep = 0;  // bit 4 nt + e: element e of tile nt is kept
      if constexpr (Dropout)
        keep = drop.stored
                   ? DropoutMask::staged_tile_bits<Nt, rows_are_keys(P)>(staged_mask + (t & 1) * kStagedMaskBytes)
                   : drop.tile_bits<Nt, rows_are_keys(P)>(b, row_lo, c0 + col_in_tile);
#pragma unroll
      for (int nt = 0; nt < Nt; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int half = e >> 1, c = nt * 8 + col_in_tile + (e & 1);
          const float lse2 = P == Pass::kGradQ ? row_lse2[half] : col_lse2[c];
          const float delta = P == Pass::kGradQ ? row_delta[half] : col_delta[c];
          float prob = exp2f(s[nt][e] * scale_log2 - lse2);
          if ((edge && !valid(half, c0 + c)) || lse2 == -INFINITY) prob = 0.f;
          if constexpr (Dropout) {
            // With Z = mask / keep_prob: dV uses P Z, and dS = P (dP Z - delta) (delta = rowsum(dO O)
            // already holds the dropped probabilities).
            const float z = keep >> (4 * nt + e) & 1 ? p.inv_keep : 0.f;
            s[nt][e] = prob * z;
            dp[nt][e] = prob * (dp[nt][e] * z - delta);
          } else {
            s[nt][e] = prob;
            dp[nt][e] = prob * (dp[nt][e] - delta);  // dS
          }
        }
      }
      if constexpr (rows_are_keys(P)) {
        p_times_cols<T, E, Nt>(acc, s, tile_b);    // dV += P^T dO
        p_times_cols<T, E, Nt>(acc2, dp, tile_a);  // dK += dS^T Q
        if constexpr (P == Pass::kGradKVQ) {
          store_ds_t<T, E, Nt>(ds_tile, dp);
          __syncthreads();
          add_ds_times_keys<T, E, Cols>(p.dq_accum + int64_t(b) * p.L * E, ds_tile, row_a, c0, p.L);
        }
      } else {
        p_times_cols<T, E, Nt>(acc, dp, tile_a);  // dQ += dS K
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this tile
  }
  cp_async_wait<0>();  // a block without tiles still has its row loads in flight

  if constexpr (P == Pass::kForward) {
    float inv[2];
    for (int half = 0; half < 2; ++half) {
      float l = row_l[half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[half] = l > 0.f ? 1.f / l : 0.f;
      if constexpr (Dropout) inv[half] *= p.inv_keep;
      const int row = half ? row_hi : row_lo;
      if ((lane & 3) == 0 && row < p.L)
        p.lse[int64_t(b) * p.L + row] = l > 0.f ? row_m[half] * kLn2 + logf(l) : -INFINITY;
    }
    store_rows<T, E>(p.out + p.out_at.batch(b), p.out_at.row, acc, row_lo, p.L, inv[0], inv[1]);
  } else if constexpr (rows_are_keys(P)) {
    store_rows<T, E>(p.out2 + p.out2_at.batch(b), p.out2_at.row, acc, row_lo, p.S, 1.f, 1.f);         // dV
    store_rows<T, E>(p.out + p.out_at.batch(b), p.out_at.row, acc2, row_lo, p.S, p.scale, p.scale);   // dK
  } else {
    store_rows<T, E>(p.out + p.out_at.batch(b), p.out_at.row, acc, row_lo, p.L, p.scale, p.scale);    // dQ
  }
}

}  // namespace minidl::cuda::attention
