// Cumulative scans (sum, product, max, min, logaddexp: ops/scan_step.h) over the middle axis of an
// [outer, n, inner] view, and cumprod's exact gradient. Each (outer, column) pair is an independent
// sequential scan; with inner > 1 a block of columns advances together so that each row of the block
// is read contiguously.
#include <algorithm>
#include <type_traits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/scan_step.h"

namespace minidl {

namespace {

template <class T>
using ScanAcc = std::conditional_t<std::is_same_v<T, float>, double, compute_t<T>>;

template <class T, ScanOp kOp>
void scan_kernel(const T* in, int64_t outer, int64_t n, int64_t inner, bool reverse, T* out) {
  using Acc = ScanAcc<T>;
  const ScanStep<Acc, kOp> step_fn;
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
#pragma omp parallel for collapse(2) if (outer * n * inner > 32768)
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t c0 = ch * kColumns, len = std::min(kColumns, inner - c0);
      const int64_t base = a * n * inner + c0;
      Acc acc[kColumns];
      std::fill(acc, acc + len, step_fn.identity());
      for (int64_t step = 0; step < n; ++step) {
        const int64_t i = reverse ? n - 1 - step : step;
        const T* row = in + base + i * inner;
        T* o = out + base + i * inner;
        for (int64_t c = 0; c < len; ++c) {
          acc[c] = step_fn(acc[c], static_cast<Acc>(row[c]));
          o[c] = static_cast<T>(acc[c]);
        }
      }
    }
  }
}

// grad_in[i] = P[i] * S[i] with P[i] the product of x before i and S[i] = g[i] + x[i+1] * S[i+1]
// (the sum over j >= i of g[j] times the product of x over (i, j]): no division, so zeros in x give
// the exact gradient.
template <class T>
void cumprod_backward_kernel(const T* x, const T* g, int64_t outer, int64_t n, int64_t inner, T* grad) {
  using Acc = ScanAcc<T>;
#pragma omp parallel for collapse(2) if (outer * n * inner > 32768)
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t c = 0; c < inner; ++c) {
      const int64_t base = a * n * inner + c;
      Acc s = 0;
      for (int64_t i = n - 1; i >= 0; --i) {
        const int64_t at = base + i * inner;
        s = static_cast<Acc>(g[at]) + (i + 1 < n ? static_cast<Acc>(x[at + inner]) * s : Acc(0));
        grad[at] = static_cast<T>(s);
      }
      Acc p = 1;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = base + i * inner;
        grad[at] = static_cast<T>(p * static_cast<Acc>(grad[at]));
        p *= static_cast<Acc>(x[at]);
      }
    }
  }
}

}  // namespace

void CpuKernels::scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, Tensor& out) {
  MINIDL_CHECK(op != ScanOp::LogAddExp || is_floating(x.dtype()), "scan: logaddexp needs a floating tensor, got ",
               x.dtype());
  dispatch_all_and_half(x.dtype(), "scan", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = out.data<T>();
    switch (op) {
      case ScanOp::Sum: return scan_kernel<T, ScanOp::Sum>(in, outer, n, inner, reverse, o);
      case ScanOp::Prod: return scan_kernel<T, ScanOp::Prod>(in, outer, n, inner, reverse, o);
      case ScanOp::Max: return scan_kernel<T, ScanOp::Max>(in, outer, n, inner, reverse, o);
      case ScanOp::Min: return scan_kernel<T, ScanOp::Min>(in, outer, n, inner, reverse, o);
      case ScanOp::LogAddExp:
        if constexpr (!std::is_integral_v<T>) return scan_kernel<T, ScanOp::LogAddExp>(in, outer, n, inner, reverse, o);
        return;
    }
  });
}

void CpuKernels::cumprod_backward(const Tensor& x, const Tensor& grad_out, int64_t outer, int64_t n, int64_t inner,
                                  Tensor& grad_in) {
  dispatch_floating(x.dtype(), "cumprod_backward", [&](auto tag) {
    using T = decltype(tag);
    cumprod_backward_kernel<T>(x.data<T>(), grad_out.data<T>(), outer, n, inner, grad_in.data<T>());
  });
}

}  // namespace minidl
