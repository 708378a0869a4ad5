#pragma once
// Optimizer: parameter groups, each with its own learning rate, and zero_grad. Subclasses
// implement step(); steps never record on the tape.
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace minidl::optim {

/// A set of parameters sharing a learning rate; a group without lr takes the optimizer's.
///   optim::SGD opt({{backbone->parameters(), 1e-3}, {head->parameters()}}, optim::SGDOptions(0.01));
struct ParamGroup {
  ParamGroup(std::vector<Tensor> params, std::optional<double> lr = std::nullopt)  // NOLINT: implicit on purpose
      : params(std::move(params)), lr(lr) {}
  std::vector<Tensor> params;
  std::optional<double> lr;  // resolved to a value when the optimizer is built
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Updates every parameter that has a gradient.
  virtual void step() = 0;
  /// Clears gradients: set to none (the default, as in PyTorch) or to zeros.
  void zero_grad(bool set_to_none = true);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  double lr(size_t group = 0) const { return *groups_.at(group).lr; }
  /// Copies learning rates changed since the last step to the device scalars that CUDA kernels read
  /// (one fill each). step() does it itself; a captured step (cuda::GraphedStep) needs it before
  /// each replay, since replaying runs no host code.
  void sync_device_state();
  /// False where a step holds per-step host state that a CUDA graph would freeze (Adam's step count).
  virtual bool capturable() const { return true; }

 protected:
  Optimizer(std::vector<ParamGroup> groups, double default_lr, const char* name);
  /// Calls fn(group_index, param_index, param, grad) for every parameter that has a gradient.
  template <class Fn>
  void for_each_gradient(Fn&& fn) {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
        Tensor& p = groups_[gi].params[i];
        Tensor grad = p.grad();
        if (grad.defined()) fn(gi, i, p, grad);
      }
    }
  }
  /// Group `gi`'s learning rate as a 0-d tensor on `like`'s CUDA device and dtype, refreshed when the
  /// host value changed; null on the CPU, where kernels take the value itself.
  const Tensor* lr_on_device(size_t gi, const Tensor& like);

  std::vector<ParamGroup> groups_;

 private:
  struct DeviceLr {
    Tensor value;
    double written = 0;
  };
  std::vector<DeviceLr> device_lr_;
};

}  // namespace minidl::optim
