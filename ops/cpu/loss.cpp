// Classification-loss kernels over [N, C] rows with int64 class targets. Targets are checked
// before any row is read: an index past a row would read another sample's memory and give a
// plausible-looking but wrong loss. A row whose target is ignore_index is skipped, whatever its value.
#include <Eigen/Core>
#include <cmath>
#include <cstring>

#include "ops/cpu/cpu_kernels.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

void check_targets(const char* op, const Tensor& target, int64_t classes, int64_t ignore_index) {
  const int64_t* t = target.data<int64_t>();
  for (int64_t i = 0, n = target.numel(); i < n; ++i) {
    if (t[i] == ignore_index) continue;
    MINIDL_CHECK(t[i] >= 0 && t[i] < classes, op, ": target ", t[i], " at position ", i, " is out of range for ",
                 classes, " classes (expected 0 <= target < ", classes, ", or ignore_index ", ignore_index, ")");
  }
}

// The weight of class t: weight[t], or 1 without class weights.
template <class T>
T class_weight(const Tensor* weight, int64_t t) {
  return weight ? weight->data<T>()[t] : T(1);
}

}  // namespace

void CpuKernels::nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor* weight, int64_t ignore_index,
                          Tensor& row_loss, Tensor& total_weight) {
  const int64_t n = log_probs.size(0), c = log_probs.size(1);
  check_targets("nll_loss", target, c, ignore_index);
  dispatch_floating(log_probs.dtype(), "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* lp = log_probs.data<T>();
    const int64_t* t = target.data<int64_t>();
    T* rows = row_loss.data<T>();
    double total = 0;  // in double, so a large batch keeps its digits
    for (int64_t i = 0; i < n; ++i) {
      if (t[i] == ignore_index) {
        rows[i] = T(0);
        continue;
      }
      const T w = class_weight<T>(weight, t[i]);
      rows[i] = -w * lp[i * c + t[i]];
      total += w;
    }
    total_weight.data<T>()[0] = static_cast<T>(total);
  });
}

void CpuKernels::nll_loss_backward(const Tensor& grad_rows, const Tensor& target, const Tensor* weight,
                                   int64_t ignore_index, Tensor& grad_log_probs) {
  const int64_t n = grad_log_probs.size(0), c = grad_log_probs.size(1);
  check_targets("nll_loss", target, c, ignore_index);
  dispatch_floating(grad_log_probs.dtype(), "nll_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    T* g = grad_log_probs.data<T>();
    const T* gr = grad_rows.data<T>();
    const int64_t* t = target.data<int64_t>();
    std::memset(g, 0, grad_log_probs.nbytes());
    for (int64_t i = 0; i < n; ++i)
      if (t[i] != ignore_index) g[i * c + t[i]] = -gr[i] * class_weight<T>(weight, t[i]);
  });
}

void CpuKernels::cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Tensor& loss,
                               Tensor& count, Tensor* grad_logits) {
  const int64_t n = logits.size(0), c = logits.size(1);
  check_targets("cross_entropy", target, c, ignore_index);
  if (is_reduced_floating(logits.dtype())) {  // through float32, each output rounded to its own dtype
    cross_entropy_widened(*this, logits, target, ignore_index, loss, count, grad_logits);
    return;
  }
  Tensor log_probs = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  softmax(logits, n, c, 1, /*log=*/true, log_probs);
  dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* lp = log_probs.data<T>();
    const int64_t* t = target.data<int64_t>();
    double total = 0;
    int64_t counted = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (t[i] == ignore_index) continue;
      total += lp[i * c + t[i]];
      ++counted;
    }
    // Every row ignored gives 0 / 0 = NaN, as PyTorch's mean over no targets.
    loss.data<T>()[0] = static_cast<T>(-total / static_cast<double>(counted));
    count.data<T>()[0] = static_cast<T>(counted);
    if (!grad_logits) return;
    T* g = grad_logits->data<T>();
    const T scale = T(1) / static_cast<T>(counted);
    // One pass: softmax is exp(log_probs), the one-hot is a single subtraction per row.
#pragma omp parallel for schedule(static) if (n * c > 16384)
    for (int64_t i = 0; i < n; ++i) {
      using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
      using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
      if (t[i] == ignore_index) {
        Row(g + i * c, c).setZero();
        continue;
      }
      Row(g + i * c, c) = ConstRow(lp + i * c, c).exp() * scale;
      g[i * c + t[i]] -= scale;
    }
  });
}

// log(sigmoid(x)) through whichever of exp(-|x|) never overflows; its derivative, sigmoid(-x), likewise.
void CpuKernels::log_sigmoid(const Tensor& x, Tensor& out) {
  dispatch_floating(x.dtype(), "log_sigmoid", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    const int64_t n = x.numel();
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) o[i] = std::min(in[i], T(0)) - std::log1p(std::exp(-std::abs(in[i])));
  });
}

void CpuKernels::log_sigmoid_backward(const Tensor& grad_out, const Tensor& x, Tensor& grad_x) {
  dispatch_floating(x.dtype(), "log_sigmoid_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = grad_out.data<T>();
    const T* in = x.data<T>();
    T* o = grad_x.data<T>();
    const int64_t n = x.numel();
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) {
      const T e = std::exp(-std::abs(in[i]));  // sigmoid(-x) = e / (1 + e) for x >= 0, 1 / (1 + e) below
      o[i] = g[i] * (in[i] >= T(0) ? e : T(1)) / (T(1) + e);
    }
  });
}

}  // namespace minidl
