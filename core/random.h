#pragma once
// The global seeded generator. CPU kernels draw from its engine; CUDA kernels take (seed, offset)
// pairs for cuRAND's Philox generator and advance the offset, so runs are reproducible per seed.
#include <cstdint>
#include <mutex>
#include <random>

namespace minidl {

/// Seeds every random draw that follows (rand, randn, dropout, initialization, shuffling defaults).
///   manual_seed(1);
void manual_seed(uint64_t seed);

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) { set_seed(seed); }
  void set_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
    engine_.seed(seed);
  }
  uint64_t seed() const { return seed_; }
  std::mt19937_64& engine() { return engine_; }
  /// Reserves `count` Philox draws and returns the offset they start at.
  uint64_t take_offset(uint64_t count) {
    uint64_t start = offset_;
    offset_ += (count + 3) / 4 * 4;  // Philox yields four values per counter step
    return start;
  }
  std::mutex& mutex() { return mutex_; }

 private:
  uint64_t seed_ = 0, offset_ = 0;
  std::mt19937_64 engine_;
  std::mutex mutex_;
};

Generator& default_generator();

}  // namespace minidl
