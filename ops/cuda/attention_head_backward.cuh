#pragma once
// The 16-bit attention backward for short sequences (L and S at most 256, head size 32 or 64): one
// block per head, which holds the head's keys and values in shared memory and walks its queries in
// tiles of 64. Because the block sees every key of a query, each query tile's dQ = dS K is complete
// after one step and is stored as it is: no float32 accumulator with atomics, no pass turning it
// into the 16-bit type, and no pass before for delta = rowsum(dO O), which the block forms itself.
// Those two passes around cuDNN's backward took 31 and 16 us of its 118 a layer in char_gpt's step
// on an H100; attention_mma.cuh's passes need the delta pass too. Deterministic: every sum runs
// in one order.
//
// 8 warps. Keys are 16-row groups; warp w owns groups w and 15 - w, so that under a causal mask
// (group g sees the query tiles from g / 4 on) every warp has five group-tiles of work. A step:
//   each warp, for each of its groups that sees the tile: S^T = K_g Q_t^T, dP^T = V_g dO_t^T,
//     P^T and dS^T, dV_g += P^T dO_t, dK_g += dS^T Q_t, dS^T into shared memory;
//   then the block: dQ_t = dS_t K over the keys the tile sees, 16 x 16 pieces spread over the warps.
// Q and dO tiles are staged one step ahead through cp.async, with the stored dropout mask's bytes.
#include "ops/cuda/attention_mma.cuh"

namespace minidl::cuda::attention {

constexpr int kHeadWarps = 8;
constexpr int kHeadThreads = kHeadWarps * 32;
constexpr int kHeadMaxRows = 256;  // L and S at most
constexpr int kHeadTile = 64;      // queries a step
constexpr int kHeadGroups = kHeadMaxRows / 16;
constexpr int kHeadDsPitch = kHeadTile + 8;  // dS^T's row pitch in 16-bit elements (store_ds_t's)
constexpr int kHeadMaskBytes = (kHeadMaxRows / 64) * 512;  // a step's stored mask: 4 key blocks x 64 x 64 bits

template <class T, int E>
constexpr int head_backward_smem_bytes() {
  constexpr int row_bytes = kPitch<T, E> * 2;
  return 2 * kHeadMaxRows * row_bytes            // K and V
         + 2 * 2 * kHeadTile * row_bytes          // Q and dO tiles, two stages
         + kHeadMaxRows * kHeadDsPitch * 2         // dS^T
         + 2 * kHeadMaxRows * 4                    // lse (log2 units) and delta per query
         + 2 * kHeadMaskBytes;                     // the stored mask, two stages
}

/// Whether the one-block-a-head backward takes this problem.
template <class T>
constexpr bool head_backward_type_ok() {
  return !std::is_same_v<T, float>;
}
inline bool head_backward_fits(int64_t L, int64_t S, int64_t E) {
  return L <= kHeadMaxRows && S <= kHeadMaxRows && (E == 32 || E == 64);
}

// Rows [first, first + Rows) of a [n, E] matrix into a tile of kPitch<T, E>, zeros past n, by the
// block's kHeadThreads threads.
template <class T, int E, int Rows>
__device__ __forceinline__ void head_load_rows(Smem<T>* tile, const T* matrix, int64_t row_stride, int first, int n) {
  constexpr int chunks_per_row = E / 8, rows_per_step = kHeadThreads / chunks_per_row;
  static_assert(Rows % rows_per_step == 0, "whole rows per step");
  const int col = threadIdx.x % chunks_per_row;
#pragma unroll
  for (int r = threadIdx.x / chunks_per_row; r < Rows; r += rows_per_step) {
    const bool valid = first + r < n;
    cp_async_16(smem_addr(tile + r * kPitch<T, E> + col * 8), valid ? matrix + int64_t(first + r) * row_stride + col * 8
                                                                    : matrix,
                valid);
  }
}

// acc[Nt][4] = the 16 rows at `rows` times the tile's kHeadTile rows, transposed (rows_times_cols_t
// for a group of rows given by pointer rather than by warp).
template <class T, int E, int Nt>
__device__ __forceinline__ void group_times_tile_t(float (&acc)[Nt][4], const Smem<T>* rows, const Smem<T>* cols) {
  constexpr int pitch = kPitch<T, E>;
  const int lane = threadIdx.x & 31, mi = lane >> 3;
  const uint32_t a_base = smem_addr(rows + (lane & 15) * pitch + (lane >> 4) * 8);
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

// The keep bits of a thread's accumulator tiles (DropoutMask::staged_tile_bits' layout, keys as rows)
// from a 64-key block's staged bytes, for the 16-key group `in_block` (0..3) of that block.
template <int Nt>
__device__ __forceinline__ uint32_t head_staged_bits(const uint8_t* staged, int in_block) {
  const int lane = threadIdx.x & 31;
  const int r = 8 * in_block + (lane >> 2), m = lane & 3;
  uint32_t bits = 0;
#pragma unroll
  for (int nt = 0; nt < Nt; nt += 2)
#pragma unroll
    for (int odd = 0; odd < 2; ++odd) {
      const uint32_t byte = staged[(4 * nt + 2 * m + odd) * 16 + r / 2];
      const uint32_t k = byte >> (4 * (r & 1)) & 0xfu;
      // DropoutMask::in_tiles<true>: draws 1 and 2 are the far row and the far column.
      bits |= (k & 1) << (4 * nt + odd) | (k >> 1 & 1) << (4 * nt + 2 + odd) | (k >> 2 & 1) << (4 * (nt + 1) + odd) |
              (k >> 3 & 1) << (4 * (nt + 1) + 2 + odd);
    }
  return bits;
}

/// grid B (one block per head), kHeadThreads threads, head_backward_smem_bytes<T, E>() of dynamic
/// shared memory. Reads p.q, k, v, grad_out, o (the forward's output) and lse; writes p.out (dK),
/// out2 (dV) and dq.
template <class T, int E, bool Dropout>
__global__ void __launch_bounds__(kHeadThreads, 1) attention_head_backward_kernel(const Params<T> p) {
  static_assert(head_backward_type_ok<T>(), "16-bit types");
  using S = Smem<T>;
  constexpr int pitch = kPitch<T, E>;
  constexpr int Nt = kHeadTile / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  S* keys = reinterpret_cast<S*>(smem_raw);
  S* values = keys + kHeadMaxRows * pitch;
  S* col_tiles = values + kHeadMaxRows * pitch;  // [stage][q | dO][kHeadTile][pitch]
  uint16_t* ds_t = reinterpret_cast<uint16_t*>(col_tiles + 4 * kHeadTile * pitch);  // [keys][kHeadDsPitch]
  float* lse2 = reinterpret_cast<float*>(ds_t + kHeadMaxRows * kHeadDsPitch);
  float* delta = lse2 + kHeadMaxRows;
  uint8_t* staged_mask = reinterpret_cast<uint8_t*>(delta + kHeadMaxRows);  // [stage][kHeadMaskBytes]

  const int b = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col_in_tile = 2 * (lane & 3);
  const int L = p.L, Sn = p.S;
  const T* q = p.q + p.q_at.batch(b);
  const T* k = p.k + p.k_at.batch(b);
  const T* v = p.v + p.v_at.batch(b);
  const T* grad_out = p.grad_out + p.grad_out_at.batch(b);
  const float scale_log2 = p.scale * kLog2e;
  DropoutMask drop{};
  if constexpr (Dropout) drop = DropoutMask::make(p);
  const int key_blocks = (Sn + 63) / 64;

  auto stage_tile = [&](int t) {
    const int stage = t & 1;
    S* tile_q = col_tiles + (2 * stage) * kHeadTile * pitch;
    head_load_rows<T, E, kHeadTile>(tile_q, q, p.q_at.row, t * kHeadTile, L);
    head_load_rows<T, E, kHeadTile>(tile_q + kHeadTile * pitch, grad_out, p.grad_out_at.row, t * kHeadTile, L);
    if constexpr (Dropout) {
      // Key block kb's bytes of the tile's 32 query pairs (DropoutMask::stage_stored, keys as rows).
      const int i = threadIdx.x;
      if (drop.stored && i < 32 * key_blocks) {
        const int kb = i / 32, row = i % 32;
        const uint8_t* src =
            drop.stored + b * drop.stored_batch + (int64_t(t) * kHeadTile / 2 + row) * drop.stored_pitch + kb * 16;
        cp_async_16(smem_addr(staged_mask + stage * kHeadMaskBytes + kb * 512 + row * 16), src, true);
      }
    }
  };

  head_load_rows<T, E, kHeadMaxRows>(keys, k, p.k_at.row, 0, Sn);
  head_load_rows<T, E, kHeadMaxRows>(values, v, p.v_at.row, 0, Sn);
  stage_tile(0);
  cp_async_commit();

  // lse in log2 units and delta = rowsum(dO * O) for every query, a thread a query.
  {
    const int i = threadIdx.x;
    float lse_i = 0.f, delta_i = 0.f;
    if (i < L) {
      lse_i = p.lse[int64_t(b) * L + i] * kLog2e;
      const T* go = grad_out + int64_t(i) * p.grad_out_at.row;
      const T* o = p.o + p.o_at.batch(b) + int64_t(i) * p.o_at.row;
#pragma unroll
      for (int c = 0; c < E; c += 8) {
        const uint4 a = *reinterpret_cast<const uint4*>(go + c), bb = *reinterpret_cast<const uint4*>(o + c);
        const T* ha = reinterpret_cast<const T*>(&a);
        const T* hb = reinterpret_cast<const T*>(&bb);
#pragma unroll
        for (int e = 0; e < 8; ++e) delta_i = fmaf(to_float(ha[e]), to_float(hb[e]), delta_i);
      }
    }
    lse2[i] = lse_i;
    delta[i] = delta_i;
  }

  float dv[2][E / 8][4], dk[2][E / 8][4];
  zero(dv[0]), zero(dv[1]), zero(dk[0]), zero(dk[1]);
  const int groups[2] = {warp, kHeadGroups - 1 - warp};
  const int tiles = (L + kHeadTile - 1) / kHeadTile;

  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) {
      stage_tile(t + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const S* tile_q = col_tiles + (2 * (t & 1)) * kHeadTile * pitch;
    const S* tile_do = tile_q + kHeadTile * pitch;
    const int c0 = t * kHeadTile;
    // The keys this tile's queries see, in whole groups: dQ's product runs over them.
    const int seen = p.causal ? min(Sn, c0 + kHeadTile) : Sn;
    const int seen_groups = (seen + 15) / 16;

#pragma unroll
    for (int gi = 0; gi < 2; ++gi) {
      const int g = groups[gi], key0 = 16 * g;
      if (g >= seen_groups) continue;  // past S, or after every query of the tile
      const int row_lo = key0 + (lane >> 2), row_hi = row_lo + 8;
      float s[Nt][4], dp[Nt][4];
      zero(s);
      zero(dp);
      group_times_tile_t<T, E, Nt>(s, keys + key0 * pitch, tile_q);
      group_times_tile_t<T, E, Nt>(dp, values + key0 * pitch, tile_do);
      const bool edge = c0 + kHeadTile > L || key0 + 16 > Sn || (p.causal && key0 + 15 > c0);
      [[maybe_unused]] uint32_t keep = 0;
      if constexpr (Dropout)
        keep = drop.stored ? head_staged_bits<Nt>(staged_mask + (t & 1) * kHeadMaskBytes + (g / 4) * 512, g % 4)
                           : drop.tile_bits<Nt, true>(b, row_lo, c0 + col_in_tile);
#pragma unroll
      for (int nt = 0; nt < Nt; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = e >> 1 ? row_hi : row_lo, c = nt * 8 + col_in_tile + (e & 1), query = c0 + c;
          const float l2 = lse2[query];
          float prob = exp2f(s[nt][e] * scale_log2 - l2);
          if ((edge && (query >= L || key >= Sn || (p.causal && key > query))) || l2 == -INFINITY) prob = 0.f;
          if constexpr (Dropout) {
            const float z = keep >> (4 * nt + e) & 1 ? p.inv_keep : 0.f;
            s[nt][e] = prob * z;
            dp[nt][e] = prob * (dp[nt][e] * z - delta[query]);
          } else {
            s[nt][e] = prob;
            dp[nt][e] = prob * (dp[nt][e] - delta[query]);
          }
        }
      p_times_cols<T, E, Nt>(dv[gi], s, tile_do);  // dV += P^T dO
      p_times_cols<T, E, Nt>(dk[gi], dp, tile_q);  // dK += dS^T Q
      uint16_t* row = ds_t + row_lo * kHeadDsPitch + col_in_tile;
#pragma unroll
      for (int nt = 0; nt < Nt; ++nt) {
        *reinterpret_cast<uint32_t*>(row + nt * 8) = pack2<T>(dp[nt][0], dp[nt][1]);
        *reinterpret_cast<uint32_t*>(row + 8 * kHeadDsPitch + nt * 8) = pack2<T>(dp[nt][2], dp[nt][3]);
      }
    }
    __syncthreads();  // dS^T of every group that sees the tile

    // dQ_t = dS_t K over the seen keys: (64 / 16) x (E / 16) pieces of 16 x 16.
    {
      constexpr int col_pairs = E / 16, pieces = (kHeadTile / 16) * col_pairs;
      const int mi = lane >> 3;
      T* dq = p.dq + p.dq_at.batch(b);
      for (int piece = warp; piece < pieces; piece += kHeadWarps) {
        const int mt = piece / col_pairs, np = piece % col_pairs;
        float acc[2][4];
        zero(acc);
        for (int ks = 0; ks < seen_groups; ++ks) {
          uint32_t a[4], bf[4];
          ldmatrix_x4_trans(a, smem_addr(ds_t + (ks * 16 + (mi >> 1) * 8 + (lane & 7)) * kHeadDsPitch + mt * 16 +
                                         (mi & 1) * 8));
          ldmatrix_x4_trans(bf, smem_addr(keys + (ks * 16 + (mi & 1) * 8 + (lane & 7)) * pitch + np * 16 +
                                          (mi >> 1) * 8));
          mma_16816<T>(acc[0], a, bf[0], bf[1]);
          mma_16816<T>(acc[1], a, bf[2], bf[3]);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int query = c0 + mt * 16 + (lane >> 2) + 8 * half;
          if (query >= L) continue;
          T* out = dq + int64_t(query) * p.dq_at.row + np * 16 + col_in_tile;
#pragma unroll
          for (int j = 0; j < 2; ++j)
            *reinterpret_cast<uint32_t*>(out + j * 8) =
                pack2<T>(acc[j][2 * half] * p.scale, acc[j][2 * half + 1] * p.scale);
        }
      }
    }
    __syncthreads();  // dS^T and this stage's tiles are rewritten next step
  }

#pragma unroll
  for (int gi = 0; gi < 2; ++gi) {
    const int key0 = 16 * groups[gi];
    if (key0 >= Sn) continue;
    const int row_lo = key0 + (lane >> 2);
    store_rows<T, E>(p.out2 + p.out2_at.batch(b), p.out2_at.row, dv[gi], row_lo, Sn, 1.f, 1.f);            // dV
    store_rows<T, E>(p.out + p.out_at.batch(b), p.out_at.row, dk[gi], row_lo, Sn, p.scale, p.scale);        // dK
  }
}

}  // namespace minidl::cuda::attention
