// NLL and the fused cross-entropy on CUDA. Targets are read on the device and the loss stays there:
// no host sync. A target out of range cannot throw from a kernel: its sample contributes 0, nothing
// is read out of bounds, and the device error flag makes the next synchronization throw
// (core/cuda/context.h). The CPU kernels check targets up front and throw at once.
#include "ops/cuda/softmax.cuh"

namespace minidl {

namespace {

using namespace cuda;

constexpr int kMeanBlock = 256;

// loss[0] = -(sum_i value(i)) / rows with value(i) = lp[i, target[i]] (gather) or row_value[i].
template <class T>
__global__ void negative_mean(const T* lp, const int64_t* target, const T* row_value, int64_t rows, int64_t classes,
                              T* loss, int* error) {
  using Acc = AccT<T>;
  using Reduce = cub::BlockReduce<Acc, kMeanBlock>;
  __shared__ typename Reduce::TempStorage temp;
  Acc s = 0;
  for (int64_t i = threadIdx.x; i < rows; i += kMeanBlock) {
    if (row_value) {
      s += Acc(row_value[i]);
    } else {
      const int64_t t = target[i];
      if (t >= 0 && t < classes) s += Acc(lp[i * classes + t]);
      else *error = kTargetOutOfRange;
    }
  }
  s = Reduce(temp).Reduce(s, SumOp());
  if (threadIdx.x == 0) loss[0] = static_cast<T>(-s / Acc(rows));
}

// grad[i, j] = -g / N at j == target[i], else 0.
template <class T>
__global__ void nll_backward_kernel(const T* grad_loss, const int64_t* target, T* grad, int64_t rows, int64_t classes,
                                    int* error) {
  const int64_t n = rows * classes;
  const T scale = -grad_loss[0] / static_cast<T>(rows);
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / classes, j = k - i * classes;
    const int64_t t = target[i];
    grad[k] = j == t ? scale : T(0);
    if (j == 0 && (t < 0 || t >= classes)) *error = kTargetOutOfRange;
  }
}

// grad[i, j] = (exp(log_probs[i, j]) - [j == target[i]]) * g / N: softmax minus one-hot, one pass.
template <class T>
__global__ void cross_entropy_backward_kernel(const T* grad_loss, const T* lp, const int64_t* target, T* grad,
                                              int64_t rows, int64_t classes, int* error) {
  const int64_t n = rows * classes;
  const T scale = grad_loss[0] / static_cast<T>(rows);
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / classes, j = k - i * classes;
    const int64_t t = target[i];
    grad[k] = (d_exp(lp[k]) - (j == t ? T(1) : T(0))) * scale;
    if (j == 0 && (t < 0 || t >= classes)) *error = kTargetOutOfRange;
  }
}

}  // namespace

void CudaKernels::nll_loss(const Tensor& log_probs, const Tensor& target, Tensor& loss) {
  const int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(log_probs.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    negative_mean<T><<<1, kMeanBlock, 0, stream_>>>(ptr<const T>(log_probs), ptr<const int64_t>(target), nullptr, rows,
                                                    classes, ptr<T>(loss), cuda::device_error_flag(device_));
    CUDA_LAUNCH_CHECK(negative_mean);
  });
}

void CudaKernels::nll_loss_backward(const Tensor& grad_loss, const Tensor& target, Tensor& grad_log_probs) {
  const int64_t rows = grad_log_probs.size(0), classes = grad_log_probs.size(1);
  if (rows * classes == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(grad_log_probs.dtype(), "nll_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    nll_backward_kernel<T><<<blocks_for(rows * classes), kThreads, 0, stream_>>>(
        ptr<const T>(grad_loss), ptr<const int64_t>(target), ptr<T>(grad_log_probs), rows, classes,
        cuda::device_error_flag(device_));
    CUDA_LAUNCH_CHECK(nll_backward_kernel);
  });
}

void CudaKernels::cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& log_probs) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  cuda::DeviceGuard guard(device_);
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    // Pass 1, per row: max, log-sum-exp, the log-probs (saved for backward) and the row's
    // log-probability at its target. Pass 2: minus their mean, in a fixed order (deterministic).
    Allocator& alloc = allocator_for(Device::cuda(device_));
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(T);
    T* row_value = static_cast<T*>(alloc.allocate(bytes));
    RowOutput<T> extra{ptr<const int64_t>(target), row_value, cuda::device_error_flag(device_)};
    launch_softmax<T>(ptr<const T>(logits), ptr<T>(log_probs), rows, classes, 1, /*log=*/true, stream_, extra);
    negative_mean<T><<<1, kMeanBlock, 0, stream_>>>(nullptr, nullptr, row_value, rows, classes, ptr<T>(loss), nullptr);
    CUDA_LAUNCH_CHECK(negative_mean);
    alloc.deallocate(row_value, bytes);  // reused only by later work on this stream
  });
}

void CudaKernels::cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs, const Tensor& target,
                                         Tensor& grad_logits) {
  const int64_t rows = log_probs.size(0), classes = log_probs.size(1);
  if (rows * classes == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_floating(log_probs.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_backward_kernel<T><<<blocks_for(rows * classes), kThreads, 0, stream_>>>(
        ptr<const T>(grad_loss), ptr<const T>(log_probs), ptr<const int64_t>(target), ptr<T>(grad_logits), rows,
        classes, cuda::device_error_flag(device_));
    CUDA_LAUNCH_CHECK(cross_entropy_backward_kernel);
  });
}

}  // namespace minidl
