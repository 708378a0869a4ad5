#pragma once
// CUDA C++ source to a loadable image with NVRTC, kept in this process's memory and in the disk
// cache (ops/cuda/rtc_disk_cache.h). Needs no GPU and no driver: only loading the image does.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/elementwise_kernel_source.h"

namespace minidl::rtc {

enum class ImageKind : uint8_t { Cubin, Ptx };

/// What NVRTC compiles for: the device's own architecture as CUBIN where NVRTC knows it, else PTX
/// for the newest older architecture it knows, which the driver compiles when loading it.
struct Target {
  int arch = 0;  // 90 for sm_90
  ImageKind kind = ImageKind::Cubin;
  /// "sm_90" or "compute_90", as -arch takes it.
  std::string arch_name() const;
};

/// The target for a device of compute capability major.minor; throws when NVRTC knows no
/// architecture this device can run.
Target target_for(int cc_major, int cc_minor);

struct CompiledImage {
  Target target;
  std::string bytes;  // the CUBIN, or the PTX with its terminating NUL
  bool from_disk = false;
};

/// The image of `generated` for `target`: from this process's memory, else from the disk cache, else
/// compiled by NVRTC and then kept in both. `fresh` skips both reads and compiles again (for an image
/// the driver refused to load). A compile error throws with NVRTC's log.
std::shared_ptr<const CompiledImage> compile(const GeneratedSource& generated, const Target& target,
                                             bool fresh = false);

/// NVRTC's version, "13.0".
std::string nvrtc_version();

/// What compile() did in this process (cuda::kernel_cache_stats).
struct CompileCounters {
  std::atomic<int64_t> compilations{0}, disk_loads{0}, disk_rejected{0}, disk_writes{0};
};
CompileCounters& compile_counters();

/// Forgets the images kept in memory (cuda::clear_kernel_memory_cache).
void clear_compiled_images();

}  // namespace minidl::rtc
