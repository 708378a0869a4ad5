#pragma once
// Ranking algorithms by the median of several timings each. A cuDNN Find query times each
// convolution algorithm once, and two close algorithms trade places from query to query on a noisy
// GPU; ops/cuda/cudnn_autotune.cpp runs the queries several times and ranks by each algorithm's
// median instead. Header-only and free of CUDA so that its rules are tested on any machine.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

namespace minidl::cuda {

/// The median of `times` (the upper one of an even count); `times` is not empty.
inline float median(std::vector<float> times) {
  const auto middle = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), middle, times.end());
  return *middle;
}

/// `Perf` has the fields of cuDNN's perf records that matter here: `algo` (an enum below
/// `kCount`), `time` and `memory` (workspace bytes).
template <class Perf, int kCount>
class AlgorithmRanking {
 public:
  /// One timing of `perf.algo`; the algorithm's record keeps the median of its timings as `time`.
  void add(const Perf& perf) {
    Entry& e = entries_[static_cast<int>(perf.algo)];
    e.times.push_back(perf.time);
    e.record = perf;
    e.record.time = median(e.times);
  }

  /// The fastest by median whose workspace fits `budget`, else the fastest of any workspace;
  /// nullptr when nothing was added.
  const Perf* fastest(size_t budget) const {
    const Perf* within = nullptr;
    const Perf* any = nullptr;
    for (const Entry& e : entries_) {
      if (e.times.empty()) continue;
      if (!any || e.record.time < any->time) any = &e.record;
      if (e.record.memory <= budget && (!within || e.record.time < within->time)) within = &e.record;
    }
    return within ? within : any;
  }

  /// The algorithms whose median is at most `factor` times the fastest's, fastest first: those
  /// within `budget`, or the fastest alone where none is.
  std::vector<const Perf*> near_fastest(size_t budget, float factor) const {
    const Perf* best = fastest(budget);
    if (!best) return {};
    if (best->memory > budget) return {best};
    std::vector<const Perf*> near;
    for (const Entry& e : entries_)
      if (!e.times.empty() && e.record.memory <= budget && e.record.time <= factor * best->time)
        near.push_back(&e.record);
    std::stable_sort(near.begin(), near.end(), [](const Perf* a, const Perf* b) { return a->time < b->time; });
    return near;
  }

 private:
  struct Entry {
    Perf record{};
    std::vector<float> times;
  };
  Entry entries_[kCount];
};

}  // namespace minidl::cuda
