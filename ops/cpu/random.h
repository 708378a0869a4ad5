#pragma once
// Random fills. The global generator's engine draws one seed per fixed-size chunk, in order; the
// chunks are then filled in parallel, each from its own engine. The values depend only on the
// seed and the tensor size, never on the thread count.
#include <random>

#include "core/random.h"
#include "core/tensor.h"

namespace minidl::cpu {

/// Fills `dst` with `make_dist()(engine)` draws; `make_dist` builds a fresh distribution per chunk.
template <class MakeDist>
void fill_random(Tensor& dst, const char* what, MakeDist&& make_dist) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n = dst.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<uint64_t> seeds(static_cast<size_t>(chunks));
  {
    Generator& gen = default_generator();
    std::lock_guard lock(gen.mutex());
    for (auto& s : seeds) s = gen.engine()();
  }
  dispatch_floating(dst.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      std::mt19937_64 engine(seeds[static_cast<size_t>(c)]);
      auto dist = make_dist();
      for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i) d[i] = static_cast<T>(dist(engine));
    }
  });
}

}  // namespace minidl::cpu
