#pragma once
// Seeded generators. CPU kernels draw from a generator's engine; CUDA kernels take (seed, offset)
// pairs for cuRAND's Philox generator and advance the offset, so runs are reproducible per seed.
// Draws go to the calling thread's default generator: the global one, unless a GeneratorGuard on
// that thread names another (a DataLoader's worker does, so augmentation in Dataset::get never
// races the training thread's dropout for one stream).
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>

namespace minidl {

/// Seeds this thread's default generator, and so every random draw that follows on it (rand, randn,
/// dropout, initialization, shuffling defaults): the global generator, or a guarded one.
///   manual_seed(1);
void manual_seed(uint64_t seed);

/// Where a CUDA random kernel starts drawing in the Philox stream. Outside graph capture it is
/// (seed, offset). While a graph captures, `device_state` points at the graph's [seed, base offset]
/// on the device and `offset` is relative to that base: each replay moves the base on (the graph's
/// last kernel adds its draws; the host sets it only after other draws), so every replay draws new
/// numbers, the same ones the step would have drawn eagerly.
struct PhiloxDraw {
  uint64_t seed = 0, offset = 0;
  const uint64_t* device_state = nullptr;
};

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
    offset_ += whole_steps(count);
    return start;
  }
  std::mutex& mutex() { return mutex_; }

  /// Everything that decides the draws still to come, for checkpoints: the seed, the Philox offset
  /// and the CPU engine's state in the text form of std::mt19937_64's operator<<.
  struct State {
    uint64_t seed = 0, offset = 0;
    std::string engine;
  };
  /// Takes the lock itself.   auto s = default_generator().state(); ... default_generator().set_state(s);
  State state();
  /// Restores a state from state(); throws, changing nothing, when `engine` is not an engine's text.
  void set_state(const State& state);

  /// Reserves `count` draws for a CUDA kernel (see PhiloxDraw). Takes the lock itself.
  PhiloxDraw philox_draw(uint64_t count) {
    std::lock_guard lock(mutex_);
    if (capture_state_ && std::this_thread::get_id() == capture_thread_) {
      PhiloxDraw draw{0, capture_used_, capture_state_};
      capture_used_ += whole_steps(count);
      return draw;
    }
    return {seed_, take_offset(count), nullptr};
  }
  /// While this thread captures a graph, its draws are taken relative to `device_state` (see
  /// PhiloxDraw); capture_end returns how many draws one replay uses.
  void capture_begin(const uint64_t* device_state) {
    std::lock_guard lock(mutex_);
    capture_state_ = device_state;
    capture_thread_ = std::this_thread::get_id();
    capture_used_ = 0;
  }
  /// Whether this thread is capturing a graph's draws now.
  bool capturing() {
    std::lock_guard lock(mutex_);
    return capture_state_ && std::this_thread::get_id() == capture_thread_;
  }
  /// The draws this thread's capture has taken so far (0 when it captures none).
  uint64_t capture_draws() {
    std::lock_guard lock(mutex_);
    return capture_state_ && std::this_thread::get_id() == capture_thread_ ? capture_used_ : 0;
  }
  uint64_t capture_end() {
    std::lock_guard lock(mutex_);
    capture_state_ = nullptr;
    return capture_used_;
  }

 private:
  // Philox yields four values per counter step: a reservation takes whole steps.
  static uint64_t whole_steps(uint64_t count) { return (count + 3) / 4 * 4; }

  uint64_t seed_ = 0, offset_ = 0;
  const uint64_t* capture_state_ = nullptr;
  std::thread::id capture_thread_;
  uint64_t capture_used_ = 0;
  std::mt19937_64 engine_;
  std::mutex mutex_;
};

/// The generator this thread's random draws come from: the one the innermost GeneratorGuard on this
/// thread names, else the process's global generator. Every CPU and CUDA random kernel takes it here.
///   uint64_t seed = default_generator().seed();
Generator& default_generator();

/// The seed of this thread's default generator, as torch.initial_seed(): the last manual_seed, or in a
/// DataLoader's worker that epoch's base seed plus the worker's id.
///   uint64_t seed = initial_seed();
uint64_t initial_seed();

/// Sends this thread's default draws to `generator` while the guard lives; guards nest, and other
/// threads keep drawing from their own. The generator must outlive the guard.
///   Generator gen(42);  { GeneratorGuard guard(gen); Tensor noise = randn({3}); }  // drawn from gen
class GeneratorGuard {
 public:
  explicit GeneratorGuard(Generator& generator);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  Generator* previous_;
};

}  // namespace minidl
