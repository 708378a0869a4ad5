// early_launch_enabled and thread_block_clusters: asked once per device, since every short kernel's
// launch asks.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/cuda/launch.cuh"

namespace minidl::cuda {

bool hopper_or_later(int device) {
  constexpr int kDevices = 64;
  static std::array<std::atomic<int8_t>, kDevices> answer{};  // 0 unknown, 1 yes, -1 no
  if (device < 0 || device >= kDevices) return false;
  int8_t known = answer[device].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    known = major >= 9 ? 1 : -1;
    answer[device].store(known, std::memory_order_relaxed);
  }
  return known > 0;
}

namespace {

bool current_device_hopper_or_later() {
  int device = 0;
  return cudaGetDevice(&device) == cudaSuccess && hopper_or_later(device);
}

}  // namespace

bool early_launch_enabled() {
  static const bool allowed = [] {
    const char* v = std::getenv("MINIDL_EARLY_LAUNCH");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return allowed && current_device_hopper_or_later();
}

bool thread_block_clusters() { return current_device_hopper_or_later(); }

}  // namespace minidl::cuda
