// Random fills from the global generator's seed on cuRAND Philox (ops/cuda/random.cuh).
#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T>
__global__ void uniform_kernel(T* dst, int64_t n, PhiloxDraw draw, T low, T high) {
  // curand's uniform is on (0, 1]; folding 1 onto 0 gives [0, 1), the range the CPU kernel draws
  // from (1 - u would round to 1 in float32 for the smallest u).
  philox_for_each<T, true>(draw, n, [&](int64_t i, T u) { dst[i] = low + (high - low) * (u < T(1) ? u : T(0)); });
}

template <class T>
__global__ void normal_kernel(T* dst, int64_t n, PhiloxDraw draw, T mean, T stddev) {
  philox_for_each<T, false>(draw, n, [&](int64_t i, T z) { dst[i] = mean + stddev * z; });
}

}  // namespace

void CudaKernels::uniform(Tensor& dst, double low, double high) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(dst.dtype(), "uniform", [&](auto tag) {
    using T = decltype(tag);
    const PhiloxDraw draw = reserve_philox<T>(n);
    uniform_kernel<T><<<blocks_for((n + kRandomPer<T> - 1) / kRandomPer<T>), kThreads, 0, stream_>>>(
        ptr<T>(dst), n, draw, static_cast<T>(low), static_cast<T>(high));
    CUDA_LAUNCH_CHECK(uniform_kernel);
  });
}

void CudaKernels::normal(Tensor& dst, double mean, double stddev) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(dst.dtype(), "normal", [&](auto tag) {
    using T = decltype(tag);
    const PhiloxDraw draw = reserve_philox<T>(n);
    normal_kernel<T><<<blocks_for((n + kRandomPer<T> - 1) / kRandomPer<T>), kThreads, 0, stream_>>>(
        ptr<T>(dst), n, draw, static_cast<T>(mean), static_cast<T>(stddev));
    CUDA_LAUNCH_CHECK(normal_kernel);
  });
}

}  // namespace minidl
