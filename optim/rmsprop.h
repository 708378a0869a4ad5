#pragma once
#include <vector>

#include "nn/options.h"
#include "optim/optimizer.h"

namespace minidl::optim {

struct RMSpropOptions {
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(double, lr);
  MINIDL_ARG(double, alpha) = 0.99;
  MINIDL_ARG(double, eps) = 1e-8;
  MINIDL_ARG(double, weight_decay) = 0;
  MINIDL_ARG(double, momentum) = 0;
  MINIDL_ARG(bool, centered) = false;
};

/// RMSprop as PyTorch's: the gradient divided by a running root mean square of past gradients
/// (minus their mean, when centered), with optional momentum and weight decay.
///   optim::RMSprop optimizer(model->parameters(), optim::RMSpropOptions(1e-3).momentum(0.9));
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<ParamGroup> groups, RMSpropOptions options = {});
  RMSprop(std::vector<Tensor> params, RMSpropOptions options = {})
      : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
  void step() override;
  const RMSpropOptions& options() const { return options_; }

 protected:
  void group_added() override { state_.emplace_back(groups_.back().params.size()); }
  std::vector<StateField> state_fields() const override;
  std::vector<Tensor> param_state(size_t gi, size_t i) const override;
  void set_param_state(size_t gi, size_t i, std::vector<Tensor> values) override;

 private:
  struct State {
    Tensor square_avg, momentum_buffer, grad_avg;  // the last two only with momentum / centered
  };
  RMSpropOptions options_;
  std::vector<std::vector<State>> state_;
};

}  // namespace minidl::optim
