// CUDA graphs (core/cuda_graph.h): stream capture on the device's compute stream, a private memory
// pool (core/cuda/allocator.h) and the Philox state on the device (core/random.h).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/allocator.h"
#include "core/cuda/context.h"
#include "core/cuda/graph_memsets.h"
#include "core/cuda/launch.cuh"
#include "core/cuda_graph.h"
#include "core/half.h"
#include "core/random.h"
#include "core/tensor.h"

namespace minidl::cuda {

namespace {

std::atomic<uint64_t> next_pool{1};

// The seed and base offset of one replay, set on the device just before the graph runs: a kernel
// launch carries them as arguments, so the host never waits and never writes memory the previous
// replay may still read.
__global__ void set_philox_state(uint64_t* state, uint64_t seed, uint64_t offset) {
  state[0] = seed;
  state[1] = offset;
}

// The graph's last work: moves the base offset past the draws this replay took, where the next
// replay's draws start when nothing else drew from the generator in between (Graph::replay then
// launches no set_philox_state).
__global__ void advance_philox_offset(uint64_t* state, uint64_t draws) { state[1] += draws; }

// Where a copy reads its next source, on the device: the address, how far it moves after each
// replay, and a count of the copy's blocks that have read it.
struct CopySource {
  uint64_t address;
  int64_t advance;
  unsigned long long blocks_done;
};

// Copies a step's input into its static buffer as the graph's first work, from the address in
// `source`, which its last block then moves on by `advance`. A training loop's inputs are mostly
// consecutive slices of one buffer (or one buffer again and again), so the next replay's source is
// usually already there and the host writes it only when the pattern changes (Graph::replay). The
// address moves from replay to replay, so its alignment is checked here.
__global__ void copy_input_kernel(CopySource* source, unsigned char* dst, size_t nbytes) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  const unsigned char* src = reinterpret_cast<const unsigned char*>(source->address);
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
    const size_t vectors = nbytes / 16;
    for (size_t i = first; i < vectors; i += stride)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    for (size_t i = vectors * 16 + first; i < nbytes; i += stride) dst[i] = src[i];
  } else {
    for (size_t i = first; i < nbytes; i += stride) dst[i] = src[i];
  }
  __syncthreads();  // every thread of this block has read the address
  if (threadIdx.x != 0) return;
  if (gridDim.x > 1) {
    if (atomicAdd(&source->blocks_done, 1ull) != gridDim.x - 1) return;
    source->blocks_done = 0;  // the last block: every other one has read the address too
  }
  source->address += source->advance;
}

// Sets the sources of up to kSourcesPerLaunch copies before a replay, when they are not where the
// previous replay left them.
constexpr int kSourcesPerLaunch = 8;
struct SourceUpdates {
  CopySource* source[kSourcesPerLaunch];
  uint64_t address[kSourcesPerLaunch];
  int64_t advance[kSourcesPerLaunch];
  int count;
};

__global__ void set_copy_sources(SourceUpdates updates) {
  const int i = threadIdx.x;
  if (i >= updates.count) return;
  updates.source[i]->address = updates.address[i];
  updates.source[i]->advance = updates.advance[i];
  updates.source[i]->blocks_done = 0;
}

// Up to kScalarsPerWrite one-element stores, each of the destination's bytes (converted on the
// host), as one kernel's arguments: set_scalar_values changes them in the instantiated graph, where a
// kernel queued before the replay would leave the GPU idle between two graphs.
constexpr int kScalarsPerWrite = 16;
struct ScalarWrites {
  void* dst[kScalarsPerWrite];
  uint64_t bits[kScalarsPerWrite];
  uint8_t bytes[kScalarsPerWrite];
  int count;
};

__global__ void write_scalars_kernel(ScalarWrites writes) {
  wait_for_earlier_kernels();
  let_next_kernel_start();
  const int i = threadIdx.x;
  if (i >= writes.count) return;
  const uint64_t bits = writes.bits[i];
  switch (writes.bytes[i]) {
    case 8: *static_cast<uint64_t*>(writes.dst[i]) = bits; break;
    case 4: *static_cast<uint32_t*>(writes.dst[i]) = static_cast<uint32_t>(bits); break;
    default: *static_cast<uint16_t*>(writes.dst[i]) = static_cast<uint16_t>(bits); break;
  }
}

// `value` as the bytes of a one-element tensor of `dtype`, rounded as a fill rounds it.
uint64_t scalar_bits(double value, DType dtype) {
  uint64_t bits = 0;
  auto put = [&bits](auto v) { std::memcpy(&bits, &v, sizeof(v)); };
  switch (dtype) {
    case kFloat64: put(value); break;
    case kFloat32: put(static_cast<float>(value)); break;
    case kBFloat16: put(BFloat16(value).bits); break;
    case kFloat16: put(Half(value).bits); break;
    default: MINIDL_FAIL("cuda::Graph::capture_scalar_writes: expected floating scalars, got ", dtype);
  }
  return bits;
}

constexpr unsigned kCopyThreads = 256;

unsigned copy_blocks(size_t nbytes) {
  const size_t blocks = (nbytes / 16 + kCopyThreads - 1) / kCopyThreads;
  return static_cast<unsigned>(std::min<size_t>(std::max<size_t>(blocks, 1), 1024));
}

}  // namespace

struct Graph::Impl {
  Device device;
  uint64_t pool = next_pool++;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Tensor philox_state;        // int64 [2] on the device: seed, base offset
  uint64_t random_draws = 0;  // Philox draws one replay takes
  // What philox_state will hold when the replays queued so far are done, once a replay has set it.
  bool philox_known = false;
  uint64_t philox_seed = 0, philox_next_offset = 0;
  bool capturing = false;
  std::unique_lock<std::shared_mutex> others_off_stream;  // held while capturing
  struct Copy {
    Tensor source;  // one CopySource on the device, in the graph's pool
    Tensor dst;
    size_t nbytes;
    uint64_t wanted = 0;      // what the next replay must read (set_copy_source)
    bool known = false;       // the host knows the device's CopySource:
    uint64_t last_read = 0;   //   the address the last replay read,
    int64_t advance = 0;      //   and how far it moved it
  };
  std::vector<Copy> copies;
  // A capture_scalar_writes: its kernels (kScalarsPerWrite scalars each), their nodes in `graph`,
  // and the values the next replay stores.
  struct Writes {
    std::vector<Tensor> scalars;  // kept alive: the graph stores into them
    std::vector<cudaGraphNode_t> nodes;
    std::vector<ScalarWrites> args;
  };
  std::vector<Writes> writes;

  // Writes the sources the next replay must read where the last replay did not leave them, and
  // guesses that each will move on as it just did: by as much again (consecutive slices of one
  // buffer), or not at all (the same buffer). A copy whose source follows the guess costs nothing
  // here, where a kernel node's new argument (cudaGraphExecKernelNodeSetParams) cost about 2 us of
  // GPU time at every launch (MNIST MLP, batch 64, TF32, H200). Until replay() has queued the
  // graph, the host does not count on what the device's sources hold.
  void update_copy_sources(cudaStream_t stream) {
    SourceUpdates updates{};
    for (Copy& c : copies) {
      const uint64_t next = c.last_read + static_cast<uint64_t>(c.advance);
      if (!c.known || next != c.wanted) {
        c.advance = c.known ? static_cast<int64_t>(c.wanted - c.last_read) : 0;
        updates.source[updates.count] = static_cast<CopySource*>(c.source.raw_data());
        updates.address[updates.count] = c.wanted;
        updates.advance[updates.count] = c.advance;
        if (++updates.count == kSourcesPerLaunch) flush(updates, stream);
      }
      c.known = false;
      c.last_read = c.wanted;
    }
    if (updates.count > 0) flush(updates, stream);
  }

  static void flush(SourceUpdates& updates, cudaStream_t stream) {
    set_copy_sources<<<1, kSourcesPerLaunch, 0, stream>>>(updates);
    CUDA_LAUNCH_CHECK(set_copy_sources);
    updates.count = 0;
  }

  void destroy_graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
    copies.clear();
    writes.clear();
  }

  // Ends stream capture and the private pool, whatever state they are in. Never throws.
  cudaError_t stop_capture() {
    cudaGraph_t captured = nullptr;
    cudaError_t status = cudaStreamEndCapture(compute_stream(device.index), &captured);
    if (status == cudaSuccess) graph = captured;
    else if (captured) cudaGraphDestroy(captured);
    end_private_pool(device.index);
    random_draws = default_generator().capture_end();
    capturing = false;
    set_this_thread_captures(false);
    if (others_off_stream.owns_lock()) others_off_stream.unlock();
    return status;
  }
};

Graph::Graph(Device device) : impl_(std::make_unique<Impl>()) {
  MINIDL_CHECK(device.is_cuda(), "cuda::Graph: expected a CUDA device, got ", device);
  check_device(device.index);
  impl_->device = device;
  impl_->philox_state = Tensor::empty({2}, kInt64, device);
}

Graph::~Graph() {
  if (impl_->capturing) capture_abort();
  impl_->destroy_graph();
  release_private_pool(impl_->device.index, impl_->pool);
}

void Graph::capture_begin() {
  MINIDL_CHECK(!impl_->capturing, "cuda::Graph::capture_begin: already capturing");
  MINIDL_CHECK(!captured(), "cuda::Graph::capture_begin: this graph was already captured; make a new one");
  DeviceGuard guard(impl_->device.index);
  cudaStream_t stream = compute_stream(impl_->device.index);
  join_side_stream(impl_->device.index);  // eager side work stays out of the graph
  impl_->others_off_stream = std::unique_lock(capture_mutex(impl_->device.index));
  set_this_thread_captures(true);
  // Relaxed mode: the private pool may still cudaMalloc a new block while capturing (the stricter
  // modes forbid it), and other threads (a data loader's uploads) keep working. Synchronizing the
  // captured stream stays an error that invalidates the capture.
  if (cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed); status != cudaSuccess) {
    set_this_thread_captures(false);
    impl_->others_off_stream.unlock();
    CUDA_CHECK(status);
  }
  impl_->capturing = true;
  begin_private_pool(impl_->device.index, impl_->pool);
  default_generator().capture_begin(static_cast<const uint64_t*>(impl_->philox_state.raw_data()));
}

void Graph::capture_end() {
  MINIDL_CHECK(impl_->capturing, "cuda::Graph::capture_end: not capturing");
  DeviceGuard guard(impl_->device.index);
  // Side-stream work left to join later (a forward's embedding sort, when no backward followed it in
  // the capture) must end inside the graph, or the capture fails.
  join_side_stream(impl_->device.index);
  if (const uint64_t draws = default_generator().capture_draws(); draws > 0) {
    advance_philox_offset<<<1, 1, 0, compute_stream(impl_->device.index)>>>(
        static_cast<uint64_t*>(impl_->philox_state.raw_data()), draws);
    cudaGetLastError();  // it fails only where the capture already has: stop_capture says so below
  }
  cudaError_t status = impl_->stop_capture();
  if (status != cudaSuccess) {
    cudaGetLastError();
    MINIDL_FAIL("cuda::Graph: the capture failed (", detail::cuda_error_text(status),
                "); something in the captured code synchronized with the device or the host (item(), to(cpu), "
                "printing a tensor) or used another stream");
  }
  try {
    memset_nodes_to_kernels(impl_->graph);
  } catch (...) {
    impl_->destroy_graph();
    throw;
  }
  status = cudaGraphInstantiate(&impl_->exec, impl_->graph, 0);
  if (status != cudaSuccess) {
    cudaGetLastError();
    impl_->destroy_graph();
    MINIDL_FAIL("cuda::Graph: cudaGraphInstantiate failed: ", detail::cuda_error_text(status));
  }
}

void Graph::capture_abort() noexcept {
  if (!impl_->capturing) return;
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(impl_->device.index);
  impl_->stop_capture();
  cudaGetLastError();  // the error that interrupted the capture is the caller's to report
  impl_->destroy_graph();
  if (previous >= 0) cudaSetDevice(previous);
}

int Graph::capture_copy(const Tensor& src, Tensor& dst) {
  MINIDL_CHECK(impl_->capturing, "cuda::Graph::capture_copy: not capturing");
  MINIDL_CHECK(src.device() == impl_->device && dst.device() == impl_->device, "cuda::Graph::capture_copy: expected ",
               "tensors on ", impl_->device, ", got ", src.device(), " and ", dst.device());
  MINIDL_CHECK(src.is_contiguous() && dst.is_contiguous() && src.nbytes() == dst.nbytes(),
               "cuda::Graph::capture_copy: expected two contiguous tensors of the same size, got ", src.shape(), " ",
               src.dtype(), " and ", dst.shape(), " ", dst.dtype());
  DeviceGuard guard(impl_->device.index);
  cudaStream_t stream = compute_stream(impl_->device.index);
  // Filled by the first replay (Impl::update_copy_sources), not here: a kernel now would be captured.
  Tensor source = Tensor::empty({static_cast<int64_t>(sizeof(CopySource) / 8)}, kInt64, impl_->device);
  launch_early("copy_input_kernel", copy_input_kernel, copy_blocks(dst.nbytes()), kCopyThreads, 0, stream,
               static_cast<CopySource*>(source.raw_data()), static_cast<unsigned char*>(dst.raw_data()),
               dst.nbytes());
  Impl::Copy copy{source, dst, dst.nbytes()};
  copy.wanted = reinterpret_cast<uint64_t>(src.raw_data());
  impl_->copies.push_back(std::move(copy));
  return static_cast<int>(impl_->copies.size()) - 1;
}

void Graph::set_copy_source(int copy, const Tensor& src) {
  MINIDL_CHECK(captured(), "cuda::Graph::set_copy_source: nothing captured");
  MINIDL_CHECK(copy >= 0 && copy < static_cast<int>(impl_->copies.size()), "cuda::Graph::set_copy_source: copy ",
               copy, " does not exist; the graph has ", impl_->copies.size());
  Impl::Copy& c = impl_->copies[static_cast<size_t>(copy)];
  MINIDL_CHECK(src.device() == impl_->device && src.is_contiguous() && src.nbytes() == c.nbytes,
               "cuda::Graph::set_copy_source: expected a contiguous tensor of ", c.nbytes, " bytes on ", impl_->device,
               ", got ", src.shape(), " ", src.dtype(), " on ", src.device(),
               src.is_contiguous() ? "" : " (not contiguous)");
  c.wanted = reinterpret_cast<uint64_t>(src.raw_data());
}

int Graph::capture_scalar_writes(const std::vector<Tensor*>& scalars, const std::vector<double>& values) {
  MINIDL_CHECK(impl_->capturing, "cuda::Graph::capture_scalar_writes: not capturing");
  MINIDL_CHECK(scalars.size() == values.size(), "cuda::Graph::capture_scalar_writes: expected one value per scalar, got ",
               values.size(), " values for ", scalars.size(), " scalars");
  Impl::Writes w;
  for (Tensor* t : scalars) {
    MINIDL_CHECK(t && t->defined(), "cuda::Graph::capture_scalar_writes: got an undefined tensor");
    MINIDL_CHECK(t->device() == impl_->device && t->numel() == 1 && is_floating(t->dtype()),
                 "cuda::Graph::capture_scalar_writes: expected one-element floating tensors on ", impl_->device,
                 ", got ", t->shape(), " ", t->dtype(), " on ", t->device());
    w.scalars.push_back(*t);
  }
  DeviceGuard guard(impl_->device.index);
  cudaStream_t stream = compute_stream(impl_->device.index);
  for (size_t first = 0; first < scalars.size(); first += kScalarsPerWrite) {
    ScalarWrites args{};
    for (size_t i = first; i < std::min(scalars.size(), first + kScalarsPerWrite); ++i, ++args.count) {
      args.dst[args.count] = scalars[i]->raw_data();
      args.bits[args.count] = scalar_bits(values[i], scalars[i]->dtype());
      args.bytes[args.count] = static_cast<uint8_t>(element_size(scalars[i]->dtype()));
    }
    launch_early("write_scalars_kernel", write_scalars_kernel, 1, kScalarsPerWrite, 0, stream, args);
    // The kernel just captured is the stream's one capture dependency: its node, whose arguments
    // set_scalar_values changes.
    cudaStreamCaptureStatus status;
    const cudaGraphNode_t* last = nullptr;
    size_t count = 0;
    CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &last, nullptr, &count));
    MINIDL_CHECK(status == cudaStreamCaptureStatusActive && count == 1,
                 "cuda::Graph::capture_scalar_writes: the capture lost track of its kernel (", count, " nodes last)");
    w.nodes.push_back(last[0]);
    w.args.push_back(args);
  }
  impl_->writes.push_back(std::move(w));
  return static_cast<int>(impl_->writes.size()) - 1;
}

void Graph::set_scalar_values(int writes, const std::vector<double>& values) {
  MINIDL_CHECK(captured(), "cuda::Graph::set_scalar_values: nothing captured");
  MINIDL_CHECK(writes >= 0 && writes < static_cast<int>(impl_->writes.size()),
               "cuda::Graph::set_scalar_values: writes ", writes, " do not exist; the graph has ", impl_->writes.size());
  Impl::Writes& w = impl_->writes[static_cast<size_t>(writes)];
  MINIDL_CHECK(values.size() == w.scalars.size(), "cuda::Graph::set_scalar_values: expected ", w.scalars.size(),
               " values, got ", values.size());
  DeviceGuard guard(impl_->device.index);
  for (size_t k = 0; k < w.nodes.size(); ++k) {
    ScalarWrites& args = w.args[k];
    bool changed = false;
    for (int j = 0; j < args.count; ++j) {
      const size_t i = k * kScalarsPerWrite + static_cast<size_t>(j);
      const uint64_t bits = scalar_bits(values[i], w.scalars[i].dtype());
      changed |= bits != args.bits[j];
      args.bits[j] = bits;
    }
    if (!changed) continue;  // an update costs the next launch about 2 us of GPU time
    cudaKernelNodeParams params{};
    CUDA_CHECK(cudaGraphKernelNodeGetParams(w.nodes[k], &params));
    void* arguments[] = {&args};
    params.kernelParams = arguments;
    params.extra = nullptr;
    CUDA_CHECK(cudaGraphExecKernelNodeSetParams(impl_->exec, w.nodes[k], &params));
  }
}

void Graph::replay() {
  MINIDL_CHECK(captured(), "cuda::Graph::replay: nothing captured");
  DeviceGuard guard(impl_->device.index);
  cudaStream_t stream = compute_stream(impl_->device.index);
  if (impl_->random_draws > 0) {
    Generator& gen = default_generator();
    uint64_t seed, offset;
    {
      std::lock_guard lock(gen.mutex());
      seed = gen.seed();
      offset = gen.take_offset(impl_->random_draws);
    }
    // The last replay's advance_philox_offset leaves (seed, offset) there unless the generator was
    // seeded or drawn from since: then the state is set afresh.
    if (!impl_->philox_known || seed != impl_->philox_seed || offset != impl_->philox_next_offset) {
      set_philox_state<<<1, 1, 0, stream>>>(static_cast<uint64_t*>(impl_->philox_state.raw_data()), seed, offset);
      CUDA_LAUNCH_CHECK(set_philox_state);
    }
    impl_->philox_known = true;
    impl_->philox_seed = seed;
    impl_->philox_next_offset = offset + impl_->random_draws;
  }
  impl_->update_copy_sources(stream);
  CUDA_CHECK(cudaGraphLaunch(impl_->exec, stream));
  for (Impl::Copy& c : impl_->copies) c.known = true;
}

bool Graph::captured() const { return impl_->exec != nullptr; }

size_t Graph::num_nodes() const {
  size_t n = 0;
  if (impl_->graph) CUDA_CHECK(cudaGraphGetNodes(impl_->graph, nullptr, &n));
  return n;
}

Device Graph::device() const { return impl_->device; }

}  // namespace minidl::cuda
