// Adam and AdamW as torch's fused, capturable multi-tensor step: up to kMaxTensors parameters per
// launch (ops/cuda/multi_tensor.cuh), and the learning rate, the step counts and GradScaler's
// found_inf read on the device, so that a captured step replays with the current rate and the right
// bias corrections. The arithmetic is that of ops/cpu/optim.cpp (the bias corrections in float64,
// as there).
#include "core/cuda/launch.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/multi_tensor.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::multi_tensor;

// Parameters per launch (six lists: about 2 KB of kernel argument).
constexpr int kMaxTensors = 32;
enum AdamList { kParam, kGrad, kExpAvg, kExpAvgSq, kMaxExpAvgSq, kStep };  // kMaxExpAvgSq null without amsgrad
using AdamLists = TensorLists<6, kMaxTensors>;

struct StepList {
  float* step[kMaxTensors];
  int count;
};

template <class T>
struct AdamArgs {
  double beta1, beta2;  // for the bias corrections
  T b1, b2, eps, wd;
  bool decoupled, maximize;
  const T* lr;
  const float* found_inf;  // null: never skip
};

// Advances the step counts by one unless found_inf: a kernel of its own, since every block of the
// update reads a count that no block of it may change.
__global__ void advance_steps_kernel(StepList list, const float* found_inf) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  if (found_inf && *found_inf != 0.0f) return;
  if (static_cast<int>(threadIdx.x) < list.count) *list.step[threadIdx.x] += 1.0f;
}

template <class T>
__global__ void adam_multi_kernel(AdamLists list, AdamArgs<T> c) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  if (c.found_inf && *c.found_inf != 0.0f) return;
  const int t = tensor_of_block(list);
  const T lr = *c.lr;
  // The bias corrections in float64 once per block rather than per thread (two pow calls each).
  __shared__ T block_step_size, block_bias2_sqrt;
  if (threadIdx.x == 0) {
    const double step = *static_cast<const float*>(list.ptr[kStep][t]);
    block_step_size = T(static_cast<double>(lr) / (1 - pow(c.beta1, step)));
    block_bias2_sqrt = T(sqrt(1 - pow(c.beta2, step)));
  }
  __syncthreads();
  const T step_size = block_step_size, bias2_sqrt = block_bias2_sqrt;
  const T decay = T(1) - lr * c.wd;
  T* __restrict__ p = static_cast<T*>(list.ptr[kParam][t]);
  const T* __restrict__ g = static_cast<const T*>(list.ptr[kGrad][t]);
  T* __restrict__ m = static_cast<T*>(list.ptr[kExpAvg][t]);
  T* __restrict__ v = static_cast<T*>(list.ptr[kExpAvgSq][t]);
  T* __restrict__ v_max = static_cast<T*>(list.ptr[kMaxExpAvgSq][t]);
  const int64_t begin = chunk_begin(list, t) + threadIdx.x;
  const int64_t n = list.numel[t];
  // Every load first, then the arithmetic and the stores, as the SGD kernel: one memory round trip
  // per thread.
  T gv[kPerThread], pv[kPerThread], mv[kPerThread], vv[kPerThread], xv[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = begin + int64_t(u) * blockDim.x;
    if (i < n) {
      gv[u] = g[i];
      pv[u] = p[i];
      mv[u] = m[i];
      vv[u] = v[i];
      xv[u] = v_max ? v_max[i] : T(0);
    }
  }
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int64_t i = begin + int64_t(u) * blockDim.x;
    if (i >= n) continue;
    T gi = c.maximize ? -gv[u] : gv[u];
    T pi = pv[u];
    if (c.decoupled) pi *= decay;
    else gi += c.wd * pi;
    const T mi = c.b1 * mv[u] + (T(1) - c.b1) * gi;
    const T vi = c.b2 * vv[u] + (T(1) - c.b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    T denom_v = vi;
    if (v_max) {
      denom_v = xv[u] < vi ? vi : xv[u];
      v_max[i] = denom_v;
    }
    p[i] = pi - step_size * mi / (d_sqrt(denom_v) / bias2_sqrt + c.eps);
  }
}

}  // namespace

void CudaKernels::adam_step_multi(AdamTensorLists& t, const AdamMultiConfig& c) {
  if (t.params.empty()) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(t.params[0].dtype(), "adam_step_multi", [&](auto tag) {
    using T = decltype(tag);
    AdamArgs<T> args{c.beta1,
                     c.beta2,
                     T(c.beta1),
                     T(c.beta2),
                     T(c.eps),
                     T(c.weight_decay),
                     c.decoupled_weight_decay,
                     c.maximize,
                     ptr<const T>(*c.lr),
                     c.found_inf ? ptr<const float>(*c.found_inf) : nullptr};
    // kMaxTensors parameters at a time: their step counts advance (an empty parameter's too, as in
    // torch), then the update of those with elements reads the new counts.
    for (size_t first = 0; first < t.params.size(); first += kMaxTensors) {
      const size_t count = std::min<size_t>(kMaxTensors, t.params.size() - first);
      StepList steps{};
      for (size_t j = 0; j < count; ++j) steps.step[steps.count++] = ptr<float>(t.steps[first + j]);
      launch_early("advance_steps_kernel", advance_steps_kernel, 1, kMaxTensors, 0, stream_, steps, args.found_inf);
      for_each_list<6, kMaxTensors>(
          count,
          [&](size_t j) -> TensorEntry<6> {
            const size_t i = first + j;
            const int64_t n = t.params[i].numel();
            if (n == 0) return {};
            return {{ptr<T>(t.params[i]), ptr<T>(t.grads[i]), ptr<T>(t.exp_avgs[i]), ptr<T>(t.exp_avg_sqs[i]),
                     c.amsgrad ? ptr<T>(t.max_exp_avg_sqs[i]) : nullptr, ptr<float>(t.steps[i])},
                    n};
          },
          [&](const AdamLists& list, unsigned blocks) {
            launch_early("adam_multi_kernel", adam_multi_kernel<T>, blocks, kThreads, 0, stream_, list, args);
          });
    }
  });
}

}  // namespace minidl
