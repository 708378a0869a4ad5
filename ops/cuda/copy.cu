// Copies (any strides, converting dtypes), fills, the slice gather of index_select and its adjoint
// index_add.
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class S, class D, class Index>
__global__ void copy_strided(const S* src, D* dst, Strided<2> m, Index n) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index off[2];
    strided_offsets(m, i, off);
    dst[off[0]] = static_cast<D>(src[off[1]]);
  }
}

template <class T>
__global__ void fill_kernel(T* dst, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}


// One thread per gathered element: slice j of out takes slice index[j] of src. An index out of
// range fills its slice with zeros and raises the device error flag (core/cuda/context.h).
template <class T>
__global__ void index_select_kernel(const T* src, const int64_t* index, T* out, IndexGeometry g, int* error) {
  const int64_t n = g.outer * g.k * g.inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / g.inner, c = i - r * g.inner;
    const int64_t a = r / g.k, j = r - a * g.k;
    const int64_t s = index[j];
    if (s < 0 || s >= g.rows) {
      out[i] = T(0);
      if (c == 0) *error = kIndexOutOfRange;
    } else {
      out[i] = src[(a * g.rows + s) * g.inner + c];
    }
  }
}

// The adjoint: one thread per element of src [outer, k, inner], added into dst at slice index[j].
// Atomics, because repeated indices send several threads to one element.
template <class T>
__global__ void index_add_kernel(const T* src, const int64_t* index, T* dst, IndexGeometry g, int* error) {
  const int64_t n = g.outer * g.k * g.inner;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / g.inner, c = i - r * g.inner;
    const int64_t a = r / g.k, j = r - a * g.k;
    const int64_t s = index[j];
    if (s < 0 || s >= g.rows) {
      if (c == 0) *error = kIndexOutOfRange;
    } else {
      atomicAdd(dst + (a * g.rows + s) * g.inner + c, src[i]);
    }
  }
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
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<T>(dst), static_cast<T>(value), n);
    CUDA_LAUNCH_CHECK(fill_kernel);
  });
}

void CudaKernels::index_select(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) {
  const IndexGeometry g = index_geometry(src.shape(), dim, index.numel());
  const int64_t n = g.outer * g.k * g.inner;
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  int* error = cuda::device_error_flag(device_);
  dispatch_with_bool(src.dtype(), "index_select", [&](auto tag) {
    using T = decltype(tag);
    index_select_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(src), ptr<const int64_t>(index),
                                                                    ptr<T>(out), g, error);
    CUDA_LAUNCH_CHECK(index_select_kernel);
  });
}

void CudaKernels::index_add(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst) {
  const IndexGeometry g = index_geometry(dst.shape(), dim, index.numel());
  const int64_t n = g.outer * g.k * g.inner;
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  int* error = cuda::device_error_flag(device_);
  dispatch_floating(dst.dtype(), "index_add", [&](auto tag) {
    using T = decltype(tag);
    index_add_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(src), ptr<const int64_t>(index),
                                                                ptr<T>(dst), g, error);
    CUDA_LAUNCH_CHECK(index_add_kernel);
  });
}

}  // namespace minidl
