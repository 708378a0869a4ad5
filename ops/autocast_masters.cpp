#include "ops/autocast_masters.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "core/autograd.h"
#include "core/cuda.h"
#include "ops/copy.h"
#include "ops/kernels.h"

namespace minidl::autocast {

namespace {

// One copy per master and dtype, per thread as the rest of autocast's state. The weak reference
// drops the entry with its master (and keeps the key from naming another tensor meanwhile).
struct MasterCopy {
  std::weak_ptr<TensorImpl> master;
  uint64_t version;  // the master's version the copy holds
  Tensor copy;
  bool written_by_step = false;  // the last optimizer step wrote it (copies_written)
};
using Key = std::pair<const TensorImpl*, DType>;
thread_local std::map<Key, MasterCopy> copies;
thread_local uint64_t refreshed_region = 0;
thread_local bool replays_refresh_stale = false;  // ReplaysRefreshStaleCopies is alive

// Whether anything but this registry holds the copy's memory (a tape that saved it, a user).
bool shared(const Tensor& copy) { return copy.impl_ptr().use_count() > 1 || copy.impl().storage.use_count() > 1; }

enum class Refresh {
  Region,        // a region opens: stale copies (every one while capturing)
  BeforeReplay,  // a graph replays next: stale copies, in place whoever holds them
};

// Once per region: the stale copies made again in one pass per device (every copy while this
// thread captures a graph: the replays must make them, whatever their versions now; but not those
// the step's optimizer writes when the graph's owner refreshes stale copies before each replay).
// In place, so that a graph captured earlier keeps reading current copies; but outside a replay's
// refresh, a copy something else still holds (a tape not yet run backward) is left to it with its
// old values, as PyTorch's casts are, and replaced by a new one. Writing in place bumps the
// version: a holder this missed refuses the new values rather than use them as old ones.
void refresh_copies(Refresh when) {
  const bool capturing = when == Refresh::Region && cuda::this_thread_captures();
  struct Pass {
    Device device;
    std::vector<Tensor> sources, copies;
  };
  std::vector<Pass> passes;  // one per device
  for (auto it = copies.begin(); it != copies.end();) {
    std::shared_ptr<TensorImpl> master = it->second.master.lock();
    if (!master) {
      it = copies.erase(it);
      continue;
    }
    const Tensor source(master);
    const bool stale = source._version() != it->second.version;
    const bool written_in_graph = replays_refresh_stale && it->second.written_by_step && !stale;
    if (capturing ? !written_in_graph : stale) {
      Tensor& copy = it->second.copy;
      if (!capturing && when == Refresh::Region && shared(copy))
        copy = Tensor::empty(copy.shape(), copy.dtype(), copy.device());
      auto pass = std::find_if(passes.begin(), passes.end(), [&](const Pass& p) { return p.device == source.device(); });
      if (pass == passes.end()) pass = passes.insert(passes.end(), Pass{source.device(), {}, {}});
      pass->sources.push_back(source);
      pass->copies.push_back(it->second.copy);
      it->second.version = source._version();
    }
    ++it;
  }
  for (Pass& pass : passes) {
    kernels_for(pass.device).copy_multi(pass.sources, pass.copies);
    for (const Tensor& c : pass.copies) c.bump_version();
  }
}

}  // namespace

bool is_master(const Target& target, const Tensor& t) {
  return target.cast && target.policy == Policy::LowerPrecision && is_reduced_floating(target.dtype) &&
         t.defined() && t.dtype() == kFloat32 && t.device().type() == target.device && t.is_leaf() &&
         t.requires_grad() && t.is_contiguous() && grad_mode_enabled() && is_cache_enabled();
}

Tensor master_copy(const Tensor& master, DType dtype) {
  if (refreshed_region != region()) {
    refresh_copies(Refresh::Region);
    refreshed_region = region();
  }
  const auto key = std::make_pair(static_cast<const TensorImpl*>(master.impl_ptr().get()), dtype);
  auto it = copies.find(key);
  if (it != copies.end() && !it->second.master.expired() && it->second.version == master._version())
    return it->second.copy;
  // A new master, or one written in place since this region began: a copy of its own. A new
  // tensor, not the old one overwritten, which ops of this region may have saved.
  Tensor copy;
  {
    NoGradGuard no_grad;
    copy = to(master.detach(), master.device(), dtype);
  }
  copies[key] = MasterCopy{master.impl_ptr(), master._version(), copy};
  return copy;
}

std::vector<Tensor> copies_to_write(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  if (copies.empty()) return out;
  DType dtype = kFloat32;  // the first copy found picks the dtype: one per update
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorImpl* key = params[i].impl_ptr().get();
    auto it = copies.end();
    for (DType d : {kBFloat16, kFloat16})
      if ((dtype == kFloat32 || d == dtype) && it == copies.end()) it = copies.find(Key{key, d});
    const bool writable = it != copies.end() && !it->second.master.expired() && !shared(it->second.copy);
    if (writable && dtype == kFloat32) {
      dtype = it->first.second;
      out.resize(params.size());
    }
    if (writable) out[i] = it->second.copy;
  }
  return out;
}

void copies_written(const std::vector<Tensor>& params, const std::vector<Tensor>& written) {
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorImpl* key = params[i].impl_ptr().get();
    for (DType d : {kBFloat16, kFloat16}) {
      auto it = copies.find(Key{key, d});
      if (it == copies.end()) continue;
      const bool wrote = i < written.size() && written[i].defined() && written[i].is_same(it->second.copy);
      it->second.written_by_step = wrote;
      if (wrote) it->second.version = params[i]._version();
    }
  }
}

void refresh_stale_copies() { refresh_copies(Refresh::BeforeReplay); }

ReplaysRefreshStaleCopies::ReplaysRefreshStaleCopies() : previous_(replays_refresh_stale) {
  replays_refresh_stale = true;
}
ReplaysRefreshStaleCopies::~ReplaysRefreshStaleCopies() { replays_refresh_stale = previous_; }

size_t master_copy_count() {
  return static_cast<size_t>(
      std::count_if(copies.begin(), copies.end(), [](const auto& entry) { return !entry.second.master.expired(); }));
}

}  // namespace minidl::autocast
