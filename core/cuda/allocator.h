#pragma once
// The caching allocator's private pools, for CUDA graph capture (core/cuda/graph.cu): while a pool
// is active, the allocations of the thread that began it come from the pool, and the pool's blocks
// return only to it until release_private_pool.
#include <cstdint>

namespace minidl::cuda {

/// Routes this thread's allocations on `device` to private pool `pool` (non-zero, unique per graph).
void begin_private_pool(int device, uint64_t pool);
/// Allocations go to the general cache again; the pool keeps its blocks.
void end_private_pool(int device);
/// The graph that owned `pool` is gone: its blocks join the general cache.
void release_private_pool(int device, uint64_t pool);

}  // namespace minidl::cuda
