#pragma once
// Random fills. The global generator's engine draws one seed per fixed-size chunk, in order; the
// chunks are then filled in parallel, each from its own engine. The values depend only on the
// seed and the tensor size, never on the thread count.
#include <random>

#include "core/random.h"
#include "core/tensor.h"

namespace minidl::cpu {

/// Calls store(i, draw) for i in [0, n), draw = make_dist()(engine); `make_dist` builds a fresh
/// distribution per chunk.
template <class MakeDist, class Store>
void for_each_random(int64_t n, MakeDist&& make_dist, Store&& store) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<uint64_t> seeds(static_cast<size_t>(chunks));
  {
    Generator& gen = default_generator();
    std::lock_guard lock(gen.mutex());
    for (auto& s : seeds) s = gen.engine()();
  }
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    std::mt19937_64 engine(seeds[static_cast<size_t>(c)]);
    auto dist = make_dist();
    for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i) store(i, dist(engine));
  }
}

/// Fills `dst` with `make_dist()(engine)` draws.
template <class MakeDist>
void fill_random(Tensor& dst, const char* what, MakeDist&& make_dist) {
  dispatch_floating_and_half(dst.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    for_each_random(dst.numel(), make_dist, [d](int64_t i, auto v) { d[i] = static_cast<T>(v); });
  });
}

}  // namespace minidl::cpu
