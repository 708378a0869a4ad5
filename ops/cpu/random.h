#pragma once
// Random fills draw from the global generator's engine on one thread: the sequence then depends
// only on the seed, never on the thread count.
#include "core/random.h"
#include "core/tensor.h"

namespace minidl::cpu {

template <class Dist>
void fill_random(Tensor& dst, const char* what, Dist&& dist) {
  Generator& gen = default_generator();
  std::lock_guard lock(gen.mutex());
  dispatch_floating(dst.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] = static_cast<T>(dist(gen.engine()));
  });
}

}  // namespace minidl::cpu
