// Inverted-dropout masks on cuRAND Philox: 1/keep_prob with probability keep_prob, else 0.
#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T>
__global__ void dropout_mask_kernel(T* dst, int64_t n, PhiloxDraw draw, T keep_prob, T scale) {
  // u is uniform on (0, 1]: P(u <= keep_prob) = keep_prob, and keep_prob = 1 keeps everything.
  philox_for_each<T, true>(draw, n, [&](int64_t i, T u) { dst[i] = u <= keep_prob ? scale : T(0); });
}

}  // namespace

void CudaKernels::dropout_mask(Tensor& dst, double keep_prob) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(dst.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const PhiloxDraw draw = reserve_philox<T>(n);
    dropout_mask_kernel<T><<<blocks_for((n + kRandomPer<T> - 1) / kRandomPer<T>), kThreads, 0, stream_>>>(
        ptr<T>(dst), n, draw, static_cast<T>(keep_prob), static_cast<T>(1.0 / keep_prob));
    CUDA_LAUNCH_CHECK(dropout_mask_kernel);
  });
}

}  // namespace minidl
