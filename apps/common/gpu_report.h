#pragma once
// Where a training step's time goes on a GPU, as apps/bench reports it: kernels per step, their
// time, the GPU's busy fraction (CUPTI, through cuda::profile_kernels) and the host's time to issue
// one step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "core/cuda.h"

namespace mnist_app {

/// Runs `step(s)` for s = 0..99 under CUPTI and prints one line (and, with `list_kernels`, one line
/// per kernel name), labelled with `mode`.
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
  }
}

}  // namespace mnist_app
