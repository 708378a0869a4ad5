#pragma once
// CUDA devices from the host's side: are they usable, how many, which one, what are they, and the
// pinned, stream-ordered transfer a data loader uses. Includes no CUDA header, so any layer may
// include it; in a build without CUDA every query answers "none" and transfers throw.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace minidl::cuda {

/// What one CUDA device is.   `cuda::device_properties(0).name == "NVIDIA H100 80GB HBM3"`
struct DeviceProperties {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;            // compute capability
  size_t total_memory = 0;             // bytes
  int multiprocessor_count = 0;
  size_t l2_cache_bytes = 0;
  size_t shared_memory_per_block_optin = 0;
  int warp_size = 32;
};

/// What the GPU did while some host code ran (see profile_kernels).
struct KernelActivity {
  int64_t kernels = 0;    // kernels that ran (memsets and copies included: profile_kernels)
  double kernel_us = 0;   // their durations, summed
  double span_us = 0;     // from the first kernel's start to the last one's end
  double busy() const { return span_us > 0 ? kernel_us / span_us : 0; }
  struct Kernel {
    std::string name;  // demangled, without its arguments
    int64_t count = 0;
    double us = 0;
  };
  std::vector<Kernel> by_time;  // one entry per kernel name, the longest total first
  struct Launch {
    std::string name;        // as in Kernel
    double start_us = 0;     // from the first kernel's start
    double end_us = 0;
    uint32_t stream = 0;     // CUPTI's stream id: kernels of one stream share it
  };
  std::vector<Launch> launches;  // every kernel that ran, in start order
};

#ifdef MINIDL_WITH_CUDA

/// True when minidl was built with CUDA, a driver is loaded and at least one device answers.
///   Device d = cuda::is_available() ? Device::cuda() : Device::cpu();
bool is_available();
/// Why CUDA cannot be used (no driver, no device, driver too old, built without CUDA, ...) and what
/// to do about it; empty when is_available().
std::string unavailable_reason();
/// Number of usable devices; 0 when none (never throws).
int device_count();
/// The device that new work of this thread goes to, as cudaGetDevice reports it.
int current_device();
void set_device(int index);
/// Waits until all queued work of `index` (every device when -1) has finished.
void synchronize(int index = -1);
DeviceProperties device_properties(int index = 0);

/// Copies a contiguous CPU tensor to `device` through a pinned staging buffer on the device's copy
/// stream, and orders the device's compute stream after the copy: work queued afterwards on that
/// device sees the data, and the host does not wait for the transfer. `host` may be reused or freed
/// as soon as this returns. Not recorded on the tape (data batches need no gradient).
///   Tensor images = cuda::to_device_pinned(batch_images, Device::cuda(0));
Tensor to_device_pinned(const Tensor& host, Device device);

/// Runs `work`, waits for every device, and returns what CUPTI recorded of the kernels it ran
/// (graph replays included), with its memsets and memory copies as kernels named "[memset]" and
/// "[memcpy]". For measurement only: recording slows launches a little.
///   auto a = cuda::profile_kernels([&] { for (int i = 0; i < 100; ++i) step(); });
KernelActivity profile_kernels(const std::function<void()>& work);

/// True when `t`'s memory is read or written by work an op left running on a CUDA side stream that
/// the compute stream has not waited for yet (a weight gradient computed beside the input gradient;
/// core/cuda/side_stream.cpp). The autograd engine asks before it touches a gradient.
bool uses_unjoined_side_work(const Tensor& t);
/// Makes every device's compute stream wait for such work; a no-op when there is none.
void join_side_streams();
/// True while this thread captures a CUDA graph (cuda::Graph): what it queues then runs only when
/// the graph replays, and what it allocates belongs to the graph's memory.
bool this_thread_captures();

#else  // built without CUDA: the same API, answering "none"

inline bool is_available() { return false; }
inline std::string unavailable_reason() {
  return "minidl was built without CUDA (no CUDA toolkit found at configure time, or -DMINIDL_CUDA=OFF); "
         "rebuild with -DMINIDL_CUDA=ON on a machine with the CUDA toolkit, or use --device cpu";
}
inline int device_count() { return 0; }
inline int current_device() { MINIDL_FAIL("cuda::current_device: ", unavailable_reason()); }
inline void set_device(int) { MINIDL_FAIL("cuda::set_device: ", unavailable_reason()); }
inline void synchronize(int = -1) {}
inline DeviceProperties device_properties(int = 0) { MINIDL_FAIL("cuda::device_properties: ", unavailable_reason()); }
inline Tensor to_device_pinned(const Tensor&, Device device) {
  MINIDL_FAIL("cuda::to_device_pinned to ", device, ": ", unavailable_reason());
}
inline KernelActivity profile_kernels(const std::function<void()>&) {
  MINIDL_FAIL("cuda::profile_kernels: ", unavailable_reason());
}
inline bool uses_unjoined_side_work(const Tensor&) { return false; }
inline void join_side_streams() {}
inline bool this_thread_captures() { return false; }

#endif

}  // namespace minidl::cuda
