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

namespace {

// The generator the innermost GeneratorGuard of this thread names; null: the global one. A pointer
// read per draw, so kernels need not be told which thread they run on.
thread_local Generator* guarded = nullptr;

}  // namespace

Generator& default_generator() {
  static Generator global;
  return guarded ? *guarded : global;
}

uint64_t initial_seed() {
  Generator& g = default_generator();
  std::lock_guard lock(g.mutex());
  return g.seed();
}

GeneratorGuard::GeneratorGuard(Generator& generator) : previous_(guarded) { guarded = &generator; }

GeneratorGuard::~GeneratorGuard() { guarded = previous_; }

void manual_seed(uint64_t seed) {
  Generator& g = default_generator();
  std::lock_guard lock(g.mutex());
  g.set_seed(seed);
}

}  // namespace minidl
