#pragma once
// Where a training step's time goes on a GPU, as apps/bench reports it: kernels per step, their
// time, the GPU's busy fraction (CUPTI, through cuda::profile_kernels) and the host's time to issue
// one step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/cuda.h"

namespace mnist_app {

/// Prints the kernels of one step in the middle of `a` (`steps` steps) in the order they started:
/// when each started after the step's first, how long it ran, how long the GPU had been idle before
/// it (no kernel of any stream running), and its stream. Idle time is where a faster kernel no
/// longer helps and fewer or earlier launches do. Kernels that not every step launches (a graph's
/// input sources set anew at the start of an epoch) are left out.
inline void print_step_timeline(minidl::cuda::KernelActivity a, int steps) {
  std::vector<std::string> occasional;
  for (const auto& k : a.by_time)
    if (k.count % steps != 0) occasional.push_back(k.name);
  std::erase_if(a.launches, [&](const auto& k) {
    return std::find(occasional.begin(), occasional.end(), k.name) != occasional.end();
  });
  const size_t per_step = a.launches.size() / static_cast<size_t>(steps);
  if (per_step == 0 || per_step * static_cast<size_t>(steps) != a.launches.size()) {
    std::printf("    (no timeline: the steps did not launch equally many kernels)\n");
    return;
  }
  const size_t first = per_step * static_cast<size_t>(steps / 2);
  double busy_until = 0;  // when the kernels of earlier steps had all ended (times count from the first start)
  for (size_t i = 0; i < first; ++i) busy_until = std::max(busy_until, a.launches[i].end_us);
  const double step_start = a.launches[first].start_us, previous_end = busy_until;
  double idle = 0;
  std::printf("    one step, kernel by kernel:   start    time    idle before  stream\n");
  for (size_t i = first; i < first + per_step; ++i) {
    const auto& k = a.launches[i];
    const double gap = std::max(0.0, k.start_us - busy_until);
    idle += gap;
    busy_until = std::max(busy_until, k.end_us);
    std::printf("    %-28.28s %7.1f %7.1f %10.1f %7u\n", k.name.c_str(), k.start_us - step_start,
                k.end_us - k.start_us, gap, k.stream);
  }
  std::printf("    step: %.1f us from the previous step's last kernel to its own last, %.1f us of it idle\n",
              busy_until - previous_end, idle);
}

/// Runs `step(s)` for s = 0..99 under CUPTI and prints one line (and, with `list_kernels`, one line
/// per kernel name and one step's timeline), labelled with `mode`.
inline void report_gpu_time(const std::function<void(int)>& step, const char* mode, bool list_kernels) {
  using namespace minidl;
  const int steps = 100;
  cuda::KernelActivity a = cuda::profile_kernels([&] {
    for (int s = 0; s < steps; ++s) step(s);
  });
  // Host time to issue one step: the best of a few windows of 10 steps, each after a sync, short
  // enough that the launch queue never fills (a full queue would make the host wait for the GPU).
  double host_us = 1e30;
  for (int window = 0; window < 5; ++window) {
    cuda::synchronize();
    auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < 10; ++s) step(s);
    host_us = std::min(host_us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / 10);
  }
  cuda::synchronize();
  std::printf("  %s: %.1f kernels/step, %.0f us of kernels/step, GPU busy %.0f%%, host %.0f us/step to issue\n", mode,
              static_cast<double>(a.kernels) / steps, a.kernel_us / steps, 100 * a.busy(), host_us);
  if (list_kernels) {
    for (const auto& k : a.by_time)
      std::printf("    %6.1f us  %4.1fx  %s\n", k.us / steps, static_cast<double>(k.count) / steps, k.name.c_str());
    print_step_timeline(a, steps);
  }
}

}  // namespace mnist_app
