#pragma once
// Walking tensors of any strides on the CPU. Elementwise kernels take the fast flat path when every
// operand is contiguous; otherwise they walk the index space here, innermost dimension in a tight loop.
#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace minidl::cpu {

/// Calls body(offsets, count, inner_strides) for each innermost row of `shape`, where offsets[k] is
/// the element offset of operand k at the row's start. Rows are split across OpenMP threads.
template <size_t K, class Body>
void for_each_row(const Shape& shape, const std::array<const Strides*, K>& strides, Body&& body) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) {
    std::array<int64_t, K> offsets{};
    std::array<int64_t, K> inner{};
    body(offsets, int64_t{1}, inner);
    return;
  }
  const int64_t inner_size = shape[rank - 1];
  std::array<int64_t, K> inner;
  for (size_t k = 0; k < K; ++k) inner[k] = (*strides[k])[rank - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d < rank - 1; ++d) rows *= shape[d];
#pragma omp parallel for schedule(static) if (rows * inner_size > 32768)
  for (int64_t row = 0; row < rows; ++row) {
    std::array<int64_t, K> offsets{};
    int64_t rem = row;
    for (int64_t d = rank - 2; d >= 0; --d) {
      int64_t i = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < K; ++k) offsets[k] += i * (*strides[k])[d];
    }
    body(offsets, inner_size, inner);
  }
}

}  // namespace minidl::cpu
