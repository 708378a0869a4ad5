// Reduction over the middle axis of an [outer, n, inner] view. Sums walk n in the outer loop and a
// run of contiguous inner columns in the inner loop, so a sum over dim 0 (a bias gradient) streams
// its rows instead of striding down each column.
#include <algorithm>
#include <vector>
#include <limits>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

// Sums of contiguous rows (inner == 1: a full sum, a row sum): each row in fixed blocks summed with
// vector accumulators, the blocks added in order. The blocks, not the threads, fix the order of the
// additions, so the bits do not depend on the thread count.
template <class T, class Acc, class O>
void sum_rows(const T* in, int64_t outer, int64_t n, O* o) {
  constexpr int64_t kBlock = 1 << 14;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks == 1) {  // short rows: each row's one block is its sum, nothing to keep in between
#pragma omp parallel for if (outer * n > 32768)
    for (int64_t a = 0; a < outer; ++a) {
      Acc acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < n; ++i) acc += static_cast<Acc>(in[a * n + i]);
      o[a] = static_cast<O>(acc);
    }
    return;
  }
  std::vector<Acc> partial(static_cast<size_t>(outer * blocks));
#pragma omp parallel for collapse(2) if (outer * n > 32768)
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t b = 0; b < blocks; ++b) {
      const T* p = in + a * n + b * kBlock;
      const int64_t len = std::min(kBlock, n - b * kBlock);
      Acc acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < len; ++i) acc += static_cast<Acc>(p[i]);
      partial[static_cast<size_t>(a * blocks + b)] = acc;
    }
  }
  for (int64_t a = 0; a < outer; ++a) {
    Acc total = 0;
    for (int64_t b = 0; b < blocks; ++b) total += partial[static_cast<size_t>(a * blocks + b)];
    o[a] = static_cast<O>(total);
  }
}

// O is T, or float for a float32 sum of 16-bit values (a 16-bit mean's, which must not round its
// sum to the 16-bit dtype first).
template <class T, class O = T>
void sum_kernel(const T* in, int64_t outer, int64_t n, int64_t inner, O* o) {
  // Accumulate float32 sums in double: a sum over 60,000 elements keeps its digits; 16-bit ones in float.
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, compute_t<T>>;
  if (inner == 1 && n >= 64) {
    sum_rows<T, Acc>(in, outer, n, o);
    return;
  }
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
#pragma omp parallel for collapse(2) if (outer * n * inner > 32768)
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t c0 = ch * kColumns, len = std::min(kColumns, inner - c0);
      const T* p = in + a * n * inner + c0;
      Acc acc[kColumns] = {};
      for (int64_t i = 0; i < n; ++i) {
        const T* row = p + i * inner;
        for (int64_t c = 0; c < len; ++c) acc[c] += row[c];
      }
      for (int64_t c = 0; c < len; ++c) o[a * inner + c0 + c] = static_cast<O>(acc[c]);
    }
  }
}

// Products walk the rows in order (no blocking): a product of many elements overflows or vanishes
// long before its rounding order matters.
template <class T>
void prod_kernel(const T* in, int64_t outer, int64_t n, int64_t inner, T* o) {
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, compute_t<T>>;
#pragma omp parallel for collapse(2) if (outer * n * inner > 32768)
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t c = 0; c < inner; ++c) {
      const T* p = in + a * n * inner + c;
      Acc acc = 1;
      for (int64_t i = 0; i < n; ++i) acc *= static_cast<Acc>(p[i * inner]);
      o[a * inner + c] = static_cast<T>(acc);
    }
  }
}

template <class T>
void max_kernel(const T* in, int64_t outer, int64_t n, int64_t inner, T* o, int64_t* idx) {
#pragma omp parallel for collapse(2) if (outer * n * inner > 32768)
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t c = 0; c < inner; ++c) {
      const T* p = in + a * n * inner + c;
      T best = p[0];
      int64_t best_i = 0;
      for (int64_t i = 1; i < n; ++i) {
        // NaN wins, as in PyTorch: a NaN in the input must show in the output.
        if (p[i * inner] > best || (p[i * inner] != p[i * inner] && best == best)) {
          best = p[i * inner];
          best_i = i;
        }
      }
      o[a * inner + c] = best;
      if (idx) idx[a * inner + c] = best_i;
    }
  }
}

}  // namespace

void CpuKernels::reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out,
                        Tensor* argmax) {
  const bool widening = out.dtype() != x.dtype();
  MINIDL_CHECK(!widening || (op == ReduceOp::Sum && is_reduced_floating(x.dtype()) && out.dtype() == kFloat32),
               "reduce on the CPU: expected the output in the input's dtype (or a float32 sum of 16-bit values), got ",
               x.dtype(), " into ", out.dtype());
  dispatch_all_and_half(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_16bit_float_v<T>) {
      if (widening) return sum_kernel<T, float>(x.data<T>(), outer, n, inner, out.data<float>());
    }
    if (op == ReduceOp::Sum) sum_kernel<T>(x.data<T>(), outer, n, inner, out.data<T>());
    else if (op == ReduceOp::Prod) prod_kernel<T>(x.data<T>(), outer, n, inner, out.data<T>());
    else max_kernel<T>(x.data<T>(), outer, n, inner, out.data<T>(), argmax ? argmax->data<int64_t>() : nullptr);
  });
}

}  // namespace minidl
