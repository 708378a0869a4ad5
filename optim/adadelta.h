#pragma once
#include <vector>

#include "nn/options.h"
#include "optim/optimizer.h"

namespace minidl::optim {

struct AdadeltaOptions {
  AdadeltaOptions(double lr = 1.0) : lr_(lr) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(double, lr);
  MINIDL_ARG(double, rho) = 0.9;
  MINIDL_ARG(double, eps) = 1e-6;
  MINIDL_ARG(double, weight_decay) = 0;
};

/// Adadelta as PyTorch's: steps scaled by the ratio of running roots of past updates and of past
/// gradients, so the rate adapts per weight; lr (default 1) scales the result.
///   optim::Adadelta optimizer(model->parameters());
class Adadelta : public Optimizer {
 public:
  Adadelta(std::vector<ParamGroup> groups, AdadeltaOptions options = {});
  Adadelta(std::vector<Tensor> params, AdadeltaOptions options = {})
      : Adadelta(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
  void step() override;
  const AdadeltaOptions& options() const { return options_; }

 protected:
  void group_added() override { state_.emplace_back(groups_.back().params.size()); }
  std::vector<StateField> state_fields() const override;
  std::vector<Tensor> param_state(size_t gi, size_t i) const override;
  void set_param_state(size_t gi, size_t i, std::vector<Tensor> values) override;

 private:
  struct State {
    Tensor square_avg, acc_delta;
  };
  AdadeltaOptions options_;
  std::vector<std::vector<State>> state_;
};

}  // namespace minidl::optim
