// The first layer of a transformer's MLP with its GELU in the product's epilogue, on Hopper's
// warpgroup tensor cores, forward and backward:
//   linear_gelu:          hidden = x w^T (+ bias), activated = gelu(hidden);
//   linear_gelu_backward: grad_hidden = (grad w2) * gelu'(hidden), and activated again if asked.
// Apart, cuBLASLt's product writes its result and a GELU pass reads it back: for char_gpt's
// [16384, 384] x [384, 1536] in bfloat16 those passes took 35 us of a layer's forward and 47-69 us
// of its backward (docs/benchmarks.md). cuBLASLt's own GELU epilogues compute the tanh form only,
// and cuDNN's fused matmul with the exact form ran slower than the two apart.
//
// A block of 256 threads (two warpgroups) makes a 128 x 128 tile: each warpgroup 64 rows, over k in
// steps of 64 whose operand tiles cp.async stages into shared memory three deep (96 KB, so two
// blocks share an SM and one's epilogue runs beside the other's products). The backward's hidden
// tile is staged too, into the stage the last steps leave free; the outputs leave through the other
// two stages, in whole rows of 16-byte stores. The epilogue rounds to 16 bits where
// the separate kernels would store, and applies their formulas (gelu.cuh) to the rounded values,
// so the outputs have the bits of the product and the GELU op run apart (up to the product's own
// order of summation).
//
// Needs sm_90a (wgmma): this file alone is compiled for it (cmake/cuda.cmake); elsewhere the
// kernels are empty and both calls decline, leaving the product and the pass.
#include <cuda_runtime.h>

#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/gelu.cuh"
#include "ops/cuda/mma_ptx.cuh"
#include "ops/cuda/wgmma.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 64, kStages = 3, kThreads = 256;
constexpr int kTileBytes = kBlockM * kBlockK * 2;  // one operand's tile (kBlockM == kBlockN)
constexpr int kStageBytes = 2 * kTileBytes;
constexpr int kSharedBytes = kStages * kStageBytes + 1024;  // and room to align the tiles to 1024 bytes
static_assert(kBlockM == kBlockN, "the two operands' tiles share a size");
static_assert(kBlockM * kBlockN * 2 <= kStageBytes, "the backward's hidden tile fits in a stage");

enum class Epilogue { kGelu, kGeluBackward };

template <class T>
struct Params {
  const T* a;       // [M, K]
  const T* b;       // [N, K]
  const T* bias;    // kGelu: [N] or null
  const T* hidden;  // kGeluBackward: the GELU's input [M, N]
  T* out;           // kGelu: hidden; kGeluBackward: the gradient of hidden
  T* activated;     // gelu(hidden) [M, N]; kGeluBackward: or null
  int m, n, k;
};

// Rows [row0, row0 + 128) by k [k0, k0 + 64) of a row-major [rows, k] matrix into a swizzled tile
// (wgmma.cuh); rows past the end are zero-filled from row0's address.
template <class T>
__device__ __forceinline__ void stage_tile(uint32_t tile, const T* src, int row0, int rows, int k, int k0) {
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kBlockM * 8 / kThreads; ++j) {
    const int i = t + j * kThreads, r = i >> 3, c = i & 7;
    const bool in = row0 + r < rows;
    cp_async_16(tile + r * 128 + ((c ^ (r & 7)) << 4), src + static_cast<size_t>(in ? row0 + r : row0) * k + k0 + c * 8,
                in);
  }
}

// A 128 x 128 tile of 16-bit elements in shared memory (the backward's hidden, and the outputs on
// their way out): row r's 16-byte chunk c at r * 256 + ((c ^ (r % 8)) * 16), so that the epilogue's
// accesses (8 rows, 4 consecutive words each) hit 32 banks, as do 16-byte ones along a row.
__device__ __forceinline__ uint32_t tile_at(uint32_t tile, int r, int col) {
  return tile + r * 256 + ((((col >> 3) ^ (r & 7))) << 4) + (col & 7) * 2;
}
template <class T>
__device__ __forceinline__ void stage_hidden(uint32_t tile, const T* hidden, int m0, int n0, int m, int n) {
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kBlockM * 16 / kThreads; ++j) {
    const int i = t + j * kThreads, r = i >> 4, c = i & 15;
    const bool in = m0 + r < m;
    cp_async_16(tile_at(tile, r, c * 8), hidden + static_cast<size_t>(in ? m0 + r : m0) * n + n0 + c * 8, in);
  }
}

template <class T>
__device__ __forceinline__ uint32_t pack(T lo, T hi) {
  return static_cast<uint32_t>(lo.bits) | static_cast<uint32_t>(hi.bits) << 16;
}

template <class T, Epilogue E, bool kTanh>
__global__ void __launch_bounds__(kThreads, 2) linear_gelu_kernel(Params<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t shared_bytes[];
  const uint32_t tiles = (smem_addr(shared_bytes) + 1023) & ~1023u;
  const int t = static_cast<int>(threadIdx.x), group = t / 128;
  const int n0 = static_cast<int>(blockIdx.x) * kBlockN, m0 = static_cast<int>(blockIdx.y) * kBlockM;
  const int steps = p.k / kBlockK;
  wait_for_earlier_kernels();
  auto stage = [&](int step) {
    const uint32_t s = tiles + (step % kStages) * kStageBytes;
    stage_tile(s, p.a, m0, p.m, p.k, step * kBlockK);
    stage_tile(s + kTileBytes, p.b, n0, p.n, p.k, step * kBlockK);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) stage(s);
    cp_async_commit();
  }
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  // The backward stages its hidden tile in the first step that refills no stage, into that stage.
  const int hidden_step = max(steps - (kStages - 1), 0);
  const uint32_t hidden_tile = tiles + ((hidden_step + kStages - 1) % kStages) * kStageBytes;
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();  // this thread's copies of `step` have landed
    fence_async_shared();
    __syncthreads();  // everyone's have; and the stage refilled below was last read by step - 1's wait
    if (step + kStages - 1 < steps) stage(step + kStages - 1);
    else if (E == Epilogue::kGeluBackward && step == hidden_step) stage_hidden(hidden_tile, p.hidden, m0, n0, p.m, p.n);
    cp_async_commit();
    const uint32_t s = tiles + (step % kStages) * kStageBytes;
    const uint64_t a = wgmma_descriptor(s + group * 64 * 128), b = wgmma_descriptor(s + kTileBytes);
    wgmma_fence();
    wgmma_fence_operands(acc);
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) wgmma_m64n128k16<std::is_same_v<T, BFloat16>>(acc, a + 2 * kk, b + 2 * kk);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
  }
  let_next_kernel_start();
  cp_async_wait<0>();  // the backward's hidden tile
  __syncthreads();     // and every warpgroup's products are done with the stages

  // The outputs go through shared memory, so that their stores to global memory are whole rows of
  // 16-byte chunks rather than the accumulators' 4-byte pairs, eight rows apart. Each takes a stage
  // of its own (the backward's hidden tile keeps its stage).
  const int free_stage = E == Epilogue::kGeluBackward ? (hidden_step + kStages) % kStages : 0;
  const uint32_t out_tile = tiles + free_stage * kStageBytes;
  const uint32_t activated_tile = tiles + ((free_stage + 1) % kStages) * kStageBytes;
  const int lane = t % 32, warp = (t % 128) / 32;
  const int r_lo = group * 64 + warp * 16 + lane / 4;  // within the tile
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int c = j * 8 + (lane % 4) * 2;
    float b0 = 0.f, b1 = 0.f;
    if constexpr (E == Epilogue::kGelu)
      if (p.bias) b0 = static_cast<float>(p.bias[n0 + c]), b1 = static_cast<float>(p.bias[n0 + c + 1]);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = r_lo + half * 8;
      const float v0 = acc[4 * j + 2 * half], v1 = acc[4 * j + 2 * half + 1];
      uint32_t out, activated;
      if constexpr (E == Epilogue::kGelu) {
        const T h0(v0 + b0), h1(v1 + b1);
        const float x0 = static_cast<float>(h0), x1 = static_cast<float>(h1);
        out = pack(h0, h1);
        activated = pack(T(kTanh ? d_gelu_tanh(x0) : gelu_16bit(x0)), T(kTanh ? d_gelu_tanh(x1) : gelu_16bit(x1)));
      } else {
        uint32_t h;
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(h) : "r"(tile_at(hidden_tile, r, c)) : "memory");
        const float x0 = static_cast<float>(T::from_bits(static_cast<uint16_t>(h & 0xffffu)));
        const float x1 = static_cast<float>(T::from_bits(static_cast<uint16_t>(h >> 16)));
        // The product rounded as the product alone stores it, then the GELU's backward.
        float g0 = static_cast<float>(T(v0)), g1 = static_cast<float>(T(v1)), y0, y1;
        gelu_with_grad<kTanh, true>(x0, y0, g0);
        gelu_with_grad<kTanh, true>(x1, y1, g1);
        out = pack(T(g0), T(g1));
        activated = pack(T(y0), T(y1));
      }
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(tile_at(out_tile, r, c)), "r"(out) : "memory");
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(tile_at(activated_tile, r, c)), "r"(activated) : "memory");
    }
  }
  __syncthreads();
  const bool with_activated = E == Epilogue::kGelu || p.activated != nullptr;
#pragma unroll
  for (int j = 0; j < kBlockM * 16 / kThreads; ++j) {
    const int i = t + j * kThreads, r = i >> 4, c = (i & 15) * 8;  // consecutive threads along a row
    if (m0 + r >= p.m) continue;
    const size_t at = static_cast<size_t>(m0 + r) * p.n + n0 + c;
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(tile_at(out_tile, r, c))
                 : "memory");
    *reinterpret_cast<uint4*>(p.out + at) = v;
    if (with_activated) {
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(tile_at(activated_tile, r, c))
                   : "memory");
      *reinterpret_cast<uint4*>(p.activated + at) = v;
    }
  }
#endif
}

template <class T, Epilogue E, bool kTanh>
void launch(const Params<T>& p, cudaStream_t stream) {
  auto* kernel = linear_gelu_kernel<T, E, kTanh>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  const dim3 grid(static_cast<unsigned>(p.n / kBlockN), static_cast<unsigned>((p.m + kBlockM - 1) / kBlockM));
  launch_early("linear_gelu_kernel", kernel, grid, kThreads, kSharedBytes, stream, p);
}

template <Epilogue E>
void launch(DType dtype, const Params<void>& untyped, bool tanh, cudaStream_t stream) {
  dispatch_floating_and_half(dtype, "linear_gelu", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_16bit_float_v<T>) {
      const Params<T> p{static_cast<const T*>(untyped.a),      static_cast<const T*>(untyped.b),
                        static_cast<const T*>(untyped.bias),   static_cast<const T*>(untyped.hidden),
                        static_cast<T*>(untyped.out),          static_cast<T*>(untyped.activated),
                        untyped.m,                             untyped.n,
                        untyped.k};
      if (tanh) launch<T, E, true>(p, stream);
      else launch<T, E, false>(p, stream);
    }
  });
}

// A transposed copy of a 16-bit [rows, cols] matrix, in 32 x 32 tiles through shared memory: the
// backward's w2 [K, N] as the [N, K] operand the kernel reads.
__global__ void transpose_16bit_kernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst, int rows,
                                       int cols) {
  __shared__ uint16_t tile[32][33];
  wait_for_earlier_kernels();
  const int c0 = static_cast<int>(blockIdx.x) * 32, r0 = static_cast<int>(blockIdx.y) * 32;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int i = ty; i < 32; i += 8)
    if (r0 + i < rows && c0 + tx < cols) tile[i][tx] = src[static_cast<size_t>(r0 + i) * cols + c0 + tx];
  __syncthreads();
  let_next_kernel_start();
  for (int i = ty; i < 32; i += 8)
    if (c0 + i < cols && r0 + tx < rows) dst[static_cast<size_t>(c0 + i) * rows + r0 + tx] = tile[tx][i];
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
// of tiles of 128 columns over k in steps of 64.
bool takes(DType dtype, int64_t m, int64_t n, int64_t k, std::initializer_list<const Tensor*> tensors) {
  if (dtype != kBFloat16 && dtype != kFloat16) return false;
  if (m == 0 || k == 0 || k % kBlockK != 0 || n % kBlockN != 0) return false;
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
  launch<Epilogue::kGelu>(x.dtype(), p, tanh, stream_);
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
  Tensor w2_t = Tensor::empty({n, k}, w2.dtype(), w2.device());
  launch_early("transpose_16bit_kernel", transpose_16bit_kernel,
               dim3(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>((k + 31) / 32)), dim3(32, 8), 0,
               stream_, static_cast<const uint16_t*>(w2.raw_data()), static_cast<uint16_t*>(w2_t.raw_data()),
               static_cast<int>(k), static_cast<int>(n));
  const Params<void> p{grad.raw_data(),        w2_t.raw_data(),    nullptr,
                       hidden.raw_data(),      grad_hidden.raw_data(), activated ? activated->raw_data() : nullptr,
                       static_cast<int>(m),    static_cast<int>(n), static_cast<int>(k)};
  launch<Epilogue::kGeluBackward>(grad.dtype(), p, tanh, stream_);
  return true;
}

}  // namespace minidl
