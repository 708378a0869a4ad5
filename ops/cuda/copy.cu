// Copies (any strides, converting dtypes), fills, the slice gather of index_select and its adjoint
// index_add.
#include <cub/device/device_radix_sort.cuh>
#include <limits>
#include <type_traits>

#include "core/cuda/launch.cuh"
#include "core/deterministic.h"
#include "ops/cuda/common.cuh"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

using namespace cuda;

// A floating value goes to a narrow integer through int64, as on the CPU (ops/cpu/copy.cpp).
template <class D, class S>
__host__ __device__ D convert(S value) {
  if constexpr (is_16bit_float_v<S>) {  // through float32, so that it truncates as a float does
    return convert<D>(static_cast<float>(value));
  } else if constexpr (is_16bit_float_v<D>) {
    return D(static_cast<float>(value));  // as c10's conversions: a double rounds to float first
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool> &&
                !std::is_same_v<D, int64_t>) {
    return static_cast<D>(static_cast<int64_t>(value));
  } else {
    return static_cast<D>(value);
  }
}

template <class S, class D, class Index>
__global__ void copy_strided(const S* src, D* dst, Strided<2> m, Index n) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index off[2];
    strided_offsets(m, i, off);
    dst[off[0]] = convert<D>(src[off[1]]);
  }
}

// A dtype conversion between contiguous tensors, 8 elements a thread (16 bytes of the 16-bit side, 32
// of float32): the float32 <-> 16-bit casts around autocast. The strided walk, one element a thread,
// moved [16384, 384] float32 to bfloat16 at 1.5 TB/s on an H100.
template <class S, class D>
__global__ void convert_flat_vec(const S* src, D* dst, int64_t packs) {
  const auto* in = reinterpret_cast<const VecPack<S, 8>*>(src);
  auto* out = reinterpret_cast<VecPack<D, 8>*>(dst);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs; i += int64_t(gridDim.x) * blockDim.x) {
    const VecPack<S, 8> p = in[i];
    VecPack<D, 8> q;
#pragma unroll
    for (int k = 0; k < 8; ++k) q.v[k] = convert<D>(p.v[k]);
    out[i] = q;
  }
}

// copy_rows (cuda_kernels.h), on the elements' bits: a warp a row, each lane's loads before its stores.
template <class Bits>
__global__ void copy_rows_kernel(const Bits* src, int64_t src_ld, int64_t src_rows, int src_cols, Bits* dst,
                                 int64_t rows, int cols) {
  constexpr int kPerLane = 4;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; r < rows; r += warps) {
    const Bits* s = src + r * src_ld;
    Bits* d = dst + r * cols;
    const int copied = r < src_rows ? min(src_cols, cols) : 0;
    for (int c0 = 0; c0 < cols; c0 += 32 * kPerLane) {
      Bits v[kPerLane];
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int c = c0 + 32 * j + lane;
        v[j] = c < copied ? s[c] : Bits(0);
      }
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int c = c0 + 32 * j + lane;
        if (c < cols) d[c] = v[j];
      }
    }
  }
}

// Calls fn(S{}, D{}) for a float32 <-> bfloat16 / float16 pair; false for any other.
template <class Fn>
bool dispatch_widening_pair(DType src, DType dst, Fn&& fn) {
  if (src == kFloat32 && dst == kBFloat16) fn(float{}, BFloat16{});
  else if (src == kFloat32 && dst == kFloat16) fn(float{}, Half{});
  else if (src == kBFloat16 && dst == kFloat32) fn(BFloat16{}, float{});
  else if (src == kFloat16 && dst == kFloat32) fn(Half{}, float{});
  else return false;
  return true;
}

// The packed part of a contiguous float32 <-> 16-bit copy; how many elements it converted (0 where
// the pair or the alignment does not allow it).
int64_t convert_packed(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  const int64_t packs = dst.numel() / 8;
  if (packs == 0 || !src.is_contiguous() || !dst.is_contiguous()) return 0;
  int64_t done = 0;
  dispatch_widening_pair(src.dtype(), dst.dtype(), [&](auto src_tag, auto dst_tag) {
    using S = decltype(src_tag);
    using D = decltype(dst_tag);
    const S* from = ptr<const S>(src);
    D* to = ptr<D>(dst);
    if (!aligned_to(8 * sizeof(S), {from}) || !aligned_to(8 * sizeof(D), {to})) return;
    convert_flat_vec<S, D><<<blocks_for(packs), kThreads, 0, stream>>>(from, to, packs);
    CUDA_LAUNCH_CHECK(convert_flat_vec);
    done = packs * 8;
  });
  return done;
}

template <class T>
__global__ void fill_kernel(T* dst, T value, int64_t n) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

// Up to kScalarsPerLaunch one-element writes of one dtype, as one launch's arguments: the host's
// values reach the device with no copy from host memory.
constexpr int kScalarsPerLaunch = 8;
template <class T>
struct ScalarWrites {
  T* dst[kScalarsPerLaunch];
  T value[kScalarsPerLaunch];
  int count;
};

template <class T>
__global__ void fill_scalars_kernel(ScalarWrites<T> writes) {
  if (threadIdx.x < writes.count) *writes.dst[threadIdx.x] = writes.value[threadIdx.x];
}

template <class T>
__global__ void arange_kernel(T* dst, double start, double step, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = convert<T>(start + static_cast<double>(i) * step);
}

// One thread per gathered element: slice j of out takes slice index[j] of src. An index out of
// range fills its slice with zeros and is reported to the host (core/cuda/context.h).
template <class T>
__global__ void index_select_kernel(const T* src, const int64_t* index, T* out, IndexGeometry g,
                                    DeviceErrorReport error) {
  const int64_t n = g.outer * g.k * g.inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / g.inner, c = i - r * g.inner;
    const int64_t a = r / g.k, j = r - a * g.k;
    const int64_t s = index[j];
    if (s < 0 || s >= g.rows) {
      out[i] = T(0);
      if (c == 0) report_device_error(error, kIndexSelectIndex, j, s, g.rows);
    } else {
      out[i] = src[(a * g.rows + s) * g.inner + c];
    }
  }
}

// index_select along the first dim (outer == 1), the batch gather of training: whole slices
// copied in units V (16 bytes where the slice's size and the pointers allow), a thread per unit,
// with 32-bit index math.
template <class V>
__global__ void gather_slices_kernel(const V* src, const int64_t* index, V* out, int64_t rows, unsigned slice_units,
                                     unsigned total_units, DeviceErrorReport error) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  for (unsigned u = blockIdx.x * blockDim.x + threadIdx.x; u < total_units; u += gridDim.x * blockDim.x) {
    const unsigned j = u / slice_units, c = u - j * slice_units;
    const int64_t s = index[j];
    if (s >= 0 && s < rows) {
      out[u] = src[s * int64_t(slice_units) + c];
    } else {
      out[u] = V{};
      if (c == 0) report_device_error(error, kIndexSelectIndex, j, s, rows);
    }
  }
}

template <class V>
void launch_gather_slices(const void* src, const int64_t* index, void* out, int64_t rows, int64_t k,
                          int64_t slice_bytes, DeviceErrorReport error, cudaStream_t stream) {
  const auto units = static_cast<unsigned>(slice_bytes / int64_t(sizeof(V)));
  const auto total = static_cast<unsigned>(k * units);
  launch_early("gather_slices_kernel", gather_slices_kernel<V>, blocks_for(total), kThreads, 0, stream,
               static_cast<const V*>(src), index, static_cast<V*>(out), rows, units, total, error);
}

// The adjoint: one thread per element of src [outer, k, inner], added into dst at slice index[j].
// Atomics, because repeated indices send several threads to one element.
template <class T>
__global__ void index_add_kernel(const T* src, const int64_t* index, T* dst, IndexGeometry g,
                                 DeviceErrorReport error) {
  const int64_t n = g.outer * g.k * g.inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / g.inner, c = i - r * g.inner;
    const int64_t a = r / g.k, j = r - a * g.k;
    const int64_t s = index[j];
    if (s < 0 || s >= g.rows) {
      if (c == 0) report_device_error(error, kIndexAddIndex, j, s, g.rows);
    } else {
      atomicAdd(dst + (a * g.rows + s) * g.inner + c, src[i]);
    }
  }
}

__global__ void iota_kernel(int64_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = i;
}

// The adjoint without atomics, for deterministic mode: `sorted` is the index sorted stably and
// `order` where each of its entries came from, so the repeats of one index are a run in source
// order. One thread per (outer, run start, inner) element adds the run's slices in that order, as
// the CPU does, so every run gives the same bits.
template <class T>
__global__ void index_add_sorted_kernel(const T* src, const int64_t* sorted, const int64_t* order, T* dst,
                                        IndexGeometry g, DeviceErrorReport error) {
  const int64_t n = g.outer * g.k * g.inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / g.inner, c = i - r * g.inner;
    const int64_t a = r / g.k, p = r - a * g.k;
    const int64_t s = sorted[p];
    if (p > 0 && sorted[p - 1] == s) continue;  // not the start of a run
    if (s < 0 || s >= g.rows) {
      if (c == 0) report_device_error(error, kIndexAddIndex, order[p], s, g.rows);
      continue;
    }
    T* to = dst + (a * g.rows + s) * g.inner + c;
    T sum = *to;
    for (int64_t q = p; q < g.k && sorted[q] == s; ++q) sum += src[(a * g.k + order[q]) * g.inner + c];
    *to = sum;
  }
}

// index_add by sorting, for deterministic mode.
void index_add_deterministic(cudaStream_t stream, int device_index, const Tensor& src, const Tensor& index,
                             const IndexGeometry& g, Tensor& dst) {
  const Device device = dst.device();
  MINIDL_CHECK(g.k <= INT32_MAX, "index_add (deterministic mode): at most ", INT32_MAX, " indices, got ", g.k);
  const int k = static_cast<int>(g.k);  // CUB's item count
  Tensor sorted = Tensor::empty({g.k}, kInt64, device), order_in = Tensor::empty({g.k}, kInt64, device);
  Tensor order = Tensor::empty({g.k}, kInt64, device);
  iota_kernel<<<blocks_for(g.k), kThreads, 0, stream>>>(ptr<int64_t>(order_in), g.k);
  CUDA_LAUNCH_CHECK(iota_kernel);
  // Radix sort is stable: repeats keep their source order.
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ptr<const int64_t>(index), ptr<int64_t>(sorted),
                                             ptr<const int64_t>(order_in), ptr<int64_t>(order), k, 0,
                                             int(sizeof(int64_t) * 8), stream));
  Tensor temp = Tensor::empty({static_cast<int64_t>((temp_bytes + 7) / 8)}, kInt64, device);
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, ptr<const int64_t>(index), ptr<int64_t>(sorted),
                                             ptr<const int64_t>(order_in), ptr<int64_t>(order), k, 0,
                                             int(sizeof(int64_t) * 8), stream));
  const int64_t n = g.outer * g.k * g.inner;
  const DeviceErrorReport error = device_error_report(device_index);
  dispatch_floating(dst.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    index_add_sorted_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        ptr<const T>(src), ptr<const int64_t>(sorted), ptr<const int64_t>(order), ptr<T>(dst), g, error);
    CUDA_LAUNCH_CHECK(index_add_sorted_kernel);
  });
}

}  // namespace

void CudaKernels::copy(const Tensor& src, Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  if (const int64_t done = convert_packed(src, dst, stream_); done > 0) {
    if (done == n) return;
    // The tail (fewer than 8 elements), as flat views past the packed part.
    const Tensor src_tail = Tensor::make_view(src, {n - done}, {1}, src.offset() + done);
    Tensor dst_tail = Tensor::make_view(dst, {n - done}, {1}, dst.offset() + done);
    return copy(src_tail, dst_tail);
  }
  if (merged_rank<2>(dst.shape(), {&dst.strides(), &src.strides()}) > kMaxDims) {
    // More dims than one strided walk holds (a permuted tensor of 9+ dims): one copy per slice of
    // the outermost dim, each with a dim fewer.
    const Shape inner_shape(dst.shape().begin() + 1, dst.shape().end());
    const Strides dst_inner(dst.strides().begin() + 1, dst.strides().end());
    const Strides src_inner(src.strides().begin() + 1, src.strides().end());
    for (int64_t i = 0; i < dst.size(0); ++i) {
      Tensor d = Tensor::make_view(dst, inner_shape, dst_inner, dst.offset() + i * dst.strides()[0]);
      copy(Tensor::make_view(src, inner_shape, src_inner, src.offset() + i * src.strides()[0]), d);
    }
    return;
  }
  Strided<2> m = make_strided<2>(dst.shape(), {&dst.strides(), &src.strides()});
  const bool small = fits_32bit(m, n);
  dispatch_with_bool(src.dtype(), "copy", [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_with_bool(dst.dtype(), "copy", [&](auto dst_tag) {
      using D = decltype(dst_tag);
      if (small) {
        copy_strided<S, D, uint32_t><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const S>(src), ptr<D>(dst), m,
                                                                              static_cast<uint32_t>(n));
      } else {
        copy_strided<S, D, int64_t><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const S>(src), ptr<D>(dst), m, n);
      }
      CUDA_LAUNCH_CHECK(copy_strided);
    });
  });
}

bool CudaKernels::copy_rows(const Tensor& src, Tensor& dst) {
  if (src.dim() != 2 || dst.dim() != 2 || src.dtype() != dst.dtype() || !dst.is_contiguous() ||
      (src.size(1) > 1 && src.stride(1) != 1) || src.size(1) > INT32_MAX || dst.size(1) > INT32_MAX)
    return false;
  const int64_t rows = dst.size(0);
  const int cols = static_cast<int>(dst.size(1));
  if (rows == 0 || cols == 0) return true;
  cuda::DeviceGuard guard(device_);
  const unsigned blocks = blocks_for(rows * 32);
  auto launch = [&](auto bits) {
    using Bits = decltype(bits);
    copy_rows_kernel<Bits><<<blocks, kThreads, 0, stream_>>>(static_cast<const Bits*>(src.raw_data()), src.stride(0),
                                                              src.size(0), static_cast<int>(src.size(1)),
                                                              static_cast<Bits*>(dst.raw_data()), rows, cols);
    CUDA_LAUNCH_CHECK(copy_rows_kernel);
  };
  switch (element_size(dst.dtype())) {
    case 1: launch(uint8_t{}); break;
    case 2: launch(uint16_t{}); break;
    case 4: launch(uint32_t{}); break;
    case 8: launch(uint64_t{}); break;
    default: return false;
  }
  return true;
}

void CudaKernels::fill(Tensor& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  if (value == 0.0 && !std::signbit(value)) {  // +0.0 is all-zero bytes in every dtype
    CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), stream_));
    return;
  }
  dispatch_with_bool(dst.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    launch_early("fill_kernel", fill_kernel<T>, blocks_for(n), kThreads, 0, stream_, ptr<T>(dst), convert<T>(value),
                 n);
  });
}

void CudaKernels::fill_scalars(const std::vector<Tensor*>& dsts, const std::vector<double>& values) {
  cuda::DeviceGuard guard(device_);
  std::vector<bool> done(dsts.size(), false);
  for (size_t first = 0; first < dsts.size(); ++first) {  // one launch per dtype and 8 tensors
    if (done[first]) continue;
    dispatch_with_bool(dsts[first]->dtype(), "fill_scalars", [&](auto tag) {
      using T = decltype(tag);
      ScalarWrites<T> writes{};
      auto flush = [&] {
        fill_scalars_kernel<T><<<1, kScalarsPerLaunch, 0, stream_>>>(writes);
        CUDA_LAUNCH_CHECK(fill_scalars_kernel);
        writes.count = 0;
      };
      for (size_t i = first; i < dsts.size(); ++i) {
        if (done[i] || dsts[i]->dtype() != dsts[first]->dtype()) continue;
        writes.dst[writes.count] = ptr<T>(*dsts[i]);
        writes.value[writes.count] = convert<T>(values[i]);
        done[i] = true;
        if (++writes.count == kScalarsPerLaunch) flush();
      }
      if (writes.count > 0) flush();
    });
  }
}

void CudaKernels::arange(Tensor& dst, double start, double step) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_all_and_half(dst.dtype(), "arange", [&](auto tag) {
    using T = decltype(tag);
    arange_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<T>(dst), start, step, n);
    CUDA_LAUNCH_CHECK(arange_kernel);
  });
}

void CudaKernels::index_select(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) {
  const IndexGeometry g = index_geometry(src.shape(), dim, index.numel());
  const int64_t n = g.outer * g.k * g.inner;
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  const cuda::DeviceErrorReport error = cuda::device_error_report(device_);
  const int64_t slice_bytes = g.inner * static_cast<int64_t>(element_size(src.dtype()));
  if (g.outer == 1 && g.k * slice_bytes <= std::numeric_limits<int>::max()) {
    const auto aligned = [&](int64_t unit) {
      return slice_bytes % unit == 0 && reinterpret_cast<uintptr_t>(src.raw_data()) % unit == 0 &&
             reinterpret_cast<uintptr_t>(out.raw_data()) % unit == 0;
    };
    const int64_t* idx = ptr<const int64_t>(index);
    if (aligned(16)) launch_gather_slices<uint4>(src.raw_data(), idx, out.raw_data(), g.rows, g.k, slice_bytes, error, stream_);
    else if (aligned(8)) launch_gather_slices<uint2>(src.raw_data(), idx, out.raw_data(), g.rows, g.k, slice_bytes, error, stream_);
    else if (aligned(4)) launch_gather_slices<unsigned>(src.raw_data(), idx, out.raw_data(), g.rows, g.k, slice_bytes, error, stream_);
    else launch_gather_slices<unsigned char>(src.raw_data(), idx, out.raw_data(), g.rows, g.k, slice_bytes, error, stream_);
    return;
  }
  dispatch_with_bool(src.dtype(), "index_select", [&](auto tag) {
    using T = decltype(tag);
    index_select_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(src), ptr<const int64_t>(index),
                                                                    ptr<T>(out), g, error);
    CUDA_LAUNCH_CHECK(index_select_kernel);
  });
}

void CudaKernels::index_add(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst) {
  if (is_reduced_floating(dst.dtype())) {  // accumulated in float32, rounded once (ops/widen_16bit.h)
    Widened w(*this);
    Tensor dst32 = w.output(dst);
    index_add(w.input(src), dim, index, dst32);
    return w.finish();
  }
  const IndexGeometry g = index_geometry(dst.shape(), dim, index.numel());
  const int64_t n = g.outer * g.k * g.inner;
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  const cuda::DeviceErrorReport error = cuda::device_error_report(device_);
  if (is_deterministic()) {
    index_add_deterministic(stream_, device_, src, index, g, dst);
    return;
  }
  dispatch_floating(dst.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    index_add_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(src), ptr<const int64_t>(index),
                                                                ptr<T>(dst), g, error);
    CUDA_LAUNCH_CHECK(index_add_kernel);
  });
}


}  // namespace minidl
