#pragma once
#include <vector>

#include "nn/options.h"
#include "optim/optimizer.h"

namespace minidl::optim {

struct AdagradOptions {
  AdagradOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(double, lr);
  MINIDL_ARG(double, lr_decay) = 0;
  MINIDL_ARG(double, weight_decay) = 0;
  MINIDL_ARG(double, initial_accumulator_value) = 0;
  MINIDL_ARG(double, eps) = 1e-10;
};

/// Adagrad as PyTorch's: each weight's step divided by the root of the sum of its squared
/// gradients so far; the rate decays as lr / (1 + (step - 1) * lr_decay).
///   optim::Adagrad optimizer(model->parameters(), optim::AdagradOptions(0.1));
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions options = {});
  Adagrad(std::vector<Tensor> params, AdagradOptions options = {})
      : Adagrad(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
  void step() override;
  const AdagradOptions& options() const { return options_; }
  /// The step count lives on the host.
  bool capturable() const override { return false; }

 protected:
  void group_added() override { state_.emplace_back(groups_.back().params.size()); }
  std::vector<StateField> state_fields() const override;
  std::vector<Tensor> param_state(size_t gi, size_t i) const override;
  void set_param_state(size_t gi, size_t i, std::vector<Tensor> values) override;

 private:
  struct State {
    Tensor sum;
    int64_t step = 0;
  };
  AdagradOptions options_;
  std::vector<std::vector<State>> state_;
};

}  // namespace minidl::optim
