// The first layer of a transformer's MLP with its GELU in the product's epilogue, on Hopper's
// warpgroup tensor cores, forward and backward:
//   linear_gelu:          hidden = x w^T (+ bias), activated = gelu(hidden);
//   linear_gelu_backward: grad_hidden = (grad w2) * gelu'(hidden), and activated again if asked.
// Apart, cuBLASLt's product writes its result and a GELU pass reads it back: for char_gpt's
// [16384, 384] x [384, 1536] in bfloat16 those passes took 35 us of a layer's forward and 47-69 us
// of its backward (docs/benchmarks.md). cuBLASLt's own GELU epilogues compute the tanh form only,
// and cuDNN's fused matmul with the exact form ran slower than the two apart.
//
// The products are short (k = 384), so a tile's operands cost as much to bring from L2 as its
// multiply-adds cost the tensor cores, and the GELU's arithmetic in the epilogue as much again.
// Hence the shape: one block an SM holds 128 columns of the weight over the whole of k in shared
// memory (96 KB at k = 384, loaded once, transposed on the way for the backward's w2) and walks down
// the rows. Its three warpgroups work apart, each on its own 64-row tiles with its own three-deep
// cp.async pipeline of 64 x 64 operand slices and its own named barrier, so one warpgroup's
// epilogue runs beside the others' products. Only the row operand moves: half the L2 traffic of
// 128 x 128 tiles. The outputs leave through a 16 KB tile of the group's, in whole rows of 16-byte
// stores; the backward stages its hidden tile there first and overwrites it in place.
//
// The epilogue rounds to 16 bits where the separate kernels store, and applies their formulas
// (gelu.cuh) to the rounded values, so the outputs have the bits of the product and the GELU op run
// apart (up to the product's own order of summation).
//
// Needs sm_90a (wgmma): this file alone is compiled for it (cmake/cuda.cmake); elsewhere the
// kernels are empty and both calls decline, leaving the product and the pass.
//
// Measured on an H100 (docs/benchmarks.md, twenty-eighth section): char_gpt's bfloat16 step ran
// 1.4% slower with these kernels than with cuBLASLt's product and the GELU pass apart, 0.8% with
// the forward's alone. The forward is bound by issue: 28 instructions an output element in the
// epilogue, 17 of them the GELU's CDF, at half the issue slots; the backward's one block an SM
// waits on the side stream's weight gradients.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda/context.h"
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/gelu.cuh"
#include "ops/cuda/mma_ptx.cuh"
#include "ops/cuda/wgmma.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kRows = 64, kCols = 128, kStepK = 64, kStages = 3, kGroups = 3, kThreads = 128 * kGroups;
constexpr int kMaxK = 384;                                  // the weight's columns fit shared memory
constexpr int kStepBytes = kRows * kStepK * 2;              // a group's row slice for one k step
constexpr int kWeightStepBytes = kCols * kStepK * 2;        // the weight's columns over one k step
constexpr int kOutBytes = kRows * kCols * 2;                // a group's output tile
constexpr int kGroupBytes = kStages * kStepBytes + kOutBytes;
constexpr int shared_size(int k) { return 1024 + k / kStepK * kWeightStepBytes + kGroups * kGroupBytes + kCols * 2; }
static_assert(shared_size(kMaxK) <= 227 * 1024, "one block an SM");

enum class Epilogue { kGelu, kGeluBackward };

template <class T>
struct Params {
  const T* a;       // [M, K]
  const T* b;       // kGelu: w [N, K]; kGeluBackward: w2 [K, N]
  const T* bias;    // kGelu: [N] or null
  const T* hidden;  // kGeluBackward: the GELU's input [M, N]
  T* out;           // kGelu: hidden; kGeluBackward: the gradient of hidden
  T* activated;     // gelu(hidden) [M, N]; kGeluBackward: or null
  int m, n, k;
};

// Row r's 16-byte chunk c of an operand tile (128 bytes a row, k-major, the 128-byte swizzle of
// wgmma.cuh).
__device__ __forceinline__ uint32_t operand_at(uint32_t tile, int r, int c) { return tile + r * 128 + ((c ^ (r & 7)) << 4); }

// The weight's columns [n0, n0 + 128) over all of k, as k / 64 operand tiles of 128 rows.
// The forward's w is [N, K]: its rows are the tiles' rows, copied as they are.
template <class T>
__device__ __forceinline__ void stage_weight_rows(uint32_t tile, const T* w, int n0, int k) {
  const int chunks = k / 8;
  for (int i = static_cast<int>(threadIdx.x); i < kCols * chunks; i += kThreads) {
    const int r = i / chunks, kc = i % chunks;
    cp_async_16(operand_at(tile + kc / 8 * kWeightStepBytes, r, kc % 8), w + static_cast<size_t>(n0 + r) * k + kc * 8,
                true);
  }
}
// The backward's w2 is [K, N]: each thread reads 8 x 8 blocks (8 rows of k, 16 bytes of n each),
// transposes them in registers and writes 8 chunks of 8 k, consecutive threads along k so that a
// quarter warp's chunks fall on different banks.
template <class T>
__device__ __forceinline__ void stage_weight_columns(uint32_t tile, const T* w2, int n0, int k, int n) {
  const int blocks_k = k / 8;
  for (int u = static_cast<int>(threadIdx.x); u < blocks_k * (kCols / 8); u += kThreads) {
    const int kb = u % blocks_k, q = u / blocks_k;
    uint32_t w[8][4];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const uint4 v = *reinterpret_cast<const uint4*>(w2 + static_cast<size_t>(kb * 8 + r) * n + n0 + q * 8);
      w[r][0] = v.x, w[r][1] = v.y, w[r][2] = v.z, w[r][3] = v.w;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {  // column n0 + 8 q + e: its 8 values of k, two to a word
      uint32_t o[4];
#pragma unroll
      for (int p = 0; p < 4; ++p) o[p] = __byte_perm(w[2 * p][e / 2], w[2 * p + 1][e / 2], e % 2 ? 0x7632 : 0x5410);
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                       operand_at(tile + kb / 8 * kWeightStepBytes, q * 8 + e, kb % 8)),
                   "r"(o[0]), "r"(o[1]), "r"(o[2]), "r"(o[3])
                   : "memory");
    }
  }
}

// A group's 64 x 128 output tile of 16-bit elements: row r's 16-byte chunk c at
// r * 256 + ((c ^ (r % 8)) * 16), so that the epilogue's accesses (8 rows, 4 consecutive words
// each) hit 32 banks, as do 16-byte ones along a row.
__device__ __forceinline__ uint32_t tile_at(uint32_t tile, int r, int col) {
  return tile + r * 256 + ((((col >> 3) ^ (r & 7))) << 4) + (col & 7) * 2;
}
template <class T>
__device__ __forceinline__ void stage_hidden(uint32_t tile, const T* hidden, int m0, int n0, int m, int n, int gt) {
#pragma unroll
  for (int j = 0; j < kRows * 16 / 128; ++j) {
    const int i = gt + j * 128, r = i >> 4, c = i & 15;
    const bool in = m0 + r < m;
    cp_async_16(tile_at(tile, r, c * 8), hidden + static_cast<size_t>(in ? m0 + r : m0) * n + n0 + c * 8, in);
  }
}
template <class T>
__device__ __forceinline__ void store_tile(uint32_t tile, T* dst, int m0, int n0, int m, int n, int gt) {
#pragma unroll
  for (int j = 0; j < kRows * 16 / 128; ++j) {
    const int i = gt + j * 128, r = i >> 4, c = (i & 15) * 8;  // consecutive threads along a row
    if (m0 + r >= m) continue;
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(tile_at(tile, r, c))
                 : "memory");
    *reinterpret_cast<uint4*>(dst + static_cast<size_t>(m0 + r) * n + n0 + c) = v;
  }
}

// The 128 threads of group `group` wait for each other (barrier 0 is the block's).
__device__ __forceinline__ void group_barrier(int group) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(group + 1) : "memory");
}

// Two floats rounded to 16 bits (to nearest, ties to even, as T(float)) in one register, `lo` in
// the low half; and back.
template <class T>
__device__ __forceinline__ uint32_t pack_rounded(float lo, float hi) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}
template <class T>
__device__ __forceinline__ float2 unpack(uint32_t pair) {
  if constexpr (std::is_same_v<T, BFloat16>) return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
  else return __half22float2(*reinterpret_cast<const __half2*>(&pair));
}

// Grid: 128-column tiles along x; along y, the row tiles dealt out: block y takes tiles y,
// y + gridDim.y, ..., and hands them to its groups in turn.
template <class T, Epilogue E, bool kTanh>
__global__ void __launch_bounds__(kThreads, 1) linear_gelu_kernel(Params<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t shared_bytes[];
  const int t = static_cast<int>(threadIdx.x), group = t / 128, gt = t % 128;
  const int steps = p.k / kStepK, n0 = static_cast<int>(blockIdx.x) * kCols;
  const uint32_t weight = (smem_addr(shared_bytes) + 1023) & ~1023u;
  const uint32_t stages = weight + steps * kWeightStepBytes + group * kGroupBytes;
  const uint32_t out_tile = stages + kStages * kStepBytes;
  const uint32_t bias = weight + steps * kWeightStepBytes + kGroups * kGroupBytes;
  const int row_tiles = (p.m + kRows - 1) / kRows;
  const int first = static_cast<int>(blockIdx.y) + group * static_cast<int>(gridDim.y);
  const int stride = kGroups * static_cast<int>(gridDim.y);
  const int tiles = first < row_tiles ? (row_tiles - 1 - first) / stride + 1 : 0;
  const int total_steps = tiles * steps;  // this group's, over all its tiles
  wait_for_earlier_kernels();

  if constexpr (E == Epilogue::kGelu) {
    stage_weight_rows(weight, p.b, n0, p.k);
    if (p.bias && t < kCols / 8) cp_async_16(bias + t * 16, p.bias + n0 + t * 8, true);
  } else {
    stage_weight_columns(weight, p.b, n0, p.k, p.n);
  }
  cp_async_commit();
  // The group's steps run on from one tile into the next. The copies run two steps ahead of the
  // products, by a cursor over (tile, k slice, stage): the address of this thread's first row (of
  // 4, 16 apart) at the slice's k, and which of them lie inside the matrix, both made again only
  // when it moves to a new tile.
  const int thread_row = gt / 8;
  const uint32_t copy_offset = operand_at(0, thread_row, gt % 8);  // rows thread_row + 16 j lie 2048 j further
  const size_t rows16 = static_cast<size_t>(16) * p.k;
  int copy_m0 = first * kRows, copy_k0 = 0, copy_stage = 0, copies_left = total_steps;
  const T* copy_src = nullptr;
  unsigned copy_rows_in = 0;
  auto start_tile = [&] {
    copy_src = p.a + static_cast<size_t>(copy_m0 + thread_row) * p.k + (gt % 8) * 8;
    copy_rows_in = 0;
#pragma unroll
    for (int j = 0; j < kRows / 16; ++j) copy_rows_in |= (copy_m0 + thread_row + 16 * j < p.m ? 1u : 0u) << j;
  };
  if (copies_left > 0) start_tile();
  auto copy_ahead = [&] {
    if (copies_left == 0) return;
    const uint32_t dst = stages + copy_stage * kStepBytes + copy_offset;
#pragma unroll
    for (int j = 0; j < kRows / 16; ++j) {
      const bool in = (copy_rows_in >> j) & 1u;  // else zero-filled, nothing read
      cp_async_16(dst + 2048 * j, in ? copy_src + j * rows16 : p.a, in);
    }
    --copies_left;
    copy_k0 += kStepK;
    copy_src += kStepK;
    if (copy_k0 == p.k) {
      copy_k0 = 0, copy_m0 += stride * kRows;
      if (copies_left > 0) start_tile();
    }
    copy_stage = copy_stage == kStages - 1 ? 0 : copy_stage + 1;
  };
#pragma unroll
  for (int g = 0; g < kStages - 1; ++g) {
    copy_ahead();
    cp_async_commit();
  }
  cp_async_wait<kStages - 1>();  // the weight and bias
  fence_async_shared();
  __syncthreads();

  const int lane = gt % 32, warp = gt / 32;
  const int r_lo = warp * 16 + lane / 4;  // this thread's first row of the tile (and r_lo + 8)
  // Where this thread's pair of columns 8 j + 2 (lane % 4) of row r_lo (+ 8 half) lies in the output tile.
  const uint32_t out_row = out_tile + r_lo * 256 + (lane % 4) * 4;
  const auto out_at = [&](int j, int half) { return out_row + half * 2048 + ((j ^ (lane / 4)) << 4); };
  const bool with_activated = E == Epilogue::kGelu || p.activated != nullptr;
  const uint64_t a_descriptor = wgmma_descriptor(stages), b_descriptor = wgmma_descriptor(weight);
  int stage = 0;
  for (int i = 0; i < tiles; ++i) {
    const int m0 = (first + i * stride) * kRows;
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = 0.f;
    for (int s = 0; s < steps; ++s) {
      cp_async_wait<kStages - 2>();  // this thread's copies of this step have landed
      fence_async_shared();
      group_barrier(group);  // the group's have; and every warp has seen the step before last's products done
      const uint64_t a = a_descriptor + stage * (kStepBytes >> 4), b = b_descriptor + s * (kWeightStepBytes >> 4);
      wgmma_fence();
      wgmma_fence_operands(acc);
#pragma unroll
      for (int kk = 0; kk < kStepK / 16; ++kk) wgmma_m64n128k16<std::is_same_v<T, BFloat16>>(acc, a + 2 * kk, b + 2 * kk);
      wgmma_commit();
      // The step before's products are done (a warpgroup's wgmma completes as one), so its stage
      // takes the copies of the step after next while this step's run.
      wgmma_wait<1>();
      wgmma_fence_operands(acc);
      copy_ahead();
      // The backward's hidden tile, into the output tile the last epilogue has finished with.
      if (E == Epilogue::kGeluBackward && s == 0) stage_hidden(out_tile, p.hidden, m0, n0, p.m, p.n, gt);
      cp_async_commit();
      stage = stage == kStages - 1 ? 0 : stage + 1;
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    if (i == tiles - 1) let_next_kernel_start();
    if constexpr (E == Epilogue::kGeluBackward) {
      // The hidden tile's group is step 0's; steps - 1 groups came after it.
      if (steps >= kStages) cp_async_wait<kStages - 1>();
      else cp_async_wait<0>();
      group_barrier(group);
    }

    uint32_t activated[32];  // packed pairs, to the output tile once the first output has left it
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      float2 bias_pair = make_float2(0.f, 0.f);
      if constexpr (E == Epilogue::kGelu) {
        if (p.bias) {
          uint32_t pair;
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(pair) : "r"(bias + (j * 8 + (lane % 4) * 2) * 2) : "memory");
          bias_pair = unpack<T>(pair);
        }
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float v0 = acc[4 * j + 2 * half], v1 = acc[4 * j + 2 * half + 1];
        uint32_t out;
        if constexpr (E == Epilogue::kGelu) {
          out = pack_rounded<T>(v0 + bias_pair.x, v1 + bias_pair.y);
          const float2 x = unpack<T>(out);
          activated[2 * j + half] = kTanh ? pack_rounded<T>(d_gelu_tanh(x.x), d_gelu_tanh(x.y))
                                          : pack_rounded<T>(gelu_16bit(x.x), gelu_16bit(x.y));
        } else {
          uint32_t h;
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(h) : "r"(out_at(j, half)) : "memory");
          const float2 x = unpack<T>(h);
          // The product rounded as the product alone stores it, then the GELU's backward.
          float2 g = unpack<T>(pack_rounded<T>(v0, v1)), y;
          gelu_with_grad<kTanh, true>(x.x, y.x, g.x);
          gelu_with_grad<kTanh, true>(x.y, y.y, g.y);
          out = pack_rounded<T>(g.x, g.y);
          activated[2 * j + half] = pack_rounded<T>(y.x, y.y);
        }
        // In place over the backward's hidden: the same thread read these two elements just now.
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(out_at(j, half)), "r"(out) : "memory");
      }
    }
    group_barrier(group);
    store_tile(out_tile, p.out, m0, n0, p.m, p.n, gt);
    if (with_activated) {
      group_barrier(group);
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int half = 0; half < 2; ++half)
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(out_at(j, half)), "r"(activated[2 * j + half]) : "memory");
      group_barrier(group);
      store_tile(out_tile, p.activated, m0, n0, p.m, p.n, gt);
    }
    group_barrier(group);  // the output tile is free for the next tile's hidden
  }
#endif
}

template <class T, Epilogue E, bool kTanh>
void launch(const Params<T>& p, int device, cudaStream_t stream) {
  auto* kernel = linear_gelu_kernel<T, E, kTanh>;
  const int bytes = shared_size(p.k);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int column_tiles = p.n / kCols, row_tiles = (p.m + kRows - 1) / kRows;
  // One block an SM: as many row groups as the SMs left by the column tiles allow, and no more
  // than give each warpgroup a tile.
  const int row_groups =
      std::max(1, std::min(multiprocessor_count(device) / column_tiles, (row_tiles + kGroups - 1) / kGroups));
  const dim3 grid(static_cast<unsigned>(column_tiles), static_cast<unsigned>(row_groups));
  launch_early("linear_gelu_kernel", kernel, grid, kThreads, bytes, stream, p);
}

template <Epilogue E>
void launch(DType dtype, const Params<void>& untyped, bool tanh, int device, cudaStream_t stream) {
  dispatch_floating_and_half(dtype, "linear_gelu", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_16bit_float_v<T>) {
      const Params<T> p{static_cast<const T*>(untyped.a),      static_cast<const T*>(untyped.b),
                        static_cast<const T*>(untyped.bias),   static_cast<const T*>(untyped.hidden),
                        static_cast<T*>(untyped.out),          static_cast<T*>(untyped.activated),
                        untyped.m,                             untyped.n,
                        untyped.k};
      if (tanh) launch<T, E, true>(p, device, stream);
      else launch<T, E, false>(p, device, stream);
    }
  });
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether this file's kernels run on `device`: built as sm_90a code, which runs on compute
// capability 9.0 alone.
bool sm90a_device(int device) {
#ifdef MINIDL_SM90A
  int major = 0, minor = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 &&
         minor == 0;
#else
  (void)device;
  return false;
#endif
}

// Whether the kernels take these operands: 16-bit, contiguous, 16-byte aligned, an [m, n] output
// of tiles of 128 columns over k in steps of 64, at most kMaxK.
bool takes(DType dtype, int64_t m, int64_t n, int64_t k, std::initializer_list<const Tensor*> tensors) {
  if (dtype != kBFloat16 && dtype != kFloat16) return false;
  if (m == 0 || k == 0 || k % kStepK != 0 || k > kMaxK || n % kCols != 0) return false;
  if (m > INT32_MAX / 2 || n > INT32_MAX / 2 || k > INT32_MAX / 2) return false;
  for (const Tensor* t : tensors)
    if (t && (t->dtype() != dtype || !t->is_contiguous() || !aligned16(t->raw_data()))) return false;
  return true;
}

}  // namespace

bool CudaKernels::linear_gelu(const Tensor& x, const Tensor& w, const Tensor* bias, bool tanh, Tensor& hidden,
                              Tensor& activated) {
  if (x.dim() != 2 || w.dim() != 2) return false;
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  if (w.size(1) != k || hidden.numel() != m * n || activated.numel() != m * n || (bias && bias->numel() != n))
    return false;
  if (!takes(x.dtype(), m, n, k, {&x, &w, bias, &hidden, &activated}) || !sm90a_device(device_)) return false;
  cuda::DeviceGuard guard(device_);
  const Params<void> p{x.raw_data(), w.raw_data(), bias ? bias->raw_data() : nullptr, nullptr, hidden.raw_data(),
                       activated.raw_data(), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)};
  launch<Epilogue::kGelu>(x.dtype(), p, tanh, device_, stream_);
  return true;
}

bool CudaKernels::linear_gelu_backward(const Tensor& grad, const Tensor& w2, const Tensor& hidden, bool tanh,
                                       Tensor& grad_hidden, Tensor* activated) {
  if (grad.dim() != 2 || w2.dim() != 2) return false;
  const int64_t m = grad.size(0), k = grad.size(1), n = w2.size(1);
  if (w2.size(0) != k || hidden.numel() != m * n || grad_hidden.numel() != m * n ||
      (activated && activated->numel() != m * n))
    return false;
  if (!takes(grad.dtype(), m, n, k, {&grad, &w2, &hidden, &grad_hidden, activated}) || !sm90a_device(device_))
    return false;
  cuda::DeviceGuard guard(device_);
  const Params<void> p{grad.raw_data(),        w2.raw_data(),          nullptr,
                       hidden.raw_data(),      grad_hidden.raw_data(), activated ? activated->raw_data() : nullptr,
                       static_cast<int>(m),    static_cast<int>(n),    static_cast<int>(k)};
  launch<Epilogue::kGeluBackward>(grad.dtype(), p, tanh, device_, stream_);
  return true;
}

}  // namespace minidl
