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

// Parameters per launch (seven lists: about 2 KB of kernel argument).
constexpr int kMaxTensors = 32;
// kMaxExpAvgSq null without amsgrad; kCopy null where autocast keeps no 16-bit copy.
enum AdamList { kParam, kGrad, kExpAvg, kExpAvgSq, kMaxExpAvgSq, kStep, kCopy };
using AdamLists = TensorLists<7, kMaxTensors>;

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

// C is the type of autocast's 16-bit copies of the parameters (ops/autocast_masters.h), written
// with the updated values so that no pass of their own makes them again (a GPT's 10.8M weights: 36
// us a step on an H200); void without.
template <class T, class C>
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
  // A thread takes kPerThread consecutive elements, one 16-byte access of each operand in float32
  // (four 4-byte accesses took the step of a GPT's 10.8M parameters 95 us on an H200, at two thirds
  // of the memory's speed). Every load first, then the arithmetic and the stores: one memory round
  // trip per thread.
  using Pack = VecPack<T, kPerThread>;
  const int64_t first = chunk_begin(list, t) + int64_t(threadIdx.x) * kPerThread;
  const int64_t n = list.numel[t];
  if (first >= n) return;
  const uintptr_t address_bits = reinterpret_cast<uintptr_t>(p) | reinterpret_cast<uintptr_t>(g) |
                                 reinterpret_cast<uintptr_t>(m) | reinterpret_cast<uintptr_t>(v) |
                                 reinterpret_cast<uintptr_t>(v_max);  // v_max may be null
  const bool packed = first + kPerThread <= n && address_bits % sizeof(Pack) == 0;
  Pack gv{}, pv{}, mv{}, vv{}, xv{};
  if (packed) {
    gv = *reinterpret_cast<const Pack*>(g + first);
    pv = *reinterpret_cast<const Pack*>(p + first);
    mv = *reinterpret_cast<const Pack*>(m + first);
    vv = *reinterpret_cast<const Pack*>(v + first);
    if (v_max) xv = *reinterpret_cast<const Pack*>(v_max + first);
  } else {
    for (int u = 0; u < kPerThread && first + u < n; ++u) {
      gv.v[u] = g[first + u];
      pv.v[u] = p[first + u];
      mv.v[u] = m[first + u];
      vv.v[u] = v[first + u];
      if (v_max) xv.v[u] = v_max[first + u];
    }
  }
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    T gi = c.maximize ? -gv.v[u] : gv.v[u];
    T pi = pv.v[u];
    if (c.decoupled) pi *= decay;
    else gi += c.wd * pi;
    mv.v[u] = c.b1 * mv.v[u] + (T(1) - c.b1) * gi;
    const T vi = c.b2 * vv.v[u] + (T(1) - c.b2) * gi * gi;
    vv.v[u] = vi;
    T denom_v = vi;
    if (v_max) {
      denom_v = xv.v[u] < vi ? vi : xv.v[u];
      xv.v[u] = denom_v;
    }
    pv.v[u] = pi - step_size * mv.v[u] / (d_sqrt(denom_v) / bias2_sqrt + c.eps);
  }
  if (packed) {
    *reinterpret_cast<Pack*>(p + first) = pv;
    *reinterpret_cast<Pack*>(m + first) = mv;
    *reinterpret_cast<Pack*>(v + first) = vv;
    if (v_max) *reinterpret_cast<Pack*>(v_max + first) = xv;
  } else {
    for (int u = 0; u < kPerThread && first + u < n; ++u) {
      p[first + u] = pv.v[u];
      m[first + u] = mv.v[u];
      v[first + u] = vv.v[u];
      if (v_max) v_max[first + u] = xv.v[u];
    }
  }
  if constexpr (!std::is_void_v<C>) {
    C* __restrict__ copy = static_cast<C*>(list.ptr[kCopy][t]);
    if (!copy) return;
    VecPack<C, kPerThread> cv;
#pragma unroll
    for (int u = 0; u < kPerThread; ++u) cv.v[u] = static_cast<C>(pv.v[u]);
    if (packed && reinterpret_cast<uintptr_t>(copy) % sizeof(cv) == 0) {
      *reinterpret_cast<VecPack<C, kPerThread>*>(copy + first) = cv;
    } else {
      for (int u = 0; u < kPerThread && first + u < n; ++u) copy[first + u] = cv.v[u];
    }
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
    with_copy_type<T>(c.copies, [&](auto copy_tag) {  // adam_update_multi_ checked the copies
      using C = std::remove_pointer_t<decltype(copy_tag)>;
      // kMaxTensors parameters at a time: their step counts advance (an empty parameter's too, as
      // in torch), then the update of those with elements reads the new counts.
      for (size_t first = 0; first < t.params.size(); first += kMaxTensors) {
        const size_t count = std::min<size_t>(kMaxTensors, t.params.size() - first);
        StepList steps{};
        for (size_t j = 0; j < count; ++j) steps.step[steps.count++] = ptr<float>(t.steps[first + j]);
        launch_early("advance_steps_kernel", advance_steps_kernel, 1, kMaxTensors, 0, stream_, steps,
                     args.found_inf);
        for_each_list<7, kMaxTensors>(
            count,
            [&](size_t j) -> TensorEntry<7> {
              const size_t i = first + j;
              const int64_t n = t.params[i].numel();
              if (n == 0) return {};
              void* copy = c.copies && (*c.copies)[i].defined() ? (*c.copies)[i].raw_data() : nullptr;
              return {{ptr<T>(t.params[i]), ptr<T>(t.grads[i]), ptr<T>(t.exp_avgs[i]), ptr<T>(t.exp_avg_sqs[i]),
                       c.amsgrad ? ptr<T>(t.max_exp_avg_sqs[i]) : nullptr, ptr<float>(t.steps[i]), copy},
                      n};
            },
            [&](const AdamLists& list, unsigned blocks) {
              launch_early("adam_multi_kernel", adam_multi_kernel<T, C>, blocks, kThreads, 0, stream_, list, args);
            });
      }
    });
  });
}

}  // namespace minidl
