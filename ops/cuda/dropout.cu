// Inverted dropout on cuRAND Philox: one kernel draws the keep mask (one byte per element, kept for
// the backward) and writes the scaled output; the backward is one masked scale. Both start early
// (core/cuda/launch.cuh): in a small model's step they sit between longer kernels.
#include <initializer_list>

#include "core/cuda/launch.cuh"

#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;

// The draws are of compute_t<T>: four floats per thread for float and the 16-bit types, two
// doubles for double.
template <class T>
constexpr int kPer = kRandomPer<compute_t<T>>;

// A thread's kPer<T> elements (16 bytes of float or double, 8 of a 16-bit type) moved as one load
// and one store, and their mask bytes as one store, where the tensor allows it.
template <class T>
struct alignas(sizeof(T) * kPer<T>) Pack {
  T v[kPer<T>];
};
template <class T>
struct alignas(kPer<T>) MaskPack {
  bool v[kPer<T>];
};

template <class T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ out, bool* __restrict__ mask, int64_t n,
                               PhiloxDraw draw, compute_t<T> keep_prob, compute_t<T> scale, bool packed) {
  using C = compute_t<T>;
  constexpr int per = kPer<T>;
  wait_for_earlier_kernels();
  let_next_kernel_start();
  // u is uniform on (0, 1]: P(u <= keep_prob) = keep_prob, and keep_prob = 1 keeps everything.
  philox_for_each_pack<C, true>(draw, n, [&](int64_t t, const C* u) {
    if (packed && (t + 1) * per <= n) {
      Pack<T> in = reinterpret_cast<const Pack<T>*>(x)[t], o;
      MaskPack<T> m;
#pragma unroll
      for (int j = 0; j < per; ++j) {
        m.v[j] = u[j] <= keep_prob;
        o.v[j] = static_cast<T>(m.v[j] ? static_cast<C>(in.v[j]) * scale : C(0));
      }
      reinterpret_cast<Pack<T>*>(out)[t] = o;
      reinterpret_cast<MaskPack<T>*>(mask)[t] = m;
      return;
    }
    for (int j = 0; j < per; ++j) {
      const int64_t i = t * per + j;
      if (i >= n) break;
      mask[i] = u[j] <= keep_prob;
      out[i] = static_cast<T>(mask[i] ? static_cast<C>(x[i]) * scale : C(0));
    }
  });
}

template <class T>
__global__ void dropout_backward_kernel(const T* __restrict__ grad_out, const bool* __restrict__ mask,
                                        T* __restrict__ grad_in, int64_t n, compute_t<T> scale, bool packed) {
  using C = compute_t<T>;
  constexpr int per = kPer<T>;
  wait_for_earlier_kernels();
  let_next_kernel_start();
  const int64_t packs = (n + per - 1) / per;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < packs; t += int64_t(gridDim.x) * blockDim.x) {
    if (packed && (t + 1) * per <= n) {
      Pack<T> g = reinterpret_cast<const Pack<T>*>(grad_out)[t];
      const MaskPack<T> m = reinterpret_cast<const MaskPack<T>*>(mask)[t];
#pragma unroll
      for (int j = 0; j < per; ++j) g.v[j] = static_cast<T>(m.v[j] ? static_cast<C>(g.v[j]) * scale : C(0));
      reinterpret_cast<Pack<T>*>(grad_in)[t] = g;
      continue;
    }
    for (int64_t i = t * per; i < n && i < (t + 1) * per; ++i)
      grad_in[i] = static_cast<T>(mask[i] ? static_cast<C>(grad_out[i]) * scale : C(0));
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
  dispatch_floating_and_half(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const PhiloxDraw draw = reserve_philox<C>(n);
    const bool packed = packable<T>({x.raw_data(), out.raw_data()}, mask.raw_data());
    launch_early("dropout_kernel", dropout_kernel<T>, dim3(blocks_for((n + kPer<T> - 1) / kPer<T>)), dim3(kThreads),
                 0, stream_, ptr<const T>(x), ptr<T>(out), ptr<bool>(mask), n, draw, static_cast<C>(keep_prob),
                 static_cast<C>(1.0 / keep_prob), packed);
  });
}

void CudaKernels::dropout_backward(const Tensor& grad_out, const Tensor& mask, double keep_prob, Tensor& grad_in) {
  const int64_t n = grad_out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating_and_half(grad_out.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const bool packed = packable<T>({grad_out.raw_data(), grad_in.raw_data()}, mask.raw_data());
    launch_early("dropout_backward_kernel", dropout_backward_kernel<T>,
                 dim3(blocks_for((n + kPer<T> - 1) / kPer<T>)), dim3(kThreads), 0, stream_, ptr<const T>(grad_out),
                 ptr<const bool>(mask), ptr<T>(grad_in), n, static_cast<compute_t<T>>(1.0 / keep_prob), packed);
  });
}

}  // namespace minidl
