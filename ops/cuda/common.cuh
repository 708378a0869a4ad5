#pragma once
// Shared pieces of the .cu kernels: launch sizes, typed math, and the strided index walk used by
// elementwise and copy kernels (shape and strides passed by value, up to kMaxDims dims after
// merging the dims that are contiguous in every operand).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "ops/cuda/cuda_kernels.h"

namespace minidl::cuda {

constexpr int kThreads = 256;
// Grid-stride loops cover any size; more blocks than this only add scheduling cost.
constexpr int64_t kMaxBlocks = 65535;

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(b, 1, kMaxBlocks));
}

// A window geometry (ops/window.h) in a kernel's index type: 32-bit when every index fits (the usual
// case: 64-bit division is emulated and several times slower), else 64-bit.
template <class I>
struct Geo {
  I height, width, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, out_h, out_w;
  explicit Geo(const ConvGeometry& g)
      : height(I(g.height)), width(I(g.width)), kernel_h(I(g.kernel_h)), kernel_w(I(g.kernel_w)),
        stride_h(I(g.stride_h)), stride_w(I(g.stride_w)), pad_h(I(g.pad_h)), pad_w(I(g.pad_w)),
        dilation_h(I(g.dilation_h)), dilation_w(I(g.dilation_w)), out_h(I(g.out_h)), out_w(I(g.out_w)) {}
};

// Float-or-double math that picks the single-precision function for float.
__device__ __forceinline__ float d_exp(float x) { return expf(x); }
__device__ __forceinline__ double d_exp(double x) { return exp(x); }
__device__ __forceinline__ float d_log(float x) { return logf(x); }
__device__ __forceinline__ double d_log(double x) { return log(x); }
__device__ __forceinline__ float d_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double d_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float d_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double d_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float d_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double d_pow(double a, double b) { return pow(a, b); }
template <class T>
__device__ __forceinline__ bool d_isnan(T x) {
  if constexpr (std::is_floating_point_v<T> || is_16bit_float_v<T>) return x != x;
  else return false;
}
template <class T>
__device__ __forceinline__ T d_infinity() {
  if constexpr (std::is_same_v<T, float>) return __int_as_float(0x7f800000);
  else return __longlong_as_double(0x7ff0000000000000LL);
}

/// float sums accumulate in double (as the CPU kernels do); double in double; the 16-bit types in float.
template <class T>
using AccT = std::conditional_t<std::is_same_v<T, float>, double, compute_t<T>>;

/// V elements moved by one load or store (VecPack<Half, 8>: 16 bytes): the memory-bound kernels' 16-bit
/// paths use it so that they move as many bytes per instruction as a float4 would.
template <class T, int V>
struct alignas(sizeof(T) * V) VecPack {
  T v[V];
};

/// True when every pointer is aligned for a VecPack of `bytes` bytes.
inline bool aligned_to(int64_t bytes, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) != 0) return false;
  return true;
}

constexpr int kMaxDims = 8;

/// Shape and per-operand strides of K operands, innermost dim first, dims merged where possible.
template <int K>
struct Strided {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[K][kMaxDims] = {};
};

/// How many dims make_strided would keep: above kMaxDims, a caller can split the work instead.
template <int K>
int merged_rank(const Shape& shape, const std::array<const Strides*, K>& strides) {
  int rank = 0;
  int64_t inner_size = 0;
  int64_t inner_stride[K] = {};
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    const int64_t n = shape[static_cast<size_t>(d)];
    if (n == 1) continue;
    bool merge = rank > 0;
    for (int k = 0; k < K && merge; ++k) merge = (*strides[k])[static_cast<size_t>(d)] == inner_stride[k] * inner_size;
    if (merge) {
      inner_size *= n;
      continue;
    }
    ++rank;
    inner_size = n;
    for (int k = 0; k < K; ++k) inner_stride[k] = (*strides[k])[static_cast<size_t>(d)];
  }
  return rank;
}

/// Builds a Strided<K> for `shape`, dropping size-1 dims and merging a dim into the next inner one
/// when every operand steps through both as one. Throws if more than kMaxDims dims remain.
template <int K>
Strided<K> make_strided(const Shape& shape, const std::array<const Strides*, K>& strides) {
  Strided<K> m;
  // Walk from the innermost dim outward.
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    const int64_t n = shape[static_cast<size_t>(d)];
    if (n == 1) continue;
    if (m.rank > 0) {
      bool merge = true;
      for (int k = 0; k < K; ++k) {
        merge = merge && (*strides[k])[static_cast<size_t>(d)] == m.stride[k][m.rank - 1] * m.size[m.rank - 1];
      }
      if (merge) {
        m.size[m.rank - 1] *= n;
        continue;
      }
    }
    MINIDL_CHECK(m.rank < kMaxDims, "CUDA elementwise kernels handle at most ", kMaxDims,
                 " non-mergeable dims; got shape ", shape);
    m.size[m.rank] = n;
    for (int k = 0; k < K; ++k) m.stride[k][m.rank] = (*strides[k])[static_cast<size_t>(d)];
    ++m.rank;
  }
  return m;
}

/// True when every offset of the walk fits in 32 bits, so the index math can use 32-bit division.
template <int K>
bool fits_32bit(const Strided<K>& m, int64_t numel) {
  if (numel >= (int64_t{1} << 31)) return false;
  for (int k = 0; k < K; ++k) {
    int64_t span = 0;
    for (int d = 0; d < m.rank; ++d) span += (m.size[d] - 1) * m.stride[k][d];
    if (span >= (int64_t{1} << 31)) return false;
  }
  return true;
}

/// Element offsets of linear (row-major) index i in each operand.
template <class Index, int K>
__device__ __forceinline__ void strided_offsets(const Strided<K>& m, Index i, Index (&off)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
#pragma unroll
  for (int d = 0; d < kMaxDims; ++d) {
    if (d >= m.rank) break;
    const Index n = static_cast<Index>(m.size[d]);
    const Index q = i / n;
    const Index r = i - q * n;
    i = q;
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += r * static_cast<Index>(m.stride[k][d]);
  }
}

/// Counters for reductions finished by their last block: a group of blocks leaves partial sums in
/// scratch memory, and the block that counts itself last adds them up in a fixed order (so the
/// result does not depend on which block ran when). kMaxCounterGroups per device, zero between
/// launches: the last block of each group resets its counter.
constexpr int64_t kMaxCounterGroups = 1 << 13;
/// Counters past the groups, each for the one kernel that names it (none may run beside itself).
enum ReservedCounter : unsigned { kGradNormCounter = kMaxCounterGroups, kReservedCounterEnd };
unsigned* block_counters(int device, cudaStream_t stream);

/// Call from every thread of each block of a group once its partial sums are stored: true in all
/// threads of the group's last block. The partial sums of the others are then visible to it.
__device__ __forceinline__ bool last_block_of_group(unsigned* counters, unsigned group, unsigned blocks) {
  __shared__ bool last;
  __threadfence();  // this block's partial sums are visible before the counter says so
  __syncthreads();
  const bool first_thread = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
  if (first_thread) {
    last = atomicAdd(&counters[group], 1u) == blocks - 1;
    if (last) counters[group] = 0;  // every block of the group has counted: ready for the next launch
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

/// Reports an error a kernel found in its data (core/cuda/context.h): the first reporter of a
/// synchronization window writes the bad element's position, value and the range it broke.
__device__ __forceinline__ void report_device_error(const DeviceErrorReport& report, DeviceError code,
                                                    int64_t position, int64_t value, int64_t limit) {
  if (atomicAdd(report.claim, 1u) != 0) return;
  report.detail[0] = position;
  report.detail[1] = value;
  report.detail[2] = limit;
  __threadfence_system();  // the detail is visible to the host before the code says it is there
  *report.code = code;
}

/// The element pointer of a tensor with the given C++ type (device memory).
template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace minidl::cuda
