#pragma once
// CUDA graphs from the host's side: record the work a piece of code queues on a device once, then
// replay all of it with one launch. Includes no CUDA header; in a build without CUDA every call
// explains that there is no GPU.
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace minidl::cuda {

/// One captured sequence of device work, as torch.cuda.CUDAGraph. While capturing, the work this
/// thread queues on the device is recorded, not run; memory it allocates comes from a pool private
/// to the graph (kept until the graph is destroyed, since every replay reuses those addresses), and
/// random kernels read their Philox seed and offset on the device, so that each replay draws fresh
/// numbers: the ones the same work would have drawn run eagerly at that point.
///   cuda::Graph g;  g.capture_begin();  y = f(x);  g.capture_end();  g.replay();  // y holds f(x)
/// A synchronizing call while capturing (item(), to(cpu), a cudaMalloc'd free) makes capture_end
/// throw; the graph is then empty and the allocations it made go back to the general cache.
class Graph {
 public:
  explicit Graph(Device device = Device::cuda());
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void capture_begin();
  /// Ends the capture and instantiates the graph; throws, leaving the graph empty, if it failed.
  void capture_end();
  /// Ends a capture that an error interrupted, discarding it; never throws.
  void capture_abort() noexcept;
  /// Queues the whole graph on the device's compute stream; returns without waiting.
  void replay();
  bool captured() const;
  /// Kernels and other nodes in the captured graph.
  size_t num_nodes() const;
  Device device() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace minidl::cuda
