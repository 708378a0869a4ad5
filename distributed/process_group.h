#pragma once
// A group of processes, one per GPU, on one or several machines, that exchange tensors through NCCL
// collectives: the layer under DistributedDataParallel, as torch.distributed's NCCL process group.
// Includes no CUDA or NCCL header; in a build without NCCL, creating a group explains what is missing.
#include <chrono>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/tensor.h"
#include "distributed/rendezvous.h"

namespace minidl::distributed {

enum class ReduceOp { Sum, Avg, Max, Min, Product };

struct ProcessGroupOptions {
  /// How long joining waits for the other ranks, and how long a queued collective may stay unfinished
  /// before the group's watchdog decides a rank has died or hung: it says so and ends the process
  /// with status 1 (as PyTorch's NCCL watchdog does; an exception cannot reach a thread blocked on
  /// the GPU). A rank whose process ends without leaving the group ends the others at once, where
  /// the ranks met over TCP. Default: MINIDL_DIST_TIMEOUT seconds from the environment, else 600.
  ProcessGroupOptions& timeout(std::chrono::milliseconds t) {
    timeout_ = t;
    return *this;
  }
  std::chrono::milliseconds timeout() const;

 private:
  std::chrono::milliseconds timeout_{0};
};

/// One rank's membership in a group. Collectives take contiguous tensors on the group's device and run
/// on that device's compute stream (ordered with every kernel before and after; no host wait), so they
/// can be captured in a CUDA graph. Every rank must call the same collectives in the same order.
///   ProcessGroup group(rank, 2, Rendezvous::tcp("127.0.0.1", 29500), Device::cuda(rank));
///   group.all_reduce(grad, ReduceOp::Avg);
class ProcessGroup {
 public:
  ProcessGroup(int rank, int world_size, const Rendezvous& where, Device device, ProcessGroupOptions options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return world_size_; }
  Device device() const { return device_; }

  /// In place: every rank's `tensor` becomes the reduction over all ranks (bitwise the same on all).
  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  /// In place: every rank's `tensor` becomes rank `root`'s.
  void broadcast(Tensor& tensor, int root = 0);
  /// Every rank's tensor, stacked in rank order: [world_size, *tensor.shape()].
  Tensor all_gather(const Tensor& tensor);
  /// Returns once every rank has reached it (and the device has finished what was queued before).
  void barrier();

  /// For overlapping communication with computation (DistributedDataParallel): the all_reduce runs on
  /// the group's own communication stream, after what the compute stream has queued so far, while
  /// later kernels go on; join() makes the compute stream wait for every such all_reduce.
  void all_reduce_overlapped(Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  void join();

  struct Impl;

 private:
  int rank_, world_size_;
  Device device_;
  std::unique_ptr<Impl> impl_;
};

/// True where minidl was built with NCCL (the collectives need it and a GPU).
bool nccl_available();
/// Why there is no NCCL, and what to do; empty when nccl_available().
std::string nccl_unavailable_reason();

/// What a launcher (scripts/launch.sh, torchrun) tells each process: RANK, WORLD_SIZE, LOCAL_RANK.
struct LaunchEnv {
  int rank = 0, world_size = 1, local_rank = 0;
  /// Reads them; a missing WORLD_SIZE means one process. Throws on values that are not whole numbers
  /// or do not fit (rank >= world size, say).
  static LaunchEnv read();
};

/// The process's default group, as torch.distributed.init_process_group(): ranks and the rendezvous
/// from the launcher's environment, this process's GPU cuda:LOCAL_RANK, which also becomes the
/// current device.
///   distributed::init();   // then distributed::rank(), distributed::group().all_reduce(t)
void init(ProcessGroupOptions options = {});
void init(int rank, int world_size, const Rendezvous& where, Device device, ProcessGroupOptions options = {});
bool is_initialized();
ProcessGroup& group();
int rank();
int world_size();
/// Leaves the default group (its communicator is finalized).
void destroy();

}  // namespace minidl::distributed
