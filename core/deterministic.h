#pragma once
// Deterministic mode, as torch.use_deterministic_algorithms: the same program on the same inputs
// gives bit-identical results run after run. The CPU always does (every reduction's order is fixed
// by the sizes, never by the thread count), so the switch matters on CUDA, where it trades speed for
// it: index_add (the backward of index_select) sorts its indices instead of adding with atomics,
// cuDNN runs only algorithms it reports deterministic, chosen by its heuristics rather than by
// timing, convolutions in ConvBackend::Auto take the im2col path without timing, and cuBLASLt keeps
// its heuristic's pick for every GEMM shape instead of the fastest it timed (timings vary from run
// to run, and so would the picks). Off by default; on, it holds for results on one GPU model with
// one library version, as cuBLAS and cuDNN promise.
#include <atomic>

namespace minidl {

namespace detail {
extern std::atomic<bool> deterministic_mode;
}  // namespace detail

/// Selects the deterministic CUDA paths for every thread from now on.   set_deterministic(true);
void set_deterministic(bool enabled);

/// True while deterministic mode is on.
inline bool is_deterministic() { return detail::deterministic_mode.load(std::memory_order_relaxed); }

}  // namespace minidl
