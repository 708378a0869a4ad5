// Side-stream work that joins the compute stream lazily (context.h, join_side_stream_later).
//
// A layer's backward computes its weight gradient on the side stream beside its input gradient.
// Joining at the end of that op would make the next layer's backward wait for the weight gradient,
// which nothing there reads: in a small model's step the slower of the two is then on the critical
// path at every layer. So the op leaves the join for later, and the compute stream waits for the side
// stream only where the side work's memory is next touched:
// - the tensors it reads stay alive here until the join, so the allocator cannot hand their blocks
//   to compute-stream work while the side stream still reads them;
// - a block it writes joins first if it is freed before (the allocator asks side_stream_writes);
// - the autograd engine joins before it reads or changes a gradient made there, before hooks, and
//   at the end of every backward (core/autograd_engine.cpp), so user code never sees unjoined work;
// - new side work first joins the earlier one where that holds more than kMaxUnjoinedReadBytes alive.
//   Without it, a backward where nothing else joins keeps every layer's inputs and output
//   gradients to its end: char_gpt in float32 (nanoGPT's size, where no autocast cast reads the
//   weight gradients) peaked at 3,554 MB on an H100, and at 2,591 MB with this join, at the same
//   tokens/s; the earlier work has had the rest of a layer's backward to finish. A small model's
//   reads (the MNIST MLP's, a few MB) stay below the bound and keep their overlap.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/context.h"

namespace minidl::cuda {

namespace {

constexpr int kMaxDevices = 64;

constexpr size_t kMaxUnjoinedReadBytes = size_t{64} << 20;

struct Unjoined {
  std::mutex mutex;
  std::vector<Tensor> reads;
  size_t read_bytes = 0;
  std::vector<const void*> writes;  // the written tensors' storage, by address
};

std::atomic<uint64_t> unjoined_devices{0};  // bit d: device d has side work not joined yet

Unjoined& unjoined(int index) {
  static Unjoined slots[kMaxDevices];
  return slots[index];
}

bool has_unjoined(int index) {
  return index >= 0 && index < kMaxDevices && ((unjoined_devices.load(std::memory_order_acquire) >> index) & 1);
}

}  // namespace

void join_side_stream_later(int index, std::vector<Tensor> reads, const std::vector<const void*>& writes) {
  MINIDL_CHECK(index >= 0 && index < kMaxDevices, "join_side_stream_later: device ", index, " out of range");
  Unjoined& u = unjoined(index);
  std::lock_guard lock(u.mutex);
  for (Tensor& t : reads) {
    u.read_bytes += t.nbytes();
    u.reads.push_back(std::move(t));
  }
  u.writes.insert(u.writes.end(), writes.begin(), writes.end());
  unjoined_devices.fetch_or(uint64_t{1} << index, std::memory_order_release);
}

bool side_stream_writes(int index, const void* ptr) {
  if (!has_unjoined(index)) return false;
  Unjoined& u = unjoined(index);
  std::lock_guard lock(u.mutex);
  return std::find(u.writes.begin(), u.writes.end(), ptr) != u.writes.end();
}

void join_side_stream(int index) {
  if (!has_unjoined(index)) return;
  std::vector<Tensor> released;  // freed after the lock: their blocks come back through the allocator
  Unjoined& u = unjoined(index);
  std::lock_guard lock(u.mutex);
  if (!has_unjoined(index)) return;
  DeviceGuard guard(index);
  stream_wait(index, compute_stream(index), side_stream(index));
  released.swap(u.reads);
  u.read_bytes = 0;
  u.writes.clear();
  unjoined_devices.fetch_and(~(uint64_t{1} << index), std::memory_order_release);
}

void join_side_stream_if_holding_much(int index) {
  if (!has_unjoined(index)) return;
  size_t held = 0;
  {
    Unjoined& u = unjoined(index);
    std::lock_guard lock(u.mutex);
    held = u.read_bytes;
  }
  if (held > kMaxUnjoinedReadBytes) join_side_stream(index);
}

cudaStream_t fork_side_stream(int index, cudaStream_t compute) {
  join_side_stream_if_holding_much(index);
  const cudaStream_t side = side_stream(index);
  stream_wait(index, side, compute);
  return side;
}

bool uses_unjoined_side_work(const Tensor& t) {
  if (!t.defined() || !t.device().is_cuda() || !has_unjoined(t.device().index)) return false;
  const void* base = t.impl().storage->data();
  Unjoined& u = unjoined(t.device().index);
  std::lock_guard lock(u.mutex);
  if (std::find(u.writes.begin(), u.writes.end(), base) != u.writes.end()) return true;
  return std::any_of(u.reads.begin(), u.reads.end(), [&](const Tensor& r) { return r.impl().storage->data() == base; });
}

void join_side_streams() {
  const uint64_t devices = unjoined_devices.load(std::memory_order_acquire);
  for (int d = 0; d < kMaxDevices; ++d)
    if ((devices >> d) & 1) join_side_stream(d);
}

}  // namespace minidl::cuda
