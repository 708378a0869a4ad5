#pragma once
// Where tensor memory comes from. One allocator per device type: 64-byte aligned host memory for the
// CPU (large blocks cached for reuse), a caching pool for CUDA (core/cuda/). Both keep statistics so leaks and growth show in tests.
#include <cstddef>

#include "core/device.h"

namespace minidl {

/// Byte counts of one allocator.   Example: `memory_stats(Device::cuda()).peak_bytes`
struct MemoryStats {
  size_t bytes_in_use = 0;     // handed out to tensors now
  size_t bytes_held = 0;       // taken from the system now (in use + cached)
  size_t peak_bytes = 0;       // largest bytes_in_use seen since the last reset_peak_memory_stats()
  size_t system_allocs = 0;    // calls to the system allocator (malloc, cudaMalloc) so far
  size_t bytes_inactive_split = 0;  // cached, but inside a CUDA segment that also holds live blocks:
                                    // what empty_cache cannot return (PyTorch's inactive_split_bytes)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  /// Returns cached blocks to the system; a no-op for allocators that cache nothing.
  virtual void empty_cache() {}
};

/// The allocator of `device`; throws if minidl was built without CUDA or the device does not exist.
Allocator& allocator_for(Device device);

MemoryStats memory_stats(Device device);
void reset_peak_memory_stats(Device device);
/// Frees the cached, unused blocks of `device`'s allocator.
void empty_cache(Device device = Device::cuda());

/// Copies bytes between any two devices (host<->device, device<->device). Synchronous: returns
/// when the copy is done, so the destination can be read at once.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace minidl
