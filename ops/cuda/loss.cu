// NLL and the fused cross-entropy on CUDA. Targets are read on the device and the loss stays there:
// no host sync. A row whose target is ignore_index counts for nothing. Any other target out of range
// cannot throw from a kernel: its sample contributes 0, nothing is read out of bounds, and the
// device error report makes the next synchronization throw, naming the op, the sample and the
// target (core/cuda/context.h). The CPU kernels
// check targets up front and throw at once.
#include "core/cuda/launch.cuh"
#include "ops/cuda/softmax.cuh"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

using namespace cuda;

// Threads of the one-block passes over every row (the count of targets, the mean): 1024, each with
// several loads in flight, so that 16,384 rows cost one round trip to memory or two. At 256, a
// loop's loads one after the other, char_gpt's count and mean took 5.9 and 5.8 us of its step on an
// H200, on its critical path.
constexpr int kMeanBlock = 1024;

// Sums `value` over the block into thread 0's result (the temp storage is reused afterwards).
template <class Acc, class Temp>
__device__ Acc block_sum(Acc value, Temp& temp) {
  using Reduce = cub::BlockReduce<Acc, kMeanBlock>;
  Acc total = Reduce(temp).Reduce(value, SumOp());
  __syncthreads();
  return total;
}

// One block: loss[0] = -(sum of row_value over the rows not ignored) / their count, count[0] = that
// count. Rows are summed in a fixed order (deterministic). The rows' values may be wider than the
// loss (R float for a 16-bit T), so that they are rounded once, in the loss.
template <class T, class R = T>
__global__ void mean_over_targets(const R* row_value, const int64_t* target, int64_t rows, int64_t ignore_index,
                                  T* loss, T* count) {
  using Acc = AccT<R>;
  __shared__ typename cub::BlockReduce<Acc, kMeanBlock>::TempStorage temp;
  Acc s = 0, k = 0;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < rows; i += kMeanBlock) {
    s += Acc(row_value[i]);
    k += target[i] != ignore_index ? Acc(1) : Acc(0);
  }
  s = block_sum(s, temp);
  k = block_sum(k, temp);
  if (threadIdx.x == 0) {
    loss[0] = static_cast<T>(-s / k);  // every row ignored: 0 / 0 = NaN, as PyTorch's
    count[0] = static_cast<T>(k);
  }
}

// The whole cross-entropy forward of a small batch in one block, when there are at most 1024 rows
// whose logits fit in shared memory (rows x classes <= kSmallBytes / sizeof(T), classes <= 64: a
// classifier's training batch). Two kernels (per-row softmax, then the mean) would cost twice the
// launch latency that dominates at this size. Logits and targets are loaded in one coalesced pass,
// and the barrier after it also counts the rows not ignored; a thread per row takes its log-sum-exp
// from shared memory; the gradient, when asked for, is written in one coalesced pass; the block then
// sums the rows' values in a fixed order, while those stores drain. 512 threads, each with up to two
// rows: in the MNIST MLP's graphed step at batch 512 on an H200 (bench --profile), 5.0 us against
// 5.8 with 1024 threads, one for each row a block may hold.
// T is the logits' type, L the loss's and G the gradient's: 16-bit logits are computed in float32,
// and may give a float32 loss (autocast's) and a gradient of either type.
constexpr int kSmallThreads = 512, kSmallMaxRows = 2 * kSmallThreads, kSmallBytes = 32 * 1024;
constexpr int kSmallMaxClasses = 64;

template <class T, class L, class G>
__global__ void __launch_bounds__(kSmallThreads)
    cross_entropy_small_kernel(const T* __restrict__ logits, const int64_t* __restrict__ target,
                               G* __restrict__ grad, int rows, int classes, int64_t ignore_index, L* loss, L* count,
                               DeviceErrorReport error) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  using C = compute_t<T>;
  using Acc = AccT<T>;
  __shared__ alignas(16) unsigned char x_bytes[kSmallBytes];  // T has a constructor: raw storage
  T* x = reinterpret_cast<T*>(x_bytes);
  __shared__ C lse_of[kSmallMaxRows];
  __shared__ int target_of[kSmallMaxRows];  // -1 on a row that counts for nothing
  using Reduce = cub::BlockReduce<Acc, kSmallThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const int n = rows * classes, first = static_cast<int>(threadIdx.x), second = first + kSmallThreads;
  const int64_t t0 = first < rows ? target[first] : ignore_index;
  const int64_t t1 = second < rows ? target[second] : ignore_index;
#pragma unroll 8  // the loads in flight together, not one round trip each
  for (int e = first; e < n; e += kSmallThreads) x[e] = logits[e];
  const int counted = __syncthreads_count(t0 != ignore_index) + __syncthreads_count(t1 != ignore_index);
  Acc value = 0;
  for (int row = first; row < rows; row += kSmallThreads) {
    const int64_t t = row == first ? t0 : t1;
    const T* p = x + row * classes;
    C m = -d_infinity<C>();
    for (int j = 0; j < classes; ++j) m = C(p[j]) > m ? C(p[j]) : m;
    Acc s = 0;
    for (int j = 0; j < classes; ++j) s += Acc(d_exp(C(p[j]) - m));
    const C lse = m + d_log(static_cast<C>(s));
    lse_of[row] = lse;
    target_of[row] = -1;
    if (t != ignore_index) {
      if (t >= 0 && t < classes) {
        value += Acc(C(p[t]) - lse);
        target_of[row] = static_cast<int>(t);
      } else {
        report_device_error(error, kCrossEntropyTarget, row, t, classes);
      }
    }
  }
  if (grad) {
    __syncthreads();
    const C scale = C(1) / static_cast<C>(counted);
    for (int e = first; e < n; e += kSmallThreads) {
      const int row = e / classes, t = target_of[row];
      const C one_hot = e - row * classes == t ? C(1) : C(0);
      grad[e] = static_cast<G>(t < 0 ? C(0) : (d_exp(C(x[e]) - lse_of[row]) - one_hot) * scale);
    }
  }
  const Acc total = Reduce(temp).Sum(value);
  if (threadIdx.x == 0) {
    loss[0] = static_cast<L>(-total / Acc(counted));  // every row ignored: 0 / 0 = NaN, as PyTorch's
    count[0] = static_cast<L>(counted);
  }
}

// The cross-entropy of many rows of at most 32 kRowsMaxPerLane classes (a language model's
// vocabulary of characters), in three kernels: the count of rows not ignored; then a warp per row
// holding the row's logits in registers, which takes their log-sum-exp, the row's log-probability at
// its target and, with the count known, the row's gradient, reading the logits once in their own
// type; then the mean of the rows' values (mean_over_targets). Through the softmax, the mean and the
// gradient as passes of their own, and 16-bit logits widened to float32 copies first, char_gpt's
// 16384 x 113 bfloat16 logits took 44 us a step on an H200. T, L and G as in the small kernel.
constexpr int kRowsMaxPerLane = 8;
constexpr int kRowsBlock = 256;

template <class L>
__global__ void count_targets_kernel(const int64_t* target, int64_t rows, int64_t ignore_index, L* count) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  using Reduce = cub::BlockReduce<int64_t, kMeanBlock>;
  __shared__ typename Reduce::TempStorage temp;
  int64_t k = 0;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < rows; i += kMeanBlock) k += target[i] != ignore_index ? 1 : 0;
  k = Reduce(temp).Sum(k);
  if (threadIdx.x == 0) count[0] = static_cast<L>(k);
}

template <class T, class L, class G, int kPerLane>
__global__ void __launch_bounds__(kRowsBlock)
    cross_entropy_rows_kernel(const T* __restrict__ logits, const int64_t* __restrict__ target,
                              const L* __restrict__ count, G* __restrict__ grad, compute_t<L>* __restrict__ row_value,
                              int64_t rows, int classes, int64_t ignore_index, DeviceErrorReport error) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  using C = compute_t<T>;
  using Acc = AccT<T>;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t warps = kRowsBlock / 32;
  const C scale = grad ? C(1) / static_cast<C>(*count) : C(0);
  for (int64_t row = blockIdx.x * warps + threadIdx.x / 32; row < rows; row += int64_t(gridDim.x) * warps) {
    const T* x = logits + row * classes;
    const int64_t t = target[row];
    C v[kPerLane];
    C m = -d_infinity<C>();
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      v[k] = j < classes ? static_cast<C>(x[j]) : -d_infinity<C>();
      m = v[k] > m ? v[k] : m;
    }
    m = warp_max(m);
    Acc s = 0;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k)
      if (lane + 32 * k < classes) s += Acc(d_exp(v[k] - m));
    const C lse = m + d_log(static_cast<C>(warp_sum(s)));
    const bool counted = t != ignore_index, valid = counted && t >= 0 && t < classes;
    if (lane == 0) {
      if (counted && !valid) report_device_error(error, kCrossEntropyTarget, row, t, classes);
      row_value[row] = valid ? static_cast<compute_t<L>>(static_cast<C>(x[t]) - lse) : compute_t<L>(0);
    }
    if (!grad) continue;
    G* g = grad + row * classes;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int j = lane + 32 * k;
      if (j >= classes) continue;
      const C one_hot = j == t ? C(1) : C(0);
      g[j] = static_cast<G>(valid ? (d_exp(v[k] - lse) - one_hot) * scale : C(0));
    }
  }
}

// One block: row_loss[i] = -w[t] * lp[i, t] (0 on ignored rows), total_weight[0] = sum of w[t] over
// the rows not ignored.
template <class T>
__global__ void nll_rows_kernel(const T* lp, const int64_t* target, const T* weight, int64_t rows, int64_t classes,
                                int64_t ignore_index, T* row_loss, T* total_weight, DeviceErrorReport error) {
  using Acc = AccT<T>;
  __shared__ typename cub::BlockReduce<Acc, kMeanBlock>::TempStorage temp;
  Acc total = 0;
  for (int64_t i = threadIdx.x; i < rows; i += kMeanBlock) {
    const int64_t t = target[i];
    T value = T(0);
    if (t != ignore_index) {
      if (t >= 0 && t < classes) {
        const T w = weight ? weight[t] : T(1);
        value = -w * lp[i * classes + t];
        total += Acc(w);
      } else {
        report_device_error(error, kNllLossTarget, i, t, classes);
      }
    }
    row_loss[i] = value;
  }
  total = block_sum(total, temp);
  if (threadIdx.x == 0) total_weight[0] = static_cast<T>(total);
}

// grad[i, j] = -grad_rows[i] * w[t] at j == t = target[i] (not ignored), else 0.
template <class T>
__global__ void nll_backward_kernel(const T* grad_rows, const int64_t* target, const T* weight, T* grad, int64_t rows,
                                    int64_t classes, int64_t ignore_index, DeviceErrorReport error) {
  const int64_t n = rows * classes;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / classes, j = k - i * classes;
    const int64_t t = target[i];
    const bool hit = j == t && t != ignore_index;
    grad[k] = hit ? -grad_rows[i] * (weight ? weight[t] : T(1)) : T(0);
    if (j == 0 && t != ignore_index && (t < 0 || t >= classes)) report_device_error(error, kNllLossTarget, i, t, classes);
  }
}

// grad[i, j] = (exp(log_probs[i, j]) - [j == target[i]]) / count: softmax minus one-hot, one pass;
// 0 on ignored rows (and on rows whose target is out of range, which the forward reported).
template <class T>
__global__ void cross_entropy_grad_kernel(const T* lp, const int64_t* target, const T* count, T* grad, int64_t rows,
                                          int64_t classes, int64_t ignore_index) {
  const int64_t n = rows * classes;
  const T scale = T(1) / count[0];
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / classes, j = k - i * classes;
    const int64_t t = target[i];
    grad[k] = t == ignore_index || t < 0 || t >= classes ? T(0) : (d_exp(lp[k]) - (j == t ? T(1) : T(0))) * scale;
  }
}

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): exp of a non-positive number never overflows.
template <class T>
__global__ void log_sigmoid_kernel(const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T v = x[i];
    out[i] = (v < T(0) ? v : T(0)) - log1p(d_exp(-fabs(v)));
  }
}

// grad * sigmoid(-x), from e = exp(-|x|): e / (1 + e) for x >= 0, 1 / (1 + e) below.
template <class T>
__global__ void log_sigmoid_backward_kernel(const T* grad, const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T v = x[i];
    const T e = d_exp(-fabs(v));
    out[i] = grad[i] * (v >= T(0) ? e : T(1)) / (T(1) + e);
  }
}

// Calls launch(L{}, G{}) with the loss's and the gradient's types for logits of type T: 16-bit logits
// give a loss in float32 (autocast's) or in their type, and a gradient likewise; others their own.
template <class T, class Launch>
void with_loss_and_grad_types(const Tensor& loss, const Tensor* grad, Launch&& launch) {
  if constexpr (is_16bit_float_v<T>) {
    const bool loss32 = loss.dtype() == kFloat32;
    const bool grad32 = grad && grad->dtype() == kFloat32;
    if (loss32 && grad32) launch(float(), float());
    else if (loss32) launch(float(), T());
    else if (grad32) launch(T(), float());
    else launch(T(), T());
  } else {
    launch(T(), T());
  }
}

}  // namespace

void CudaKernels::log_sigmoid(const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "log_sigmoid", [&](auto tag) {
    using T = decltype(tag);
    log_sigmoid_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(x), ptr<T>(out), n);
    CUDA_LAUNCH_CHECK(log_sigmoid_kernel);
  });
}

void CudaKernels::log_sigmoid_backward(const Tensor& grad_out, const Tensor& x, Tensor& grad_x) {
  const int64_t n = x.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(x.dtype(), "log_sigmoid_backward", [&](auto tag) {
    using T = decltype(tag);
    log_sigmoid_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(ptr<const T>(grad_out), ptr<const T>(x),
                                                                           ptr<T>(grad_x), n);
    CUDA_LAUNCH_CHECK(log_sigmoid_backward_kernel);
  });
}

void CudaKernels::nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor* weight, int64_t ignore_index,
                           Tensor& row_loss, Tensor& total_weight) {
  const int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(log_probs.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    nll_rows_kernel<T><<<1, kMeanBlock, 0, stream_>>>(ptr<const T>(log_probs), ptr<const int64_t>(target),
                                                      weight ? ptr<const T>(*weight) : nullptr, rows, classes,
                                                      ignore_index, ptr<T>(row_loss), ptr<T>(total_weight),
                                                      cuda::device_error_report(device_));
    CUDA_LAUNCH_CHECK(nll_rows_kernel);
  });
}

void CudaKernels::nll_loss_backward(const Tensor& grad_rows, const Tensor& target, const Tensor* weight,
                                    int64_t ignore_index, Tensor& grad_log_probs) {
  const int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  if (rows * classes == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_log_probs.dtype(), "nll_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    nll_backward_kernel<T><<<blocks_for(rows * classes), kThreads, 0, stream_>>>(
        ptr<const T>(grad_rows), ptr<const int64_t>(target), weight ? ptr<const T>(*weight) : nullptr,
        ptr<T>(grad_log_probs), rows, classes, ignore_index, cuda::device_error_report(device_));
    CUDA_LAUNCH_CHECK(nll_backward_kernel);
  });
}

void CudaKernels::cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Tensor& loss,
                                Tensor& count, Tensor* grad_logits) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  cuda::DeviceGuard guard(device_);
  const bool small = rows > 0 && rows <= kSmallMaxRows && classes > 0 && classes <= kSmallMaxClasses &&
                     rows * classes <= static_cast<int64_t>(kSmallBytes / element_size(logits.dtype()));
  if (small) {
    dispatch_floating_and_half(logits.dtype(), "cross_entropy", [&](auto tag) {
      using T = decltype(tag);
      with_loss_and_grad_types<T>(loss, grad_logits, [&](auto loss_tag, auto grad_tag) {
        using L = decltype(loss_tag);
        using G = decltype(grad_tag);
        launch_early("cross_entropy_small_kernel", cross_entropy_small_kernel<T, L, G>, 1, kSmallThreads, 0, stream_,
                     ptr<const T>(logits), ptr<const int64_t>(target), grad_logits ? ptr<G>(*grad_logits) : nullptr,
                     int(rows), int(classes), ignore_index, ptr<L>(loss), ptr<L>(count),
                     cuda::device_error_report(device_));
      });
    });
    return;
  }
  if (rows > 0 && classes > 0 && classes <= 32 * kRowsMaxPerLane) {
    dispatch_floating_and_half(logits.dtype(), "cross_entropy", [&](auto tag) {
      using T = decltype(tag);
      with_loss_and_grad_types<T>(loss, grad_logits, [&](auto loss_tag, auto grad_tag) {
        using L = decltype(loss_tag);
        using G = decltype(grad_tag);
        using R = compute_t<L>;  // the rows' values, rounded to L only in the mean
        Allocator& alloc = allocator_for(Device::cuda(device_));
        const size_t bytes = static_cast<size_t>(rows) * sizeof(R);
        R* row_value = static_cast<R*>(alloc.allocate(bytes));
        const int64_t* t = ptr<const int64_t>(target);
        if (grad_logits)
          launch_early("count_targets_kernel", count_targets_kernel<L>, 1, kMeanBlock, 0, stream_, t, rows,
                       ignore_index, ptr<L>(count));
        const unsigned blocks = blocks_for(rows, kRowsBlock / 32);
        auto run = [&](auto per_lane) {
          constexpr int P = decltype(per_lane)::value;
          launch_early("cross_entropy_rows_kernel", cross_entropy_rows_kernel<T, L, G, P>, blocks, kRowsBlock, 0,
                       stream_, ptr<const T>(logits), t, static_cast<const L*>(ptr<L>(count)),
                       grad_logits ? ptr<G>(*grad_logits) : nullptr, row_value, rows, static_cast<int>(classes),
                       ignore_index, cuda::device_error_report(device_));
        };
        if (classes <= 32) run(std::integral_constant<int, 1>{});
        else if (classes <= 64) run(std::integral_constant<int, 2>{});
        else if (classes <= 128) run(std::integral_constant<int, 4>{});
        else run(std::integral_constant<int, 8>{});
        mean_over_targets<L, R><<<1, kMeanBlock, 0, stream_>>>(row_value, t, rows, ignore_index, ptr<L>(loss),
                                                               ptr<L>(count));
        CUDA_LAUNCH_CHECK(mean_over_targets);
        alloc.deallocate(row_value, bytes);  // reused only by later work on this stream
      });
    });
    return;
  }
  if (is_reduced_floating(logits.dtype())) {
    // Longer rows take the softmax's block-per-row path, in the logits' own type: 16-bit logits go
    // through float32.
    cross_entropy_widened(*this, logits, target, ignore_index, loss, count, grad_logits);
    return;
  }
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    T* grad = grad_logits ? ptr<T>(*grad_logits) : nullptr;
    // Pass 1, per row: max, log-sum-exp, the log-probs and the row's log-probability at its target.
    // Pass 2: minus their mean over the rows not ignored. Pass 3, with a gradient: from the log-probs
    // and the count.
    Allocator& alloc = allocator_for(Device::cuda(device_));
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(T);
    T* row_value = static_cast<T*>(alloc.allocate(bytes));
    Tensor log_probs = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
    RowOutput<T> extra{ptr<const int64_t>(target), row_value, cuda::device_error_report(device_), ignore_index};
    launch_softmax<T>(ptr<const T>(logits), ptr<T>(log_probs), rows, classes, 1, /*log=*/true, stream_, extra);
    mean_over_targets<T><<<1, kMeanBlock, 0, stream_>>>(row_value, ptr<const int64_t>(target), rows, ignore_index,
                                                        ptr<T>(loss), ptr<T>(count));
    CUDA_LAUNCH_CHECK(mean_over_targets);
    alloc.deallocate(row_value, bytes);  // reused only by later work on this stream
    if (grad && rows * classes > 0) {
      cross_entropy_grad_kernel<T><<<blocks_for(rows * classes), kThreads, 0, stream_>>>(
          ptr<const T>(log_probs), ptr<const int64_t>(target), ptr<const T>(count), grad, rows, classes, ignore_index);
      CUDA_LAUNCH_CHECK(cross_entropy_grad_kernel);
    }
  });
}

}  // namespace minidl
