// Autocast's thread-local state and the weight cast cache (PyTorch keeps both per thread too).
#include "core/autocast.h"

#include <map>
#include <memory>
#include <utility>

#include "core/autograd_internal.h"
#include "core/error.h"

namespace minidl::autocast {

namespace {

struct DeviceState {
  bool enabled = false;
  DType dtype;
};

constinit thread_local DeviceState cpu_state{false, DType::BFloat16};
constinit thread_local DeviceState cuda_state{false, DType::Float16};
constinit thread_local int enabled_count = 0;  // device types with autocast on
constinit thread_local int exclude_depth = 0;
constinit thread_local int guard_depth = 0;
constinit thread_local bool cache_enabled = true;
constinit thread_local uint64_t regions_opened = 0;

DeviceState& state(DeviceType type) { return type == DeviceType::CUDA ? cuda_state : cpu_state; }

void set_enabled(DeviceType type, bool on) {
  DeviceState& s = state(type);
  enabled_count += int(on) - int(s.enabled);
  s.enabled = on;
}

// The key is the source's impl and the target dtype. The weak reference keeps the impl's memory
// from being reused by another tensor while the entry lives (a stale key would hit otherwise).
struct CacheEntry {
  std::weak_ptr<TensorImpl> source;
  uint64_t version;
  Tensor cast;
};
thread_local std::map<std::pair<const TensorImpl*, DType>, CacheEntry> cache;

}  // namespace

bool is_enabled(DeviceType type) { return state(type).enabled; }
DType dtype(DeviceType type) { return state(type).dtype; }
bool is_cache_enabled() { return cache_enabled; }

bool is_active() { return enabled_count > 0 && exclude_depth == 0 && autograd::internal::running_entry == 0; }

ExcludeGuard::ExcludeGuard() { ++exclude_depth; }
ExcludeGuard::~ExcludeGuard() { --exclude_depth; }

Tensor cached_cast(const Tensor& source, DType dtype) {
  auto it = cache.find({source.impl_ptr().get(), dtype});
  if (it == cache.end() || it->second.source.expired() || it->second.version != source._version()) return {};
  // A cast whose tape entry a backward has released (a second forward in the same region after a
  // backward) would end the next backward with a "freed graph" error: cast afresh instead.
  const uint64_t node = it->second.cast.impl().node;
  if (node != 0) {
    const autograd::internal::TapeEntry* entry = autograd::internal::find_entry(node);
    if (!entry || entry->released()) return {};
  }
  return it->second.cast;
}

void store_cached_cast(const Tensor& source, DType dtype, const Tensor& cast) {
  cache[{source.impl_ptr().get(), dtype}] = CacheEntry{source.impl_ptr(), source._version(), cast};
}

void clear_cache() { cache.clear(); }
size_t cache_size() { return cache.size(); }
uint64_t region() { return regions_opened; }

}  // namespace minidl::autocast

namespace minidl {

// torch.autocast(device_type) without a dtype takes the current one: the device type's default, or
// the dtype of an enclosing guard.
AutocastGuard::AutocastGuard(Device device) : AutocastGuard(device, autocast::dtype(device.type()), true) {}

AutocastGuard::AutocastGuard(Device device, DType dtype, bool enabled, bool cache_enabled)
    : type_(device.type()),
      previous_enabled_(autocast::is_enabled(device.type())),
      previous_dtype_(autocast::dtype(device.type())),
      previous_cache_enabled_(autocast::is_cache_enabled()) {
  MINIDL_CHECK(is_reduced_floating(dtype) || dtype == kFloat32,
               "AutocastGuard: expected a dtype of bfloat16, float16 or float32, got ", dtype);
  if (autocast::guard_depth++ == 0) ++autocast::regions_opened;
  autocast::set_enabled(type_, enabled);
  autocast::state(type_).dtype = dtype;
  autocast::cache_enabled = cache_enabled;
}

AutocastGuard::~AutocastGuard() {
  autocast::set_enabled(type_, previous_enabled_);
  autocast::state(type_).dtype = previous_dtype_;
  autocast::cache_enabled = previous_cache_enabled_;
  if (--autocast::guard_depth == 0) autocast::clear_cache();
}

}  // namespace minidl
