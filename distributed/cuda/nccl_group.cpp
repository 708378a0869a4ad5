// ProcessGroup on NCCL. The communicator is made non-blocking so that joining can time out (a rank
// that never comes would otherwise hang ncclCommInitRank forever); every call that answers
// ncclInProgress is polled to completion. A watchdog thread marks the compute stream with an event
// every second and watches the oldest unfinished one: a collective waiting for a rank that died
// keeps the stream from reaching it, and after the timeout the watchdog names what it waited for,
// ends the process. After a TCP rendezvous the ranks also keep its
// connections open: a process that is killed closes them, and the watchdog ends the job at once
// instead of waiting for the timeout (NCCL itself may not notice: a dead peer's collectives can
// simply stop doing anything). A rank leaving normally says so first.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <exception>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#include "core/cuda.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "distributed/process_group.h"

namespace minidl::distributed {

using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void throw_nccl(const char* call, ncclResult_t status, ncclComm_t comm, const char* file, int line) {
  std::string text = ncclGetErrorString(status);
  if (comm)
    if (const char* last = ncclGetLastError(comm); last && *last) text += std::string(": ") + last;
  ::minidl::detail::throw_error(file, line, ::minidl::detail::concat("NCCL call ", call, " failed: ", text));
}

// A non-blocking communicator answers ncclInProgress until the call is done; wait for it.
ncclResult_t finish(ncclResult_t status, ncclComm_t comm, Clock::time_point deadline) {
  while (status == ncclInProgress) {
    if (Clock::now() > deadline) return ncclInProgress;
    std::this_thread::yield();
    ncclCommGetAsyncError(comm, &status);
  }
  return status;
}

#define NCCL_CHECK(call, comm, deadline)                                                \
  do {                                                                                  \
    ncclResult_t minidl_nccl_ = finish((call), (comm), (deadline));                     \
    if (minidl_nccl_ != ncclSuccess) throw_nccl(#call, minidl_nccl_, comm, __FILE__, __LINE__); \
  } while (0)

ncclDataType_t nccl_type(DType dtype, const char* op, bool reduction) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::Int32: return ncclInt32;
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    case DType::Bool:
      MINIDL_CHECK(!reduction, op, ": bool tensors cannot be reduced; convert them to int64 first");
      return ncclUint8;
  }
  MINIDL_FAIL(op, ": unsupported dtype");
}

ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg:
      MINIDL_CHECK(dtype == kFloat32 || dtype == kFloat64, "all_reduce: ReduceOp::Avg needs a floating tensor, got ",
                   dtype);
      return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Product: return ncclProd;
  }
  MINIDL_FAIL("all_reduce: unknown ReduceOp");
}

}  // namespace

struct ProcessGroup::Impl {
  int rank = 0, world = 1, device = 0;
  std::chrono::milliseconds timeout{0};
  ncclComm_t comm = nullptr;
  cudaStream_t comm_stream = nullptr;
  cudaEvent_t fork = nullptr, joined = nullptr;
  bool pending = false;  // an overlapped all_reduce not yet joined

  // The watchdog.
  struct Mark {
    cudaEvent_t event;
    Clock::time_point queued;
  };
  std::deque<Mark> marks;
  std::thread watchdog;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stop = false;
  std::vector<Link> links;  // to the other ranks (rank 0: all of them; others: rank 0)
  std::atomic<const char*> last_collective{"none"};

  ~Impl() { leave(true); }  // a constructor that failed after the rendezvous: the others stop too

  Clock::time_point deadline() const { return Clock::now() + timeout; }

  void check(const Tensor& t, const char* op) const {
    MINIDL_CHECK(t.defined(), op, ": the tensor is undefined");
    MINIDL_CHECK(t.device() == Device::cuda(device), op, ": the tensor is on ", t.device(), ", but this rank's group is on ",
                 Device::cuda(device), " (NCCL exchanges GPU memory; move it with .to())");
    MINIDL_CHECK(t.is_contiguous(), op, ": the tensor must be contiguous (call .contiguous())");
  }

  void note(const char* op) {
    last_collective.store(op, std::memory_order_relaxed);
  }

  [[noreturn]] void tear_down(const std::string& why) {
    // No ncclCommAbort first: with a peer gone it can block for good (seen with P2P transports), and
    // ending the process frees the communicator anyway and tells the other ranks, through the links.
    std::fprintf(stderr,
                 "minidl distributed: rank %d of %d: %s. The last collective this rank queued from the host was "
                 "%s. Ending this process (status 1).\n",
                 rank, world, why.c_str(), last_collective.load());
    std::fflush(stderr);
    std::_Exit(1);
  }

  // A byte on a link: 'B' the rank left the group normally, 'F' it failed with an error; a closed
  // link without either: its process ended (killed, crashed).
  static constexpr char kBye = 'B', kFailed = 'F';

  void watch_links() {
    for (size_t i = 0; i < links.size();) {
      pollfd pfd{links[i].fd, POLLIN, 0};
      if (::poll(&pfd, 1, 0) <= 0) {
        ++i;
        continue;
      }
      char said = 0;
      const ssize_t got = ::recv(links[i].fd, &said, 1, MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
        ++i;
        continue;
      }
      if (got == 1 && said == kBye) {
        ::close(links[i].fd);
        links.erase(links.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      tear_down("rank " + std::to_string(links[i].rank) +
                (got == 1 && said == kFailed ? " stopped with an error"
                                             : "'s process ended without leaving the group (killed or crashed)"));
    }
  }

  void leave(bool failed) {
    const char say = failed ? kFailed : kBye;
    for (const Link& l : links) {
      ::send(l.fd, &say, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(l.fd);
    }
    links.clear();
  }

  void watch() {
    cudaSetDevice(device);
    Clock::time_point last_mark{};
    std::unique_lock lock(stop_mutex);
    while (!stop_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop; })) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        tear_down(std::string("NCCL reported an error: ") + ncclGetErrorString(async));
      watch_links();
      // Stay off the stream while a graph captures it (what we queued would land in the graph).
      std::shared_lock<std::shared_mutex> off_capture(cuda::capture_mutex(device), std::try_to_lock);
      if (!off_capture.owns_lock()) continue;
      while (!marks.empty() && cudaEventQuery(marks.front().event) == cudaSuccess) {
        cudaEventDestroy(marks.front().event);
        marks.pop_front();
      }
      if (!marks.empty() && Clock::now() - marks.front().queued > timeout) {
        const double waited = std::chrono::duration<double>(Clock::now() - marks.front().queued).count();
        char why[256];
        std::snprintf(why, sizeof(why),
                      "the GPU's work has not moved for %.0f s (timeout %.0f s): a collective is waiting for a rank "
                      "that died or hung",
                      waited, std::chrono::duration<double>(timeout).count());
        tear_down(why);
      }
      if (Clock::now() - last_mark > std::chrono::seconds(1)) {
        cudaEvent_t e;
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) {
          cudaEventRecord(e, cuda::compute_stream(device));
          marks.push_back({e, Clock::now()});
          last_mark = Clock::now();
        }
      }
    }
    for (Mark& m : marks) cudaEventDestroy(m.event);
  }
};

ProcessGroup::ProcessGroup(int rank, int world_size, const Rendezvous& where, Device device, ProcessGroupOptions options)
    : rank_(rank), world_size_(world_size), device_(device), impl_(std::make_unique<Impl>()) {
  MINIDL_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "ProcessGroup: rank ", rank,
               " is outside 0..", world_size - 1, " for a world of ", world_size);
  MINIDL_CHECK(device.is_cuda(), "ProcessGroup: NCCL needs a CUDA device for this rank, got ", device);
  cuda::check_device(device.index);
  cuda::DeviceGuard guard(device.index);
  Impl& g = *impl_;
  g.rank = rank, g.world = world_size, g.device = device.index, g.timeout = options.timeout();

  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) throw_nccl("ncclGetUniqueId", status, nullptr, __FILE__, __LINE__);
  }
  const std::string blob = rendezvous(where, rank, world_size,
                                      std::string(reinterpret_cast<const char*>(&id), sizeof(id)), g.timeout, &g.links);
  MINIDL_CHECK(blob.size() == sizeof(id), "ProcessGroup: rank 0 sent ", blob.size(), " bytes; NCCL's id has ",
               sizeof(id), " (is every rank running the same minidl?)");
  std::memcpy(&id, blob.data(), sizeof(id));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const Clock::time_point deadline = g.deadline();
  ncclResult_t status = ncclCommInitRankConfig(&g.comm, world_size, id, rank, &config);
  status = finish(status, g.comm, deadline);
  if (status == ncclInProgress) {
    ncclCommAbort(g.comm);
    MINIDL_FAIL("ProcessGroup: rank ", rank, " of ", world_size, ": NCCL could not connect the ranks within ",
                std::chrono::duration<double>(g.timeout).count(), " s (a rank died after the rendezvous, or the "
                "machines cannot reach each other: see NCCL_SOCKET_IFNAME and NCCL_DEBUG=INFO)");
  }
  if (status != ncclSuccess) {
    ncclComm_t comm = g.comm;
    g.comm = nullptr;
    if (comm) ncclCommAbort(comm);
    throw_nccl("ncclCommInitRankConfig", status, nullptr, __FILE__, __LINE__);
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&g.comm_stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&g.fork, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&g.joined, cudaEventDisableTiming));
  g.watchdog = std::thread([&g] { g.watch(); });
}

ProcessGroup::~ProcessGroup() {
  Impl& g = *impl_;
  if (g.watchdog.joinable()) {
    {
      std::lock_guard lock(g.stop_mutex);
      g.stop = true;
    }
    g.stop_cv.notify_all();
    g.watchdog.join();
  }
  g.leave(std::uncaught_exceptions() > 0);
  if (!g.comm) return;
  cudaSetDevice(g.device);
  // Finalize flushes what is queued; if a peer is gone it cannot finish, and abort releases it.
  const ncclResult_t status = finish(ncclCommFinalize(g.comm), g.comm, g.deadline());
  if (status == ncclSuccess) ncclCommDestroy(g.comm);
  else ncclCommAbort(g.comm);
  if (g.fork) cudaEventDestroy(g.fork);
  if (g.joined) cudaEventDestroy(g.joined);
  if (g.comm_stream) cudaStreamDestroy(g.comm_stream);
}

void ProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  Impl& g = *impl_;
  g.check(tensor, "all_reduce");
  const ncclDataType_t type = nccl_type(tensor.dtype(), "all_reduce", true);
  cuda::DeviceGuard guard(g.device);
  g.note("all_reduce");
  NCCL_CHECK(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()), type,
                           nccl_op(op, tensor.dtype()), g.comm, cuda::compute_stream(g.device)),
             g.comm, g.deadline());
}

void ProcessGroup::broadcast(Tensor& tensor, int root) {
  Impl& g = *impl_;
  g.check(tensor, "broadcast");
  MINIDL_CHECK(root >= 0 && root < g.world, "broadcast: root ", root, " is outside 0..", g.world - 1);
  const ncclDataType_t type = nccl_type(tensor.dtype(), "broadcast", false);
  cuda::DeviceGuard guard(g.device);
  g.note("broadcast");
  NCCL_CHECK(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()), type, root,
                           g.comm, cuda::compute_stream(g.device)),
             g.comm, g.deadline());
}

Tensor ProcessGroup::all_gather(const Tensor& tensor) {
  Impl& g = *impl_;
  g.check(tensor, "all_gather");
  const ncclDataType_t type = nccl_type(tensor.dtype(), "all_gather", false);
  Shape shape = tensor.shape();
  shape.insert(shape.begin(), g.world);
  Tensor out = Tensor::empty(shape, tensor.dtype(), tensor.device());
  cuda::DeviceGuard guard(g.device);
  g.note("all_gather");
  NCCL_CHECK(ncclAllGather(tensor.raw_data(), out.raw_data(), static_cast<size_t>(tensor.numel()), type, g.comm,
                           cuda::compute_stream(g.device)),
             g.comm, g.deadline());
  return out;
}

void ProcessGroup::barrier() {
  Impl& g = *impl_;
  Tensor token = Tensor::empty({1}, kFloat32, Device::cuda(g.device));
  all_reduce(token, ReduceOp::Sum);  // its value does not matter; finishing it means all ranks came
  cuda::synchronize(g.device);
}

void ProcessGroup::all_reduce_overlapped(Tensor& tensor, ReduceOp op) {
  Impl& g = *impl_;
  g.check(tensor, "all_reduce");
  const ncclDataType_t type = nccl_type(tensor.dtype(), "all_reduce", true);
  cuda::DeviceGuard guard(g.device);
  CUDA_CHECK(cudaEventRecord(g.fork, cuda::compute_stream(g.device)));
  CUDA_CHECK(cudaStreamWaitEvent(g.comm_stream, g.fork, 0));
  g.note("all_reduce (overlapped)");
  NCCL_CHECK(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()), type,
                           nccl_op(op, tensor.dtype()), g.comm, g.comm_stream),
             g.comm, g.deadline());
  g.pending = true;
}

void ProcessGroup::join() {
  Impl& g = *impl_;
  if (!g.pending) return;
  cuda::DeviceGuard guard(g.device);
  CUDA_CHECK(cudaEventRecord(g.joined, g.comm_stream));
  CUDA_CHECK(cudaStreamWaitEvent(cuda::compute_stream(g.device), g.joined, 0));
  g.pending = false;
}

bool nccl_available() { return true; }
std::string nccl_unavailable_reason() { return ""; }

}  // namespace minidl::distributed
