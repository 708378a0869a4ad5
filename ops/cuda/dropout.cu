// Inverted dropout on cuRAND Philox: one kernel draws the keep mask (one byte per element, kept for
// the backward) and writes the scaled output; the backward is one masked scale.
#include <initializer_list>

#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;

// A thread's kRandomPer<T> elements (16 bytes of T) moved as one load and one store, and their
// mask bytes as one store, where the tensor allows it.
template <class T>
struct alignas(16) Pack {
  T v[kRandomPer<T>];
};
template <class T>
struct alignas(kRandomPer<T>) MaskPack {
  bool v[kRandomPer<T>];
};

template <class T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ out, bool* __restrict__ mask, int64_t n,
                               PhiloxDraw draw, T keep_prob, T scale, bool packed) {
  constexpr int per = kRandomPer<T>;
  // u is uniform on (0, 1]: P(u <= keep_prob) = keep_prob, and keep_prob = 1 keeps everything.
  philox_for_each_pack<T, true>(draw, n, [&](int64_t t, const T* u) {
    if (packed && (t + 1) * per <= n) {
      Pack<T> in = reinterpret_cast<const Pack<T>*>(x)[t], o;
      MaskPack<T> m;
#pragma unroll
      for (int j = 0; j < per; ++j) {
        m.v[j] = u[j] <= keep_prob;
        o.v[j] = m.v[j] ? in.v[j] * scale : T(0);
      }
      reinterpret_cast<Pack<T>*>(out)[t] = o;
      reinterpret_cast<MaskPack<T>*>(mask)[t] = m;
      return;
    }
    for (int j = 0; j < per; ++j) {
      const int64_t i = t * per + j;
      if (i >= n) break;
      mask[i] = u[j] <= keep_prob;
      out[i] = mask[i] ? x[i] * scale : T(0);
    }
  });
}

template <class T>
__global__ void dropout_backward_kernel(const T* __restrict__ grad_out, const bool* __restrict__ mask,
                                        T* __restrict__ grad_in, int64_t n, T scale, bool packed) {
  constexpr int per = kRandomPer<T>;
  const int64_t packs = (n + per - 1) / per;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < packs; t += int64_t(gridDim.x) * blockDim.x) {
    if (packed && (t + 1) * per <= n) {
      Pack<T> g = reinterpret_cast<const Pack<T>*>(grad_out)[t];
      const MaskPack<T> m = reinterpret_cast<const MaskPack<T>*>(mask)[t];
#pragma unroll
      for (int j = 0; j < per; ++j) g.v[j] = m.v[j] ? g.v[j] * scale : T(0);
      reinterpret_cast<Pack<T>*>(grad_in)[t] = g;
      continue;
    }
    for (int64_t i = t * per; i < n && i < (t + 1) * per; ++i) grad_in[i] = mask[i] ? grad_out[i] * scale : T(0);
  }
}

// Whether every pointer is aligned for Pack<T> and MaskPack<T> steps.
template <class T>
bool packable(std::initializer_list<const void*> values, const void* mask) {
  for (const void* p : values)
    if (reinterpret_cast<uintptr_t>(p) % alignof(Pack<T>) != 0) return false;
  return reinterpret_cast<uintptr_t>(mask) % alignof(MaskPack<T>) == 0;
}

}  // namespace

void CudaKernels::dropout(const Tensor& x, double keep_prob, Tensor& out, Tensor& mask) {
  const int64_t n = x.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const PhiloxDraw draw = reserve_philox<T>(n);
    const bool packed = packable<T>({x.raw_data(), out.raw_data()}, mask.raw_data());
    dropout_kernel<T><<<blocks_for((n + kRandomPer<T> - 1) / kRandomPer<T>), kThreads, 0, stream_>>>(
        ptr<const T>(x), ptr<T>(out), ptr<bool>(mask), n, draw, static_cast<T>(keep_prob),
        static_cast<T>(1.0 / keep_prob), packed);
    CUDA_LAUNCH_CHECK(dropout_kernel);
  });
}

void CudaKernels::dropout_backward(const Tensor& grad_out, const Tensor& mask, double keep_prob, Tensor& grad_in) {
  const int64_t n = grad_out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_out.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const bool packed = packable<T>({grad_out.raw_data(), grad_in.raw_data()}, mask.raw_data());
    dropout_backward_kernel<T><<<blocks_for((n + kRandomPer<T> - 1) / kRandomPer<T>), kThreads, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const bool>(mask), ptr<T>(grad_in), n, static_cast<T>(1.0 / keep_prob), packed);
    CUDA_LAUNCH_CHECK(dropout_backward_kernel);
  });
}

}  // namespace minidl
