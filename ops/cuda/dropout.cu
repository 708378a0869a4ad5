// Inverted dropout on cuRAND Philox: one kernel draws the keep mask (one byte per element, kept for
// the backward) and writes the scaled output; the backward is one masked scale.
#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;

template <class T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ out, bool* __restrict__ mask, int64_t n,
                               PhiloxDraw draw, T keep_prob, T scale) {
  // u is uniform on (0, 1]: P(u <= keep_prob) = keep_prob, and keep_prob = 1 keeps everything.
  philox_for_each<T, true>(draw, n, [&](int64_t i, T u) {
    const bool keep = u <= keep_prob;
    mask[i] = keep;
    out[i] = keep ? x[i] * scale : T(0);
  });
}

template <class T>
__global__ void dropout_backward_kernel(const T* __restrict__ grad_out, const bool* __restrict__ mask,
                                        T* __restrict__ grad_in, int64_t n, T scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    grad_in[i] = mask[i] ? grad_out[i] * scale : T(0);
}

}  // namespace

void CudaKernels::dropout(const Tensor& x, double keep_prob, Tensor& out, Tensor& mask) {
  const int64_t n = x.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const PhiloxDraw draw = reserve_philox<T>(n);
    dropout_kernel<T><<<blocks_for((n + kRandomPer<T> - 1) / kRandomPer<T>), kThreads, 0, stream_>>>(
        ptr<const T>(x), ptr<T>(out), ptr<bool>(mask), n, draw, static_cast<T>(keep_prob),
        static_cast<T>(1.0 / keep_prob));
    CUDA_LAUNCH_CHECK(dropout_kernel);
  });
}

void CudaKernels::dropout_backward(const Tensor& grad_out, const Tensor& mask, double keep_prob, Tensor& grad_in) {
  const int64_t n = grad_out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_out.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    dropout_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const bool>(mask), ptr<T>(grad_in), n, static_cast<T>(1.0 / keep_prob));
    CUDA_LAUNCH_CHECK(dropout_backward_kernel);
  });
}

}  // namespace minidl
