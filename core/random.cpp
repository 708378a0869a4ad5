#include "core/random.h"

#include <sstream>

#include "core/error.h"

namespace minidl {

Generator::State Generator::state() {
  std::lock_guard lock(mutex_);
  std::ostringstream engine;
  engine << engine_;
  return {seed_, offset_, engine.str()};
}

void Generator::set_state(const State& state) {
  std::mt19937_64 engine;
  std::istringstream in(state.engine);
  in >> engine;
  MINIDL_CHECK(!in.fail() && (in >> std::ws).eof(), "Generator::set_state: the engine state is not the text of a "
               "std::mt19937_64 (got \"", state.engine.substr(0, 40), "...\")");
  std::lock_guard lock(mutex_);
  seed_ = state.seed;
  offset_ = state.offset;
  engine_ = engine;
}

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
