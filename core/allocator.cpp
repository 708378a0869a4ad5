#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace minidl {

#ifdef MINIDL_WITH_CUDA
// core/cuda/cuda_allocator.cpp
Allocator& cuda_allocator(int device_index);
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
#endif

namespace {

// Host memory aligned to 64 bytes, so Eigen's vectorized loads never straddle cache lines.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* ptr = std::aligned_alloc(64, rounded);
    if (!ptr) MINIDL_FAIL("CPU allocator: out of memory allocating ", nbytes, " bytes");
    size_t now = in_use_.fetch_add(nbytes) + nbytes;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    ++allocs_;
    return ptr;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    std::free(ptr);
    in_use_ -= nbytes;
  }
  MemoryStats stats() const override {
    return {in_use_.load(), in_use_.load(), peak_.load(), allocs_.load()};
  }
  void reset_peak() override { peak_ = in_use_.load(); }

 private:
  std::atomic<size_t> in_use_{0}, peak_{0}, allocs_{0};
};

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    static CpuAllocator cpu;
    return cpu;
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
