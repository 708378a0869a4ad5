#pragma once
// Optimizer: parameter groups, each with its own learning rate, and zero_grad. Subclasses
// implement step(); steps never record on the tape.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minidl::optim {

/// A set of parameters sharing a learning rate; a group without lr takes the optimizer's. A tensor
/// may appear once across all groups (an optimizer refuses one listed twice, which it would step twice).
///   optim::SGD opt({{backbone->parameters(), 1e-3}, {head->parameters()}}, optim::SGDOptions(0.01));
/// Adam and AdamW also take a weight decay per group (nanoGPT decays 2-D weights only); the other
/// optimizers refuse a group that sets one.
///   optim::AdamW opt({{matrices}, {biases_and_norms, std::nullopt, 0.0}}, optim::AdamOptions(1e-3).weight_decay(0.1));
struct ParamGroup {
  ParamGroup(std::vector<Tensor> params, std::optional<double> lr = std::nullopt,  // NOLINT: implicit on purpose
             std::optional<double> weight_decay = std::nullopt)
      : params(std::move(params)), lr(lr), weight_decay(weight_decay) {}
  std::vector<Tensor> params;
  std::optional<double> lr;  // resolved to a value when the optimizer is built
  std::optional<double> weight_decay;  // unset: the optimizer's options decide
  /// The rate the first schedule built on the optimizer found (PyTorch's "initial_lr"): every later
  /// schedule starts from it, and SequentialLR resets to it. Unset until a schedule is built.
  std::optional<double> initial_lr;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Updates every parameter that has a gradient.
  virtual void step() = 0;
  /// step(), skipped where the 0-d float32 `found_inf` holds a nonzero value (GradScaler::step calls
  /// it after an inf or NaN in the gradients). SGD, and Adam(W) on CUDA, read the flag in their kernels,
  /// on the device, with no host sync, so a scaled step can be captured in a CUDA graph; others read it on the
  /// host first (a sync) and step only where it is 0.
  ///   optimizer.step_if_finite(found_inf);
  virtual void step_if_finite(const Tensor& found_inf);
  /// Clears gradients: set to none (the default, as in PyTorch) or to zeros.
  void zero_grad(bool set_to_none = true);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  double lr(size_t group = 0) const { return *groups_.at(group).lr; }
  /// Adds parameters to train from now on (a layer unfrozen mid-run), as PyTorch's add_param_group:
  /// a group without lr takes the optimizer's; a tensor already in a group is an error.
  ///   optimizer.add_param_group({head->parameters(), 1e-3});
  void add_param_group(ParamGroup group);
  /// Copies learning rates changed since the last step to the device scalars that CUDA kernels read
  /// (one fill each). step() does it itself; a captured step (cuda::GraphedStep) needs it before
  /// each replay, since replaying runs no host code.
  void sync_device_state();
  /// Each group's learning rate with the 0-d tensor on its parameters' CUDA device that the kernels
  /// read it from (made here where no step has made it yet); groups on the CPU are left out.
  /// cuda::GraphedStep writes these from inside its graph, then calls device_rates_written().
  struct DeviceRate {
    Tensor* scalar;
    double value;
  };
  std::vector<DeviceRate> device_rates();
  /// Records that the device scalars hold the current learning rates (work already queued writes them).
  void device_rates_written();
  /// False where a step holds per-step host state that a CUDA graph would freeze.
  virtual bool capturable() const { return true; }

  /// The state to save and restore as named tensors (PyTorch's optimizer.state_dict(), flattened):
  /// "param_groups.G.lr" (float64 scalar), "param_groups.G.params" (int64 indices of the group's
  /// parameters, counted across groups), and per parameter I what the optimizer keeps for it:
  /// "state.I.momentum_buffer" (SGD), "state.I.exp_avg", "state.I.exp_avg_sq", "state.I.step" (Adam).
  /// The tensors share the live state: save them before the next step.
  ///   safetensors::save("optimizer.safetensors", optimizer.state_dict());
  std::map<std::string, Tensor> state_dict() const;
  /// Restores state_dict() of an optimizer of the same kind over parameters of the same shapes and
  /// dtypes, copying each tensor to its parameter's device. Everything is checked first: on an error
  /// the optimizer is unchanged, and the message names the first missing, unexpected or mismatched entry.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  /// group_weight_decay: the subclass reads ParamGroup::weight_decay (else a group setting it is refused).
  Optimizer(std::vector<ParamGroup> groups, double default_lr, const char* name, bool group_weight_decay = false);
  /// Makes room for the state of a group just appended to groups_ (by add_param_group).
  virtual void group_added() {}
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

  /// One tensor a subclass keeps per parameter: the parameter's shape and dtype, or else an int64
  /// scalar (a count). state_dict() names it "state.I.<name>".
  struct StateField {
    const char* name;
    bool like_param;
  };
  virtual std::vector<StateField> state_fields() const { return {}; }
  /// Parameter (gi, i)'s state in state_fields() order, or empty while it has none (before its first step).
  virtual std::vector<Tensor> param_state(size_t /*gi*/, size_t /*i*/) const { return {}; }
  /// Replaces it with `values`, checked against state_fields() and on the parameter's device; empty: none.
  virtual void set_param_state(size_t /*gi*/, size_t /*i*/, std::vector<Tensor> /*values*/) {}
  /// Puts a loaded state tensor into `slot`: in place where `slot` already has its shape, dtype and
  /// device, so that a captured CUDA graph reading the old buffer sees the loaded values.
  static void restore_into(Tensor& slot, Tensor value);
  /// step_if_finite for an optimizer whose kernels read the flag on the device: step() with
  /// found_inf_ pointing at `found_inf` (a one-element float32 tensor) for its duration.
  void step_reading_found_inf(const Tensor& found_inf);

  std::vector<ParamGroup> groups_;
  const Tensor* found_inf_ = nullptr;  // set during step_reading_found_inf
  const char* name_;
  double default_lr_;
  bool group_weight_decay_ = false;

 private:
  struct DeviceLr {
    Tensor value;
    double written = 0;
    // Whether `value` can serve parameters like `like` (made, on their device, in their dtype).
    bool serves(const Tensor& like) const {
      return value.defined() && value.device() == like.device() && value.dtype() == like.dtype();
    }
  };
  std::vector<DeviceLr> device_lr_;
};

}  // namespace minidl::optim
