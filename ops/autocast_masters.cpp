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
};
thread_local std::map<std::pair<const TensorImpl*, DType>, MasterCopy> copies;
thread_local uint64_t refreshed_region = 0;

// Whether anything but this registry holds the copy's memory (a tape that saved it, a user).
bool shared(const Tensor& copy) { return copy.impl_ptr().use_count() > 1 || copy.impl().storage.use_count() > 1; }

// Once per region: the stale copies made again in one pass per device (every copy while this
// thread captures a graph: the replays must make them, whatever their versions now). In place, so
// that a graph captured earlier keeps reading current copies; but a copy something else still
// holds (a tape not yet run backward) is left to it with its old values, as PyTorch's casts are,
// and replaced by a new one. Writing in place bumps the version: a holder this missed refuses the
// new values rather than use them as old ones.
void refresh_copies() {
  const bool capturing = cuda::this_thread_captures();
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
    if (capturing || source._version() != it->second.version) {
      Tensor& copy = it->second.copy;
      if (!capturing && shared(copy)) copy = Tensor::empty(copy.shape(), copy.dtype(), copy.device());
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
    refresh_copies();
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

size_t master_copy_count() {
  return static_cast<size_t>(
      std::count_if(copies.begin(), copies.end(), [](const auto& entry) { return !entry.second.master.expired(); }));
}

}  // namespace minidl::autocast
