#pragma once
// Autocast state, as torch.autocast: per device type and per thread, whether ops run in the
// policy's dtypes (ops/autocast_policy.h decides which op runs in which dtype), and the low dtype.
// core/ keeps the state, the guard and the weight cast cache; the ops apply the policy.
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace minidl {

namespace autocast {

/// Whether autocast is on for `type` on this thread.   `autocast::is_enabled(kCUDA)`
bool is_enabled(DeviceType type);
inline bool is_enabled(Device device) { return is_enabled(device.type()); }
/// The low dtype autocast uses on `type` (PyTorch's defaults: float16 on CUDA, bfloat16 on the CPU).
DType dtype(DeviceType type);
inline DType dtype(Device device) { return dtype(device.type()); }
/// Whether casts of leaf weights that require grad are cached while the outermost guard lives.
bool is_cache_enabled();

/// True where an op should apply the autocast policy: autocast is on for some device type, the op
/// is not running inside another autocast-dispatched op (which already cast its inputs, as
/// PyTorch's dispatcher excludes the autocast key below it), and no backward closure is running
/// (backward ops run in the dtypes the forward saved, as PyTorch recommends).
bool is_active();

/// Turns the policy off for its lifetime on this thread: ops called inside an autocast-dispatched
/// op run in the dtypes they are given. Used by ops/autocast_policy.h; rarely needed elsewhere.
class ExcludeGuard {
 public:
  ExcludeGuard();
  ~ExcludeGuard();
  ExcludeGuard(const ExcludeGuard&) = delete;
  ExcludeGuard& operator=(const ExcludeGuard&) = delete;
};

/// The cached cast of `source` to `dtype` made in this autocast region, or an undefined tensor.
/// A cast is stale (and missed) once `source` was written in place after it.
Tensor cached_cast(const Tensor& source, DType dtype);
/// Remembers `cast` as `source` cast to `dtype` until the outermost AutocastGuard exits.
void store_cached_cast(const Tensor& source, DType dtype, const Tensor& cast);
/// Drops every cached cast (the outermost guard's exit does it; PyTorch's clear_autocast_cache).
void clear_cache();
/// Casts held in the cache (for tests).
size_t cache_size();
/// A number for the outermost autocast region now open on this thread, new each time one opens
/// (ops/autocast_masters.cpp refreshes its copies once a region).
uint64_t region();

}  // namespace autocast

/// Runs the ops of its scope on `device`'s type under autocast, as torch.autocast: matmul, linear
/// and convolutions in `dtype`, softmax, losses, norms and sums in float32 (ops/autocast_policy.cpp
/// has the table). Guards nest and each restores the previous state on exit; `enabled = false`
/// turns autocast off in its scope. The casts are differentiable: a float32 weight gets a float32
/// gradient. Casts of leaf weights are cached until the outermost guard exits (`cache_enabled`).
///   { AutocastGuard autocast(Device::cuda(), kBFloat16); loss = criterion(model->forward(x), y); }
///   loss.backward();   // outside the guard, as in PyTorch
class AutocastGuard {
 public:
  /// The device type's default low dtype: float16 on CUDA, bfloat16 on the CPU.
  explicit AutocastGuard(Device device);
  AutocastGuard(Device device, DType dtype, bool enabled = true, bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType type_;
  bool previous_enabled_;
  DType previous_dtype_;
  bool previous_cache_enabled_;
};

}  // namespace minidl
