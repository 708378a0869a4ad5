// Classification-loss kernels over [N, C] rows with int64 class targets. Targets are checked
// before any row is read: an index past a row would read another sample's memory and give a
// plausible-looking but wrong loss.
#include <Eigen/Core>
#include <cstring>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

void check_targets(const char* op, const Tensor& target, int64_t classes) {
  const int64_t* t = target.data<int64_t>();
  for (int64_t i = 0, n = target.numel(); i < n; ++i) {
    MINIDL_CHECK(t[i] >= 0 && t[i] < classes, op, ": target ", t[i], " at position ", i, " is out of range for ",
                 classes, " classes (expected 0 <= target < ", classes, ")");
  }
}

// -mean_i log_probs[i, target[i]], accumulated in double so a large batch keeps its digits.
template <class T>
void write_nll(const Tensor& log_probs, const Tensor& target, Tensor& loss) {
  const int64_t n = log_probs.size(0), c = log_probs.size(1);
  const T* lp = log_probs.data<T>();
  const int64_t* t = target.data<int64_t>();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += lp[i * c + t[i]];
  loss.data<T>()[0] = static_cast<T>(-total / static_cast<double>(n));
}

}  // namespace

void CpuKernels::nll_loss(const Tensor& log_probs, const Tensor& target, Tensor& loss) {
  check_targets("nll_loss", target, log_probs.size(1));
  dispatch_floating(log_probs.dtype(), "nll_loss", [&](auto tag) { write_nll<decltype(tag)>(log_probs, target, loss); });
}

void CpuKernels::nll_loss_backward(const Tensor& grad_loss, const Tensor& target, Tensor& grad_log_probs) {
  const int64_t n = grad_log_probs.size(0), c = grad_log_probs.size(1);
  check_targets("nll_loss", target, c);
  dispatch_floating(grad_log_probs.dtype(), "nll_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    T* g = grad_log_probs.data<T>();
    const int64_t* t = target.data<int64_t>();
    const T scale = -grad_loss.data<T>()[0] / static_cast<T>(n);
    std::memset(g, 0, grad_log_probs.nbytes());
    for (int64_t i = 0; i < n; ++i) g[i * c + t[i]] = scale;
  });
}

void CpuKernels::cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& log_probs) {
  check_targets("cross_entropy", target, logits.size(1));
  softmax(logits, logits.size(0), logits.size(1), 1, /*log=*/true, log_probs);
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) { write_nll<decltype(tag)>(log_probs, target, loss); });
}

void CpuKernels::cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs, const Tensor& target,
                                        Tensor& grad_logits) {
  const int64_t n = log_probs.size(0), c = log_probs.size(1);
  check_targets("cross_entropy", target, c);
  dispatch_floating(log_probs.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* lp = log_probs.data<T>();
    const int64_t* t = target.data<int64_t>();
    T* g = grad_logits.data<T>();
    const T scale = grad_loss.data<T>()[0] / static_cast<T>(n);
    // One pass: softmax is exp(log_probs), the one-hot is a single subtraction per row.
#pragma omp parallel for schedule(static) if (n * c > 16384)
    for (int64_t i = 0; i < n; ++i) {
      using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
      using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
      Row(g + i * c, c) = ConstRow(lp + i * c, c).exp() * scale;
      g[i * c + t[i]] -= scale;
    }
  });
}

}  // namespace minidl
