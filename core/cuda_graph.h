#pragma once
// CUDA graphs from the host's side: record the work a piece of code queues on a device once, then
// replay all of it with one launch. Includes no CUDA header; in a build without CUDA every call
// explains that there is no GPU.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

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
  /// While capturing: copies the bytes of `src` into `dst` (both contiguous, on this device, of the
  /// same size) as the graph's work at this point, from a source that set_copy_source may move
  /// before any replay. This is how a step's static inputs are refilled: a copy queued before the
  /// replay would run alone between two graphs, where the GPU is otherwise idle for several
  /// microseconds while a graph launch gets under way. Returns the copy's number.
  int capture_copy(const Tensor& src, Tensor& dst);
  /// Before a replay: copy `copy` reads `src` from now on, a contiguous tensor of the same byte count
  /// on this device (any alignment). `src` must stay alive until the replays that read it are done.
  void set_copy_source(int copy, const Tensor& src);
  /// While capturing: writes values[i] into the one-element *scalars[i] (a floating dtype, on this
  /// device) as the graph's work at this point, with values that set_scalar_values may change before
  /// any replay. The values travel in a kernel's arguments, changed in the instantiated graph, so a
  /// learning rate that changes at every step costs no work between two replays. Returns the
  /// writes' number.
  int capture_scalar_writes(const std::vector<Tensor*>& scalars, const std::vector<double>& values);
  /// Before a replay: writes `writes` store `values` from the next replay on (replays already
  /// queued store what they were launched with).
  void set_scalar_values(int writes, const std::vector<double>& values);
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
