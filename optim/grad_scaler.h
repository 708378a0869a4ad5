#pragma once
// Dynamic loss scaling for float16 training, as torch.amp.GradScaler: the loss is multiplied by a
// scale before backward so that small float16 gradients do not flush to zero; the gradients are
// divided by it again before the optimizer uses them, and a step whose gradients overflowed is
// skipped and the scale lowered. Everything runs on the device without a host sync (the scale, the
// growth count and the inf flag are device tensors), so a scaled step can be captured in a CUDA graph.
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/options.h"
#include "optim/optimizer.h"

namespace minidl::optim {

struct GradScalerOptions {
  MINIDL_ARG(double, init_scale) = 65536.0;  // 2^16
  MINIDL_ARG(double, growth_factor) = 2.0;
  MINIDL_ARG(double, backoff_factor) = 0.5;
  MINIDL_ARG(int64_t, growth_interval) = 2000;  // consecutive good steps before the scale grows
  MINIDL_ARG(bool, enabled) = true;
};

/// PyTorch's GradScaler. A disabled scaler passes everything through (scale() returns the loss,
/// step() calls optimizer.step()), so one training loop serves every precision.
///   optim::GradScaler scaler(optim::GradScalerOptions().init_scale(65536.0));
///   scaler.scale(loss).backward();
///   scaler.unscale_(optimizer);   // optional: to clip or read the true gradients first
///   scaler.step(optimizer);       // skipped where a gradient holds inf or NaN
///   scaler.update();              // lowers the scale after a skipped step, raises it after growth_interval good ones
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// loss * scale (differentiable), the scale held on the loss's device as a 0-d float32 tensor.
  Tensor scale(const Tensor& loss);
  std::vector<Tensor> scale(const std::vector<Tensor>& losses);
  /// Divides the gradients of the optimizer's parameters by the scale in place, noting on the device
  /// whether any holds an inf or NaN: one fused pass. At most once per optimizer between updates.
  void unscale_(Optimizer& optimizer);
  /// Unscales (unless unscale_ ran) and steps, skipping the step where an inf or NaN was found:
  /// SGD, and Adam(W) on CUDA, skip it on the device; other optimizers read the flag on the host (a sync).
  void step(Optimizer& optimizer);
  /// Updates the scale from the steps since the last update (on the device): times backoff_factor
  /// if any found an inf or NaN, times growth_factor after growth_interval good steps in a row.
  void update();
  /// Sets the scale to `new_scale` (PyTorch's update(new_scale)).
  void update(double new_scale);

  /// The current scale (reads the device: a sync); 1.0 when disabled.
  double get_scale() const;
  /// The scale tensor itself (0-d float32 on the device; undefined before the first scale()).
  const Tensor& scale_tensor() const { return scale_; }
  /// The growth count (reads the device: a sync).
  int64_t get_growth_tracker() const;
  /// The found_inf flag of `optimizer`'s last unscale (0-d float32 on the device), or undefined.
  Tensor found_inf(const Optimizer& optimizer) const;
  bool is_enabled() const { return options_.enabled(); }
  const GradScalerOptions& options() const { return options_; }

  /// {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} as 0-d CPU
  /// tensors (float32, float64, float64, int64, int32), PyTorch's keys; empty when disabled.
  ///   safetensors::save("scaler.safetensors", scaler.state_dict());
  std::map<std::string, Tensor> state_dict() const;
  /// Restores state_dict(); the scale and count are written in place where they exist on the device
  /// (a captured graph keeps reading them). A missing key is an error naming it.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    Tensor found_inf;
  };
  void lazy_init(Device device);

  GradScalerOptions options_;
  Tensor scale_;           // 0-d float32 on the device
  Tensor growth_tracker_;  // 0-d int32 on the device
  int32_t init_growth_tracker_ = 0;
  std::map<const Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace minidl::optim
