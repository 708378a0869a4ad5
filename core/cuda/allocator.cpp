// The caching device allocator: cudaMalloc is slow and synchronizes, so freed blocks are kept in
// per-size free lists and handed out again. A training loop that allocates the same sizes every step
// reaches a steady state with no cudaMalloc at all (system_allocs stops growing).
//
// Why reuse without events is safe: every kernel of a device runs on its one compute stream, in
// order. A block is returned here only after the host has queued the last kernel that uses it, so
// any kernel queued after a reuse runs after those. The copy stream (core/cuda/transfer.cpp) keeps
// this true by waiting for the compute stream before it writes into a fresh block.
//
// MINIDL_CUDA_NO_CACHE=1 turns the cache off: every allocation is a cudaMalloc and every free a
// cudaFree, so compute-sanitizer sees each block's true bounds and lifetime.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/cuda.h"
#include "core/cuda/context.h"

namespace minidl {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;  // blocks up to 1 MiB round to 512 B
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t{2} << 20;  // larger ones to 2 MiB

size_t round_size(size_t nbytes) {
  size_t unit = nbytes <= kSmallLimit ? kSmallRound : kLargeRound;
  return (nbytes + unit - 1) / unit * unit;
}

bool cache_disabled() {
  const char* v = std::getenv("MINIDL_CUDA_NO_CACHE");
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device), no_cache_(cache_disabled()) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = no_cache_ ? nbytes : round_size(nbytes);
    std::lock_guard lock(mutex_);
    void* ptr = nullptr;
    size_t block = size;
    // Best fit among cached blocks, wasting at most a quarter of the request (small blocks never
    // satisfy large requests: they sit in a different size range).
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= size + size / 4) {
      block = it->first;
      ptr = it->second;
      free_.erase(it);
    } else {
      ptr = system_alloc(size);
    }
    live_.emplace(ptr, block);
    in_use_ += block;
    if (in_use_ > peak_) peak_ = in_use_;
    return ptr;
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not ours: nothing sane to do in a destructor path
    const size_t block = it->second;
    live_.erase(it);
    in_use_ -= block;
    if (no_cache_) {
      system_free(ptr, block);
    } else {
      free_.emplace(block, ptr);
    }
  }

  MemoryStats stats() const override {
    std::lock_guard lock(mutex_);
    return {in_use_, held_, peak_, system_allocs_};
  }

  void reset_peak() override {
    std::lock_guard lock(mutex_);
    peak_ = in_use_;
  }

  void empty_cache() override {
    std::lock_guard lock(mutex_);
    release_cached();
  }

 private:
  void* system_alloc(size_t size) {
    cuda::DeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation && !free_.empty()) {
      cudaGetLastError();
      release_cached();  // give the cache back and try once more
      status = cudaMalloc(&ptr, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      MINIDL_FAIL("CUDA out of memory on cuda:", device_, ": tried to allocate ", mib(size), "; tensors use ",
                  mib(in_use_), ", minidl holds ", mib(held_), ", the device has ", mib(free_bytes), " free of ",
                  mib(total_bytes), ". Use a smaller batch, or free tensors you no longer need");
    }
    CUDA_CHECK(status);
    held_ += size;
    ++system_allocs_;
    return ptr;
  }

  // Frees one block. Kernels queued earlier may still use it, so wait for the device's streams first.
  // Never throws: it runs on destructor paths, possibly while the runtime unloads at exit.
  void system_free(void* ptr, size_t size) {
    int previous = -1;
    cudaGetDevice(&previous);
    if (previous != device_) cudaSetDevice(device_);
    cudaError_t status = cudaStreamSynchronize(cuda::compute_stream(device_));
    if (status == cudaSuccess) status = cudaFree(ptr);
    if (previous >= 0 && previous != device_) cudaSetDevice(previous);
    if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
      std::fprintf(stderr, "minidl: cudaFree on cuda:%d failed: %s\n", device_, cudaGetErrorString(status));
    }
    held_ -= size;
  }

  void release_cached() {
    for (auto& [size, ptr] : free_) system_free(ptr, size);
    free_.clear();
  }

  const int device_;
  const bool no_cache_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;       // cached blocks by size
  std::unordered_map<void*, size_t> live_;  // blocks handed out, with their true size
  size_t in_use_ = 0, held_ = 0, peak_ = 0, system_allocs_ = 0;
};

}  // namespace

// Called by allocator_for (core/allocator.cpp). One allocator per device, made on first use and never
// destroyed (tensors in statics may be freed at exit, after any destructor order we could pick).
Allocator& cuda_allocator(int device_index) {
  cuda::check_device(device_index);
  static auto* allocators = [] {
    auto* v = new std::vector<std::unique_ptr<CudaCachingAllocator>>();
    for (int d = 0; d < cuda::device_count(); ++d) v->push_back(std::make_unique<CudaCachingAllocator>(d));
    return v;
  }();
  return *(*allocators)[static_cast<size_t>(device_index)];
}

}  // namespace minidl
