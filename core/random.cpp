#include "core/random.h"

namespace minidl {

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) {
  Generator& g = default_generator();
  std::lock_guard lock(g.mutex());
  g.set_seed(seed);
}

}  // namespace minidl
