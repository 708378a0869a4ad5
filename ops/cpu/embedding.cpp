// Embedding's backward: each id's gradient rows summed in position order, the reference the CUDA
// kernel matches bit for bit. Threads split the columns, never the positions, so the order of the
// additions into one element (and so its bits) does not depend on the thread count.
#include <algorithm>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

void CpuKernels::embedding_backward(const Tensor& grad, const Tensor& ids, int64_t padding_idx,
                                    bool scale_grad_by_freq, Tensor& grad_weight) {
  const int64_t n = ids.numel(), rows = grad_weight.size(0), d = grad_weight.size(1);
  const int64_t* id = ids.data<int64_t>();
  std::vector<int64_t> count(static_cast<size_t>(rows), 0);
  for (int64_t i = 0; i < n; ++i) {
    MINIDL_CHECK(id[i] >= 0 && id[i] < rows, "embedding_backward: id ", id[i], " at position ", i,
                 " is out of range for a weight of ", rows, " rows (expected 0 <= id < ", rows, ")");
    ++count[static_cast<size_t>(id[i])];
  }
  dispatch_floating_and_half(grad.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    using Acc = compute_t<T>;  // float for the 16-bit types: rounded once, at the end
    const T* g = grad.data<T>();
    T* out = grad_weight.data<T>();
    std::vector<Acc> sums(static_cast<size_t>(rows * d), Acc(0));
    constexpr int64_t kBlock = 64;  // columns per task: whole cache lines of each row
    const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for if (blocks > 1 && n * d > 32768)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t begin = b * kBlock, end = std::min(d, begin + kBlock);
      for (int64_t i = 0; i < n; ++i) {
        if (id[i] == padding_idx) continue;
        Acc* to = sums.data() + id[i] * d;
        const T* from = g + i * d;
        for (int64_t c = begin; c < end; ++c) to[c] += static_cast<Acc>(from[c]);
      }
    }
    for (int64_t v = 0; v < rows; ++v) {
      const bool scale = scale_grad_by_freq && count[static_cast<size_t>(v)] > 1;
      const Acc by = static_cast<Acc>(count[static_cast<size_t>(v)]);
      for (int64_t c = 0; c < d; ++c) {
        const Acc s = sums[static_cast<size_t>(v * d + c)];
        out[v * d + c] = static_cast<T>(scale ? s / by : s);
      }
    }
  });
}

}  // namespace minidl
