#include "core/allocator.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

// Under AddressSanitizer the cache below would hide a use after free of a cached block, and the
// rounding an overflow into the rounded-up tail: both are poisoned by hand. No-ops otherwise.
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

namespace minidl {

#ifdef MINIDL_WITH_CUDA
// core/cuda/cuda_allocator.cpp
Allocator& cuda_allocator(int device_index);
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
#endif

namespace {

// Host memory aligned to 64 bytes, so Eigen's vectorized loads never straddle cache lines.
// Blocks of 1 MiB and more are cached after free and handed out again: glibc returns such blocks
// to the system (mmap/munmap), and touching fresh pages again every step cost more than the
// convolutions that use them (im2col buffers are tens of MB). Small blocks go straight to malloc.
//
// At exit the cache is given back (release_at_exit): LeakSanitizer checks after the atexit handlers,
// and blocks still in use then belong to statics that are destroyed later, which free them
// straight to the system from then on.
class CpuAllocator final : public Allocator {
 public:
  void release_at_exit() {
    std::lock_guard lock(mutex_);
    free_cache();
    exiting_ = true;
  }
  void* allocate(size_t nbytes) override {
    const size_t size = round_size(nbytes);
    void* ptr = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (size >= kCacheMin) {
        if (auto it = free_.find(size); it != free_.end()) {
          ptr = it->second;
          free_.erase(it);
          cached_ -= size;
        }
      }
      if (!ptr) {
        ptr = std::aligned_alloc(64, size);
        if (!ptr) MINIDL_FAIL("CPU allocator: out of memory allocating ", nbytes, " bytes");
        held_ += size;
        ++allocs_;
      }
      in_use_ += size;
      peak_ = std::max(peak_, in_use_);
    }
    ASAN_UNPOISON_MEMORY_REGION(ptr, nbytes);
    ASAN_POISON_MEMORY_REGION(static_cast<char*>(ptr) + nbytes, size - nbytes);
    return ptr;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    const size_t size = round_size(nbytes);
    std::lock_guard lock(mutex_);
    in_use_ -= size;
    if (!exiting_ && size >= kCacheMin && cached_ + size <= kCacheMax) {
      ASAN_POISON_MEMORY_REGION(ptr, size);
      free_.emplace(size, ptr);
      cached_ += size;
    } else {
      ASAN_UNPOISON_MEMORY_REGION(ptr, size);
      std::free(ptr);
      held_ -= size;
    }
  }
  MemoryStats stats() const override {
    std::lock_guard lock(mutex_);
    return {in_use_, held_, peak_, allocs_};
  }
  void reset_peak() override {
    std::lock_guard lock(mutex_);
    peak_ = in_use_;
  }
  void empty_cache() override {
    std::lock_guard lock(mutex_);
    free_cache();
  }

 private:
  void free_cache() {  // under mutex_
    for (auto& [size, ptr] : free_) {
      ASAN_UNPOISON_MEMORY_REGION(ptr, size);
      std::free(ptr);
      held_ -= size;
    }
    free_.clear();
    cached_ = 0;
  }

  static constexpr size_t kCacheMin = size_t{1} << 20;
  static constexpr size_t kCacheMax = size_t{4} << 30;  // never keep more than 4 GiB idle
  static size_t round_size(size_t nbytes) {
    size_t unit = nbytes >= kCacheMin ? (size_t{1} << 16) : 64;  // coarse classes so sizes recur
    return (nbytes + unit - 1) / unit * unit;
  }

  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t in_use_ = 0, held_ = 0, peak_ = 0, allocs_ = 0, cached_ = 0;
  bool exiting_ = false;
};

// Never destroyed: tensors in statics may be freed at any point of the exit.
CpuAllocator& cpu_allocator() {
  static CpuAllocator* cpu = [] {
    auto* allocator = new CpuAllocator();
    std::atexit([] { cpu_allocator().release_at_exit(); });
    return allocator;
  }();
  return *cpu;
}

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    return cpu_allocator();
  }
#ifdef MINIDL_WITH_CUDA
  return cuda_allocator(device.index);
#else
  MINIDL_FAIL("device ", device, " requested, but minidl was built without CUDA; rebuild with -DMINIDL_CUDA=ON on a machine with the CUDA toolkit, or use Device::cpu()");
#endif
}

MemoryStats memory_stats(Device device) { return allocator_for(device).stats(); }
void reset_peak_memory_stats(Device device) { allocator_for(device).reset_peak(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
#ifdef MINIDL_WITH_CUDA
  cuda_copy_bytes(dst, dst_device, src, src_device, nbytes);
#else
  MINIDL_FAIL("copy from ", src_device, " to ", dst_device, ": minidl was built without CUDA");
#endif
}

}  // namespace minidl
