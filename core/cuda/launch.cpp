// early_launch_enabled and thread_block_clusters: asked once per device, since every short kernel's
// launch asks.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/cuda/launch.cuh"

namespace minidl::cuda {

namespace {

// Whether the current device has compute capability 9.0 or later.
bool hopper_or_later() {
  constexpr int kDevices = 64;
  static std::array<std::atomic<int8_t>, kDevices> answer{};  // 0 unknown, 1 yes, -1 no
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
  int8_t known = answer[device].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    known = major >= 9 ? 1 : -1;
    answer[device].store(known, std::memory_order_relaxed);
  }
  return known > 0;
}

}  // namespace

bool early_launch_enabled() {
  static const bool allowed = [] {
    const char* v = std::getenv("MINIDL_EARLY_LAUNCH");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return allowed && hopper_or_later();
}

bool thread_block_clusters() { return hopper_or_later(); }

}  // namespace minidl::cuda
