// Random fills from the global generator's seed on cuRAND Philox (ops/cuda/random.cuh).
#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;

// Draws and arithmetic in C = compute_t<T> (float for the 16-bit types), rounded once at the store.
template <class T, class C = compute_t<T>>
__global__ void uniform_kernel(T* dst, int64_t n, PhiloxDraw draw, C low, C high) {
  // curand's uniform is on (0, 1]; folding 1 onto 0 gives [0, 1), the range the CPU kernel draws
  // from (1 - u would round to 1 in float32 for the smallest u).
  philox_for_each<C, true>(draw, n, [&](int64_t i, C u) {
    dst[i] = static_cast<T>(low + (high - low) * (u < C(1) ? u : C(0)));
  });
}

template <class T, class C = compute_t<T>>
__global__ void normal_kernel(T* dst, int64_t n, PhiloxDraw draw, C mean, C stddev) {
  philox_for_each<C, false>(draw, n, [&](int64_t i, C z) { dst[i] = static_cast<T>(mean + stddev * z); });
}

}  // namespace

void CudaKernels::uniform(Tensor& dst, double low, double high) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating_and_half(dst.dtype(), "uniform", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const PhiloxDraw draw = reserve_philox<C>(n);
    uniform_kernel<T><<<blocks_for((n + kRandomPer<C> - 1) / kRandomPer<C>), kThreads, 0, stream_>>>(
        ptr<T>(dst), n, draw, static_cast<C>(low), static_cast<C>(high));
    CUDA_LAUNCH_CHECK(uniform_kernel);
  });
}

void CudaKernels::normal(Tensor& dst, double mean, double stddev) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating_and_half(dst.dtype(), "normal", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const PhiloxDraw draw = reserve_philox<C>(n);
    normal_kernel<T><<<blocks_for((n + kRandomPer<C> - 1) / kRandomPer<C>), kThreads, 0, stream_>>>(
        ptr<T>(dst), n, draw, static_cast<C>(mean), static_cast<C>(stddev));
    CUDA_LAUNCH_CHECK(normal_kernel);
  });
}

}  // namespace minidl
