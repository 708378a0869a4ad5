// Embedding's backward: each id's gradient rows, in position order, dealt round-robin into
// kEmbeddingGradLanes partial sums that are then added in lane order (ops/kernels.h): the reference
// the CUDA kernel matches bit for bit. Threads split the ids and the columns, never the positions,
// so the order of the additions into one element (and so its bits) does not depend on the thread count.
#include <algorithm>
#include <vector>

#include "ops/cpu/cpu_kernels.h"

namespace minidl {

void CpuKernels::embedding_backward(const Tensor& grad, const Tensor& ids, const Tensor& /*plan*/,
                                    int64_t padding_idx, bool scale_grad_by_freq, Tensor& grad_weight) {
  const int64_t n = ids.numel(), rows = grad_weight.size(0), d = grad_weight.size(1);
  const int64_t* id = ids.data<int64_t>();
  // The positions of each id in order (a counting sort): run_start[v] .. run_start[v + 1].
  std::vector<int64_t> run_start(static_cast<size_t>(rows + 1), 0);
  for (int64_t i = 0; i < n; ++i) {
    MINIDL_CHECK(id[i] >= 0 && id[i] < rows, "embedding_backward: id ", id[i], " at position ", i,
                 " is out of range for a weight of ", rows, " rows (expected 0 <= id < ", rows, ")");
    ++run_start[static_cast<size_t>(id[i] + 1)];
  }
  for (int64_t v = 0; v < rows; ++v) run_start[static_cast<size_t>(v + 1)] += run_start[static_cast<size_t>(v)];
  std::vector<int64_t> order(static_cast<size_t>(n)), next(run_start.begin(), run_start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(next[static_cast<size_t>(id[i])]++)] = i;
  dispatch_floating_and_half(grad.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    using Acc = compute_t<T>;  // float for the 16-bit types: rounded once, at the end
    const T* g = grad.data<T>();
    T* out = grad_weight.data<T>();
    constexpr int64_t kBlock = 64;  // columns per task: whole cache lines of each row
    const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for collapse(2) if (n * d > 32768)
    for (int64_t v = 0; v < rows; ++v) {
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * kBlock, end = std::min(d, begin + kBlock);
        const int64_t first = run_start[static_cast<size_t>(v)], last = run_start[static_cast<size_t>(v + 1)];
        const int64_t count = last - first;
        // Lanes past the run's length hold zero: leaving them out adds nothing to a sum that began
        // at +0 (it is never -0), so the bits are the CUDA kernel's.
        const int64_t lanes = v == padding_idx ? 0 : std::min<int64_t>(count, kEmbeddingGradLanes);
        Acc partial[kEmbeddingGradLanes][kBlock];
        for (int64_t lane = 0; lane < lanes; ++lane) std::fill_n(partial[lane], end - begin, Acc(0));
        for (int64_t k = first; lanes > 0 && k < last; ++k) {
          Acc* to = partial[(k - first) % kEmbeddingGradLanes];
          const T* from = g + order[static_cast<size_t>(k)] * d;
          for (int64_t c = begin; c < end; ++c) to[c - begin] += static_cast<Acc>(from[c]);
        }
        const bool scale = scale_grad_by_freq && count > 1;
        for (int64_t c = begin; c < end; ++c) {
          Acc s = lanes > 0 ? partial[0][c - begin] : Acc(0);
          for (int64_t lane = 1; lane < lanes; ++lane) s += partial[lane][c - begin];
          out[v * d + c] = static_cast<T>(scale ? s / static_cast<Acc>(count) : s);
        }
      }
    }
  });
}

}  // namespace minidl
