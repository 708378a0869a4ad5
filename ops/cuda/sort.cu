// Row-wise stable sort on CUB's radix sorts (stable: equal keys keep their order, as the CPU's
// std::stable_sort keeps them). The keys are a copy of x in which every NaN is the positive quiet
// NaN, which radix order puts above +inf (PyTorch's "NaN is the largest"), and -0.0 is 0.0, so that
// zeros of both signs tie as they do on the CPU; the values are then gathered from x by the sorted
// positions, keeping each element's own bits. One row sorts with cub::DeviceRadixSort, several with
// cub::DeviceSegmentedRadixSort (one segment per row).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <climits>

#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T>
__device__ __forceinline__ T canonical_key(T v) {
  if constexpr (std::is_same_v<T, float>) {
    if (v != v) return __int_as_float(0x7fc00000);
  } else if constexpr (std::is_same_v<T, double>) {
    if (v != v) return __longlong_as_double(0x7ff8000000000000LL);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (v == T(0)) return T(0);
  }
  return v;
}

// The keys are of K = compute_t<T>: a 16-bit value sorts as its float, which holds it exactly.
template <class T, class K = compute_t<T>>
__global__ void prepare_keys(const T* x, int64_t total, int64_t n, K* keys, int64_t* positions) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    keys[i] = canonical_key(static_cast<K>(x[i]));
    positions[i] = i % n;
  }
}

__global__ void row_offsets(int64_t rows, int64_t n, int* offsets) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r <= rows; r += int64_t(gridDim.x) * blockDim.x)
    offsets[r] = static_cast<int>(r * n);
}

template <class T>
__global__ void gather_rows(const T* x, const int64_t* positions, int64_t total, int64_t n, T* values) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    values[i] = x[(i / n) * n + positions[i]];
}

// One CUB sort call: first with no temp storage to size it, then for real.
template <class T>
cudaError_t radix_sort(void* temp, size_t& temp_bytes, const T* keys_in, T* keys_out, const int64_t* pos_in,
                       int64_t* pos_out, int total, int rows, const int* offsets, bool descending, cudaStream_t stream) {
  constexpr int kBits = int(sizeof(T) * 8);
  if (rows == 1) {
    return descending ? cub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, keys_in, keys_out, pos_in, pos_out,
                                                                  total, 0, kBits, stream)
                      : cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, pos_in, pos_out, total, 0,
                                                        kBits, stream);
  }
  return descending ? cub::DeviceSegmentedRadixSort::SortPairsDescending(temp, temp_bytes, keys_in, keys_out, pos_in,
                                                                         pos_out, total, rows, offsets, offsets + 1, 0,
                                                                         kBits, stream)
                    : cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, pos_in, pos_out,
                                                               total, rows, offsets, offsets + 1, 0, kBits, stream);
}

}  // namespace

void CudaKernels::sort(const Tensor& x, int64_t rows, int64_t n, bool descending, Tensor& values, Tensor& indices) {
  const int64_t total = rows * n;
  if (total == 0) return;
  MINIDL_CHECK(total <= INT_MAX, "sort: at most ", INT_MAX, " elements on CUDA (CUB's item count), got ", total);
  cuda::DeviceGuard guard(device_);
  const Device device = x.device();
  dispatch_all_and_half(x.dtype(), "sort", [&](auto tag) {
    using T = decltype(tag);
    using K = compute_t<T>;
    const DType key_dtype = dtype_of<K>();
    Tensor keys_in = Tensor::empty({total}, key_dtype, device), keys_out = Tensor::empty({total}, key_dtype, device);
    Tensor pos_in = Tensor::empty({total}, kInt64, device);
    Tensor offsets = Tensor::empty({(rows + 1 + 1) / 2}, kInt64, device);  // rows + 1 ints
    prepare_keys<T><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(x), total, n, ptr<K>(keys_in),
                                                                 ptr<int64_t>(pos_in));
    CUDA_LAUNCH_CHECK(prepare_keys);
    int* offs = static_cast<int*>(offsets.raw_data());
    row_offsets<<<blocks_for(rows + 1), kThreads, 0, stream_>>>(rows, n, offs);
    CUDA_LAUNCH_CHECK(row_offsets);
    size_t temp_bytes = 0;
    CUDA_CHECK(radix_sort<K>(nullptr, temp_bytes, ptr<const K>(keys_in), ptr<K>(keys_out), ptr<const int64_t>(pos_in),
                             ptr<int64_t>(indices), static_cast<int>(total), static_cast<int>(rows), offs, descending,
                             stream_));
    Tensor temp = Tensor::empty({static_cast<int64_t>((temp_bytes + 7) / 8) + 1}, kInt64, device);
    CUDA_CHECK(radix_sort<K>(temp.raw_data(), temp_bytes, ptr<const K>(keys_in), ptr<K>(keys_out),
                             ptr<const int64_t>(pos_in), ptr<int64_t>(indices), static_cast<int>(total),
                             static_cast<int>(rows), offs, descending, stream_));
    gather_rows<T><<<blocks_for(total), kThreads, 0, stream_>>>(ptr<const T>(x), ptr<const int64_t>(indices), total, n,
                                                                ptr<T>(values));
    CUDA_LAUNCH_CHECK(gather_rows);
  });
}

}  // namespace minidl
