#pragma once
// Early launch of a dependent kernel (programmatic dependent launch, compute capability 9.0 on).
//
// Two short kernels in a row on one stream normally leave the GPU idle for about a microsecond
// between them: the second is scheduled only once the first has finished and its writes are
// flushed. A kernel started by launch_early may be scheduled while the kernel before it still runs;
// it then waits in wait_for_earlier_kernels() until that kernel has finished and its writes are
// visible. A step of a small model is mostly such chains (bias-and-ReLU, loss, its gradient, the
// optimizer), so the idle microseconds are a large share of it.
//
// The rule: a kernel started by launch_early calls wait_for_earlier_kernels() before its first
// access to device memory that earlier work may touch, reads and writes alike (an earlier kernel
// may still be reading what it overwrites). It may call let_next_kernel_start() as soon as the next
// kernel's blocks may take their places on the GPU: they only wait there until this one is done.
#include <cuda_runtime.h>

#include "core/cuda/check.h"

namespace minidl::cuda {

__device__ __forceinline__ void wait_for_earlier_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// True on a device of compute capability 9.0 or later unless MINIDL_EARLY_LAUNCH=0 (every launch
/// then waits for the one before it, as `<<<...>>>` does).
bool early_launch_enabled();

/// Whether `device` has compute capability 9.0 or later (asked once per device).
bool hopper_or_later(int device);

/// Whether the current device runs thread block clusters (compute capability 9.0 on).
bool thread_block_clusters();

/// launch_early in thread block clusters of cluster_x blocks along x (1: none; else
/// thread_block_clusters() must hold), whose shared memory every block of a cluster can read
/// (cooperative_groups::this_cluster()). early = false waits for the kernel before, as `<<<...>>>`.
template <class... Params, class... Args>
void launch_in_clusters(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster_x,
                        bool early, size_t shared_bytes, cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (early && early_launch_enabled()) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster_x;
    attributes[count].val.clusterDim.y = 1;
    attributes[count++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
  if (status != cudaSuccess) detail::throw_call_error("CUDA", name, detail::cuda_error_text(status), __FILE__, __LINE__);
}

/// `kernel<<<grid, block, shared_bytes, stream>>>(args...)`, allowed to start before the previous
/// kernel of `stream` has finished (see above); throws naming `name` if the launch fails.
template <class... Params, class... Args>
void launch_early(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                  cudaStream_t stream, Args... args) {
  launch_in_clusters(name, kernel, grid, block, 1, true, shared_bytes, stream, args...);
}

}  // namespace minidl::cuda
