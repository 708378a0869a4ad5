// Row-wise stable sort: each row's positions are sorted by their values with std::stable_sort, so
// equal elements keep their order, as the CUDA radix sort keeps it; NaN compares as the largest
// value (PyTorch's order), and -0.0 equals 0.0.
#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

namespace {

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T> || is_16bit_float_v<T>) return v != v;
  else return false;
}

template <class T>
void sort_rows(const T* x, int64_t rows, int64_t n, bool descending, T* values, int64_t* indices) {
#pragma omp parallel for if (rows * n > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    int64_t* idx = indices + r * n;
    std::iota(idx, idx + n, int64_t(0));
    // "a before b": a strict weak order in which NaN follows every number.
    auto ascending = [row](int64_t a, int64_t b) {
      const T va = row[a], vb = row[b];
      if (is_nan(vb)) return !is_nan(va);
      return va < vb;
    };
    auto descending_order = [row](int64_t a, int64_t b) {
      const T va = row[a], vb = row[b];
      if (is_nan(va)) return !is_nan(vb);
      return va > vb;
    };
    if (descending) std::stable_sort(idx, idx + n, descending_order);
    else std::stable_sort(idx, idx + n, ascending);
    for (int64_t j = 0; j < n; ++j) values[r * n + j] = row[idx[j]];
  }
}

}  // namespace

void CpuKernels::sort(const Tensor& x, int64_t rows, int64_t n, bool descending, Tensor& values, Tensor& indices) {
  dispatch_all_and_half(x.dtype(), "sort", [&](auto tag) {
    using T = decltype(tag);
    sort_rows<T>(x.data<T>(), rows, n, descending, values.data<T>(), indices.data<int64_t>());
  });
}

}  // namespace minidl
