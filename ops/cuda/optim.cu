// Optimizer updates as single fused kernels, the same arithmetic as ops/cpu/optim.cpp (PyTorch's
// SGD and Adam/AdamW), in the parameter's dtype.
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/multi_tensor.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::multi_tensor;

template <class T>
struct SgdArgs {
  T lr, wd, momentum, damp;  // damp = 1 - dampening
  bool nesterov, first_step;
  const T* lr_on_device;    // overrides lr when set
  const float* found_inf;  // GradScaler's flag: nonzero skips the step (all of it, momentum included)
};

// Parameters per launch (four lists: about 1 KB of kernel argument).
constexpr int kMaxTensors = 24;
// Null momentum buffers without momentum; null copies where autocast keeps no 16-bit copy.
enum SgdList { kParam, kGrad, kMomentumBuf, kCopy };
using SgdLists = TensorLists<4, kMaxTensors>;

// C is the type of autocast's 16-bit copies of the parameters (ops/autocast_masters.h), written
// with the updated values so that no pass of their own has to make them again; void without.
template <class T, class C>
__global__ void sgd_multi_kernel(SgdLists list, SgdArgs<T> c) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  if (c.found_inf && *c.found_inf != 0.0f) return;
  if (c.lr_on_device) c.lr = *c.lr_on_device;
  const int t = tensor_of_block(list);
  T* __restrict__ p = static_cast<T*>(list.ptr[kParam][t]);
  const T* __restrict__ g = static_cast<const T*>(list.ptr[kGrad][t]);
  T* __restrict__ buf = static_cast<T*>(list.ptr[kMomentumBuf][t]);
  const int64_t begin = chunk_begin(list, t) + threadIdx.x;
  const int64_t n = list.numel[t];
  // Every load first, then the arithmetic and the stores: one memory round trip per thread instead
  // of one per element (a step's update is short, so its latency is what counts).
  T gv[kPerThread], pv[kPerThread], bv[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = begin + int64_t(u) * blockDim.x;
    if (i < n) {
      gv[u] = g[i];
      pv[u] = p[i];
      bv[u] = buf && !c.first_step ? buf[i] : T(0);
    }
  }
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = begin + int64_t(u) * blockDim.x;
    if (i >= n) continue;
    T d = gv[u] + c.wd * pv[u];
    if (buf) {
      const T b = c.first_step ? d : c.momentum * bv[u] + c.damp * d;
      buf[i] = b;
      d = c.nesterov ? d + c.momentum * b : b;
    }
    const T updated = pv[u] - c.lr * d;
    p[i] = updated;
    if constexpr (!std::is_void_v<C>) {
      C* copy = static_cast<C*>(list.ptr[kCopy][t]);
      if (copy) copy[i] = C(static_cast<float>(updated));
    }
  }
}

template <class T>
struct AdamArgs {
  T lr, b1, b2, eps, wd, step_size, bias2_sqrt;
  bool decoupled;
};

template <class T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, int64_t n, AdamArgs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T gi = g[i];
    T pi = p[i];
    if (c.decoupled) pi *= T(1) - c.lr * c.wd;
    else gi += c.wd * pi;
    const T mi = c.b1 * m[i] + (T(1) - c.b1) * gi;
    const T vi = c.b2 * v[i] + (T(1) - c.b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - c.step_size * mi / (d_sqrt(vi) / c.bias2_sqrt + c.eps);
  }
}

}  // namespace

void CudaKernels::sgd_step(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& c) {
  std::vector<Tensor> params{param}, bufs;
  if (momentum_buf) bufs.push_back(*momentum_buf);
  sgd_step_multi(params, {grad}, bufs, c);
}

void CudaKernels::sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                 std::vector<Tensor>& momentum_bufs, const SgdConfig& c) {
  if (params.empty()) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(params[0].dtype(), "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    SgdArgs<T> args{T(c.lr),     T(c.weight_decay), T(c.momentum),
                    T(1 - c.dampening), c.nesterov,   c.first_step,
                    c.lr_on_device ? ptr<const T>(*c.lr_on_device) : nullptr,
                    c.found_inf ? ptr<const float>(*c.found_inf) : nullptr};
    with_copy_type<T>(c.copies, [&](auto copy_tag) {  // sgd_update_ checked the copies
      using C = std::remove_pointer_t<decltype(copy_tag)>;
      for_each_list<4, kMaxTensors>(
          params.size(),
          [&](size_t i) -> TensorEntry<4> {
            const int64_t n = params[i].numel();
            if (n == 0) return {};
            void* copy = c.copies && (*c.copies)[i].defined() ? (*c.copies)[i].raw_data() : nullptr;
            return {{ptr<T>(params[i]), ptr<T>(grads[i]), momentum_bufs.empty() ? nullptr : ptr<T>(momentum_bufs[i]),
                     copy},
                    n};
          },
          [&](const SgdLists& list, unsigned blocks) {
            launch_early("sgd_multi_kernel", sgd_multi_kernel<T, C>, blocks, kThreads, 0, stream_, list, args);
          });
    });
  });
}

void CudaKernels::adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                            const AdamConfig& c) {
  const int64_t n = param.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(param.dtype(), "adam_step", [&](auto tag) {
    using T = decltype(tag);
    const double bias1 = 1 - std::pow(c.beta1, static_cast<double>(c.step));
    const double bias2 = 1 - std::pow(c.beta2, static_cast<double>(c.step));
    AdamArgs<T> args{T(c.lr),           T(c.beta1),           T(c.beta2), T(c.eps), T(c.weight_decay),
                     T(c.lr / bias1), T(std::sqrt(bias2)), c.decoupled_weight_decay};
    adam_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<T>(param), ptr<const T>(grad), ptr<T>(exp_avg),
                                                            ptr<T>(exp_avg_sq), n, args);
    CUDA_LAUNCH_CHECK(adam_kernel);
  });
}

}  // namespace minidl
