#pragma once
#include <vector>

#include "nn/options.h"
#include "optim/optimizer.h"

namespace minidl::optim {

struct SGDOptions {
  SGDOptions(double lr) : lr_(lr) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(double, lr);
  MINIDL_ARG(double, momentum) = 0;
  MINIDL_ARG(double, dampening) = 0;
  MINIDL_ARG(double, weight_decay) = 0;
  MINIDL_ARG(bool, nesterov) = false;
};

/// Stochastic gradient descent with PyTorch's momentum, dampening, Nesterov and weight decay.
///   optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions options);
  SGD(std::vector<Tensor> params, SGDOptions options) : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
  void step() override;
  /// Skips the step on the device where found_inf != 0: parameters and momentum buffers unchanged.
  void step_if_finite(const Tensor& found_inf) override;
  const SGDOptions& options() const { return options_; }

 protected:
  void group_added() override { momentum_.emplace_back(groups_.back().params.size()); }
  std::vector<StateField> state_fields() const override;
  std::vector<Tensor> param_state(size_t gi, size_t i) const override;
  void set_param_state(size_t gi, size_t i, std::vector<Tensor> values) override;

 private:
  SGDOptions options_;
  std::vector<std::vector<Tensor>> momentum_;  // per group, per parameter; undefined until first used
};

}  // namespace minidl::optim
