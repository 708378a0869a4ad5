// The caching device allocator: cudaMalloc is slow and synchronizes, so freed blocks are kept in
// per-size free lists and handed out again. A training loop that allocates the same sizes every step
// reaches a steady state with no cudaMalloc at all (system_allocs stops growing).
//
// Why reuse without events is safe: every kernel of a device runs on its one compute stream, in
// order. A block is returned here only after the host has queued the last kernel that uses it, so
// any kernel queued after a reuse runs after those. The copy stream (core/cuda/transfer.cpp) keeps
// this true by waiting for the compute stream before it writes into a fresh block, and work left on
// the side stream (core/cuda/side_stream.cpp) by keeping what it reads alive until the compute stream
// has waited for it, and by joining first when a block it writes is freed.
//
// MINIDL_CUDA_NO_CACHE=1 turns the cache off: every allocation is a cudaMalloc and every free a
// cudaFree, so compute-sanitizer sees each block's true bounds and lifetime.
//
// Private pools, for CUDA graphs (core/cuda/graph.cu): while a thread captures, its allocations come
// from the capturing graph's own pool, and blocks of that pool, freed or not, go back only to that
// pool. A replay writes the very addresses the capture saw, so no tensor outside the graph may ever
// be handed one of them while the graph lives; when it is destroyed, its pool joins the general cache.
//
// Sizes: blocks up to 1 MiB round to 512 bytes, each its own cudaMalloc; blocks over 10 MiB round
// to 2 MiB, likewise. Those between are carved out of shared 20 MiB segments (core/cuda/segment_pool.h),
// rounded to 512 bytes, as PyTorch's allocator does: rounding each to 2 MiB cost a transformer's
// step about 100 MB of its peak.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/cuda.h"
#include "core/cuda/allocator.h"
#include "core/cuda/context.h"
#include "core/cuda/segment_pool.h"

namespace minidl {

namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;   // blocks up to 1 MiB round to 512 B
constexpr size_t kCarvedLimit = size_t{10} << 20;  // up to 10 MiB, carved from segments
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t{2} << 20;  // larger ones to 2 MiB

size_t round_size(size_t nbytes) {
  size_t unit = nbytes <= kCarvedLimit ? kSmallRound : kLargeRound;
  return (nbytes + unit - 1) / unit * unit;
}

bool carved(size_t size) { return size > kSmallLimit && size <= kCarvedLimit; }

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
  struct Block {
    size_t size;    // the true size
    uint64_t pool;  // 0: the general cache, else a graph's private pool
    bool carved;    // from segments_, to which it returns
  };

 public:
  explicit CudaCachingAllocator(int device) : device_(device), no_cache_(cache_disabled()) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    std::lock_guard lock(mutex_);
    const uint64_t pool = capture_pool_ && std::this_thread::get_id() == capture_thread_ ? capture_pool_ : 0;
    // A private pool always caches: freeing to the system would synchronize inside a capture.
    const size_t size = no_cache_ && pool == 0 ? nbytes : round_size(nbytes);
    if (carved(size) && !(no_cache_ && pool == 0)) {
      const cuda::SegmentPool::Block b = segments_.allocate(size, pool, [&](size_t bytes) { return system_alloc(bytes); });
      return hand_out(b.ptr, Block{b.size, pool, true});
    }
    void* ptr = nullptr;
    size_t block = size;
    // Best fit among cached blocks, wasting at most a quarter of the request (small blocks never
    // satisfy large requests: they sit in a different size range).
    auto& free = free_[pool];
    auto it = free.lower_bound(size);
    if (it != free.end() && it->first <= size + size / 4) {
      block = it->first;
      ptr = it->second;
      free.erase(it);
    } else {
      ptr = system_alloc(size);
    }
    return hand_out(ptr, Block{block, pool, false});
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    // Written by side-stream work not joined yet: the block's next user must come after it.
    if (cuda::side_stream_writes(device_, ptr)) {
      try {
        cuda::join_side_stream(device_);
      } catch (...) {  // a destructor path: a failing CUDA call surfaces at the next synchronization
      }
    }
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // not ours: nothing sane to do in a destructor path
    const Block block = it->second;
    live_.erase(it);
    in_use_ -= block.size;
    if (block.carved) {
      segments_.free(ptr);
    } else if (no_cache_ && block.pool == 0) {
      system_free(ptr, block.size);
    } else {
      free_[block.pool].emplace(block.size, ptr);
    }
  }

  void begin_private_pool(uint64_t pool) {
    std::lock_guard lock(mutex_);
    capture_pool_ = pool;
    capture_thread_ = std::this_thread::get_id();
  }

  void end_private_pool() {
    std::lock_guard lock(mutex_);
    capture_pool_ = 0;
  }

  void release_private_pool(uint64_t pool) {
    std::lock_guard lock(mutex_);
    for (auto& [ptr, block] : live_)
      if (block.pool == pool) block.pool = 0;  // freed later, they go to the general cache
    segments_.move_pool(pool, 0);
    auto node = free_.extract(pool);
    if (node.empty()) return;
    for (auto& [size, ptr] : node.mapped()) {
      if (no_cache_) system_free(ptr, size);
      else free_[0].emplace(size, ptr);
    }
  }

  MemoryStats stats() const override {
    std::lock_guard lock(mutex_);
    return {in_use_, held_, peak_, system_allocs_, segments_.inactive_split_bytes()};
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
    if (status == cudaErrorMemoryAllocation && (!free_[0].empty() || segments_.has_free_segment(0)) &&
        capture_pool_ == 0) {
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

  // Only the general cache: a private pool's blocks belong to its graph.
  void release_cached() {
    for (auto& [size, ptr] : free_[0]) system_free(ptr, size);
    free_[0].clear();
    segments_.release_free_segments(0, [&](void* ptr, size_t size) { system_free(ptr, size); });
  }

  void* hand_out(void* ptr, Block block) {
    live_.emplace(ptr, block);
    in_use_ += block.size;
    if (in_use_ > peak_) peak_ = in_use_;
    return ptr;
  }

  const int device_;
  const bool no_cache_;
  mutable std::mutex mutex_;
  std::map<uint64_t, std::multimap<size_t, void*>> free_;  // cached blocks of their own by pool, then size
  cuda::SegmentPool segments_;                             // the carved ones
  std::unordered_map<void*, Block> live_;                  // blocks handed out
  size_t in_use_ = 0, held_ = 0, peak_ = 0, system_allocs_ = 0;
  uint64_t capture_pool_ = 0;  // the private pool of the graph this device captures now, if any
  std::thread::id capture_thread_;
};

CudaCachingAllocator& caching_allocator(int device);

}  // namespace

// Called by allocator_for (core/allocator.cpp). One allocator per device, made on first use and never
// destroyed (tensors in statics may be freed at exit, after any destructor order we could pick).
Allocator& cuda_allocator(int device_index) { return caching_allocator(device_index); }

namespace {
CudaCachingAllocator& caching_allocator(int device_index) {
  cuda::check_device(device_index);
  static auto* allocators = [] {
    auto* v = new std::vector<std::unique_ptr<CudaCachingAllocator>>();
    for (int d = 0; d < cuda::device_count(); ++d) v->push_back(std::make_unique<CudaCachingAllocator>(d));
    return v;
  }();
  return *(*allocators)[static_cast<size_t>(device_index)];
}
}  // namespace

namespace cuda {
void begin_private_pool(int device, uint64_t pool) { caching_allocator(device).begin_private_pool(pool); }
void end_private_pool(int device) { caching_allocator(device).end_private_pool(); }
void release_private_pool(int device, uint64_t pool) { caching_allocator(device).release_private_pool(pool); }
}  // namespace cuda

}  // namespace minidl
