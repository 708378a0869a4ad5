// Gather and scatter along a dim over an index of any strides, and nonzero.
//  - gather, and scatter without accumulation: one thread per index position.
//  - scatter_add: one thread per position, atomics where the type has them (so float sums may
//    differ in the last bits run to run). In deterministic mode, and for the byte types, one thread
//    per line along `dim` instead: two positions meet at one destination only within a line, so
//    each thread writes its line alone, in index order, as the CPU does. scatter_reduce's product,
//    maximum and minimum always run that way.
//  - nonzero: cub::DeviceSelect picks the flat positions, then a kernel spreads them into
//    coordinates. The count decides the output's size, so the host waits for it.
// Indices were checked by the op; a kernel skips any out of range rather than touch other memory.
#include <thrust/iterator/counting_iterator.h>

#include <cub/device/device_select.cuh>
#include <limits>
#include <type_traits>

#include "core/deterministic.h"
#include "ops/cuda/common.cuh"
#include "ops/scan_step.h"

namespace minidl {

namespace {

using namespace cuda;

// Index positions and the offsets they map to: `a` is the indexed tensor (src of gather, dst of
// scatter) with its stride along dim zeroed, `b` the other (out of gather, src of scatter).
struct ScatterGeo {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t index_stride[kMaxDims] = {};
  int64_t a_stride[kMaxDims] = {};
  int64_t b_stride[kMaxDims] = {};
  int64_t step = 0;  // a's stride along dim
  int64_t rows = 0;  // a's size along dim
};

ScatterGeo make_scatter_geo(const Tensor& index, const Tensor& a, const Strides& b_strides, int64_t dim, const char* what) {
  ScatterGeo g;
  g.rank = static_cast<int>(index.dim());
  MINIDL_CHECK(g.rank <= kMaxDims, what, " on CUDA: at most ", kMaxDims, " dims, got ", g.rank);
  for (int d = 0; d < g.rank; ++d) {
    g.size[d] = index.shape()[d];
    g.index_stride[d] = index.strides()[d];
    g.a_stride[d] = d == dim ? 0 : a.strides()[d];
    g.b_stride[d] = b_strides[d];
  }
  g.step = a.strides()[static_cast<size_t>(dim)];
  g.rows = a.size(dim);
  return g;
}

__device__ __forceinline__ void offsets(const ScatterGeo& g, int64_t i, int64_t& oi, int64_t& oa, int64_t& ob) {
  oi = oa = ob = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t c = i % g.size[d];
    i /= g.size[d];
    oi += c * g.index_stride[d];
    oa += c * g.a_stride[d];
    ob += c * g.b_stride[d];
  }
}

template <class T>
__global__ void gather_kernel(const T* src, const int64_t* index, T* out, ScatterGeo g, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t oi, oa, ob;
    offsets(g, i, oi, oa, ob);
    const int64_t q = index[oi];
    out[ob] = q >= 0 && q < g.rows ? src[oa + q * g.step] : T(0);
  }
}

// A 16-bit add as a compare-and-swap on the aligned 32-bit word that holds it (any architecture):
// the sum is computed in float and rounded once, as the other kernels do.
template <class T>
__device__ __forceinline__ void atomic_add_16bit(T* to, float v) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(to);
  unsigned* word = reinterpret_cast<unsigned*>(address & ~uintptr_t(3));
  const unsigned shift = (address & 2) ? 16u : 0u;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    const T current = T::from_bits(static_cast<uint16_t>(assumed >> shift));
    const unsigned sum = T(static_cast<float>(current) + v).bits;
    old = atomicCAS(word, assumed, (assumed & ~(0xffffu << shift)) | (sum << shift));
  } while (assumed != old);
}

template <class T>
__device__ __forceinline__ void atomic_add(T* to, T v) {
  if constexpr (is_16bit_float_v<T>) {
    atomic_add_16bit(to, static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(to), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(to, v);
  }
}

template <class T>
constexpr bool kHasAtomicAdd = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                               std::is_same_v<T, int32_t> || is_16bit_float_v<T>;

// One thread per position: a plain store (repeats race, one of them wins) or an atomic add.
template <class T, bool kAdd>
__global__ void scatter_kernel(const T* src, const int64_t* index, T* dst, ScatterGeo g, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t oi, oa, ob;
    offsets(g, i, oi, oa, ob);
    const int64_t q = index[oi];
    if (q < 0 || q >= g.rows) continue;
    if constexpr (kAdd) atomic_add(dst + oa + q * g.step, src[ob]);
    else dst[oa + q * g.step] = src[ob];
  }
}

// How the line kernel writes a destination: a store, an add, or scatter_reduce's steps.
template <class T>
struct Store {
  __device__ void operator()(T& to, const T& from) const { to = from; }
};
template <class T>
struct Add {
  __device__ void operator()(T& to, const T& from) const { to = static_cast<T>(to + from); }
};
template <class T, ScanOp kOp>
struct Reduce {
  __device__ void operator()(T& to, const T& from) const {
    using Acc = compute_t<T>;
    to = static_cast<T>(ScanStep<Acc, kOp>()(static_cast<Acc>(to), static_cast<Acc>(from)));
  }
};

// One thread per line along dim (`g` has size 1 there; `len`, `index_step`, `src_step` describe the
// line), writing its destinations in index order.
template <class T, class Step>
__global__ void scatter_lines_kernel(const T* src, const int64_t* index, T* dst, ScatterGeo g, int64_t lines, int64_t len,
                                     int64_t index_step, int64_t src_step) {
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < lines; l += int64_t(gridDim.x) * blockDim.x) {
    int64_t oi, oa, ob;
    offsets(g, l, oi, oa, ob);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t q = index[oi + j * index_step];
      if (q < 0 || q >= g.rows) continue;
      Step()(dst[oa + q * g.step], src[ob + j * src_step]);
    }
  }
}

template <class T>
struct IsNonzero {
  const T* x;
  __device__ bool operator()(int64_t i) const { return x[i] != T(0); }
};

__global__ void unravel_kernel(const int64_t* flat, int64_t count, ScatterGeo g, int64_t* out) {
  const int64_t n = count * g.rank;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / g.rank;
    const int d = static_cast<int>(i - r * g.rank);
    int64_t rem = flat[r];
    for (int e = g.rank - 1; e > d; --e) rem /= g.size[e];
    out[i] = rem % g.size[d];
  }
}

template <class T, class Step>
void launch_scatter_lines(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, ScatterGeo g,
                          cudaStream_t stream) {
  ScatterGeo lines = g;
  const int64_t len = g.size[dim];
  lines.size[dim] = 1;
  const int64_t count = index.numel() / len;
  scatter_lines_kernel<T, Step><<<blocks_for(count), kThreads, 0, stream>>>(ptr<const T>(src), ptr<const int64_t>(index),
                                                                             ptr<T>(dst), lines, count, len,
                                                                             g.index_stride[dim], g.b_stride[dim]);
  CUDA_LAUNCH_CHECK(scatter_lines_kernel);
}

}  // namespace

void CudaKernels::gather(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) {
  const int64_t n = index.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  const ScatterGeo g = make_scatter_geo(index, src, contiguous_strides(out.shape()), dim, "gather");
  dispatch_with_bool(src.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(src), ptr<const int64_t>(index), ptr<T>(out),
                                                              g, n);
    CUDA_LAUNCH_CHECK(gather_kernel);
  });
}

void CudaKernels::scatter(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, bool accumulate) {
  const int64_t n = index.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  const ScatterGeo g = make_scatter_geo(index, dst, src.strides(), dim, accumulate ? "scatter_add" : "scatter");
  auto launch = [&](auto tag, auto add) {
    using T = decltype(tag);
    constexpr bool kAdd = decltype(add)::value;
    if constexpr (!kAdd || kHasAtomicAdd<T>) {
      if (!is_deterministic()) {
        scatter_kernel<T, kAdd><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(src), ptr<const int64_t>(index),
                                                                         ptr<T>(dst), g, n);
        CUDA_LAUNCH_CHECK(scatter_kernel);
        return;
      }
    }
    using Step = std::conditional_t<kAdd, Add<T>, Store<T>>;
    launch_scatter_lines<T, Step>(src, dim, index, dst, g, stream_);
  };
  if (accumulate) {
    dispatch_all_and_half(dst.dtype(), "scatter_add", [&](auto tag) { launch(tag, std::true_type{}); });
  } else {
    dispatch_with_bool(dst.dtype(), "scatter", [&](auto tag) { launch(tag, std::false_type{}); });
  }
}

void CudaKernels::scatter_reduce(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, ScanOp op) {
  MINIDL_CHECK(op == ScanOp::Prod || op == ScanOp::Max || op == ScanOp::Min,
               "scatter_reduce: expected the product, maximum or minimum step");
  if (index.numel() == 0) return;
  cuda::DeviceGuard guard(device_);
  const ScatterGeo g = make_scatter_geo(index, dst, src.strides(), dim, "scatter_reduce");
  dispatch_all_and_half(dst.dtype(), "scatter_reduce", [&](auto tag) {
    using T = decltype(tag);
    if (op == ScanOp::Prod) launch_scatter_lines<T, Reduce<T, ScanOp::Prod>>(src, dim, index, dst, g, stream_);
    else if (op == ScanOp::Max) launch_scatter_lines<T, Reduce<T, ScanOp::Max>>(src, dim, index, dst, g, stream_);
    else launch_scatter_lines<T, Reduce<T, ScanOp::Min>>(src, dim, index, dst, g, stream_);
  });
}

Tensor CudaKernels::nonzero(const Tensor& x) {
  const int64_t n = x.numel(), rank = x.dim();
  MINIDL_CHECK(n <= std::numeric_limits<int>::max(), "nonzero on CUDA: at most ", std::numeric_limits<int>::max(),
               " elements, got ", n);
  MINIDL_CHECK(rank <= kMaxDims, "nonzero on CUDA: at most ", kMaxDims, " dims, got ", rank);
  const Device device = x.device();
  if (n == 0) return Tensor::empty({0, rank}, kInt64, device);
  cuda::DeviceGuard guard(device_);
  Tensor flat = Tensor::empty({n}, kInt64, device);
  Tensor selected = Tensor::empty({1}, kInt64, device);
  dispatch_with_bool(x.dtype(), "nonzero", [&](auto tag) {
    using T = decltype(tag);
    const thrust::counting_iterator<int64_t> positions(0);
    const IsNonzero<T> pick{ptr<const T>(x)};
    size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceSelect::If(nullptr, temp_bytes, positions, ptr<int64_t>(flat), ptr<int64_t>(selected),
                                     static_cast<int>(n), pick, stream_));
    Tensor temp = Tensor::empty({static_cast<int64_t>((temp_bytes + 7) / 8)}, kInt64, device);
    CUDA_CHECK(cub::DeviceSelect::If(temp.raw_data(), temp_bytes, positions, ptr<int64_t>(flat),
                                     ptr<int64_t>(selected), static_cast<int>(n), pick, stream_));
  });
  // The size of the result lives on the device: this read waits for it (a sync, as PyTorch's).
  int64_t count = 0;
  copy_bytes(&count, Device::cpu(), selected.raw_data(), device, sizeof(count));
  Tensor out = Tensor::empty({count, rank}, kInt64, device);
  if (count == 0 || rank == 0) return out;
  ScatterGeo g;
  g.rank = static_cast<int>(rank);
  for (int d = 0; d < g.rank; ++d) g.size[d] = x.shape()[d];
  unravel_kernel<<<blocks_for(count * rank), kThreads, 0, stream_>>>(ptr<const int64_t>(flat), count, g,
                                                                      ptr<int64_t>(out));
  CUDA_LAUNCH_CHECK(unravel_kernel);
  return out;
}

}  // namespace minidl
