// Copies (any strides, converting dtypes), fills and the row gather of index_select.
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

// One thread per output element (in units of T): row r of out takes row index[r] of src. An index
// out of range fills its row with zeros and raises the device error flag (core/cuda/context.h).
template <class T>
__global__ void index_select_kernel(const T* src, const int64_t* index, T* out, int64_t rows, int64_t k,
                                    int64_t row_size, int* error) {
  const int64_t n = k * row_size;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / row_size, c = i - r * row_size;
    const int64_t s = index[r];
    if (s < 0 || s >= rows) {
      out[i] = T(0);
      if (c == 0) *error = kIndexOutOfRange;
    } else {
      out[i] = src[s * row_size + c];
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
  dispatch_all(src.dtype(), "copy", [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_all(dst.dtype(), "copy", [&](auto dst_tag) {
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
  dispatch_all(dst.dtype(), "fill", [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<T>(dst), static_cast<T>(value), n);
    CUDA_LAUNCH_CHECK(fill_kernel);
  });
}

void CudaKernels::index_select(const Tensor& src, const Tensor& index, Tensor& out) {
  const int64_t rows = src.size(0), k = index.numel();
  const int64_t row_size = rows > 0 ? src.numel() / rows : 0;
  if (k == 0 || row_size == 0) return;
  cuda::DeviceGuard guard(device_);
  int* error = cuda::device_error_flag(device_);
  dispatch_all(src.dtype(), "index_select", [&](auto tag) {
    using T = decltype(tag);
    index_select_kernel<T><<<blocks_for(k * row_size), kThreads, 0, stream_>>>(
        ptr<const T>(src), ptr<const int64_t>(index), ptr<T>(out), rows, k, row_size, error);
    CUDA_LAUNCH_CHECK(index_select_kernel);
  });
}

}  // namespace minidl
