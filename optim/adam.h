#pragma once
#include <tuple>
#include <utility>
#include <vector>

#include "nn/options.h"
#include "optim/optimizer.h"

namespace minidl::optim {

struct AdamOptions {
  AdamOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(double, lr);
  /// (beta1, beta2), given as two numbers, a pair or libtorch's tuple:
  ///   AdamOptions(2e-4).betas({0.5, 0.999}),  .betas(std::make_tuple(0.5, 0.999))
  struct Betas {
    Betas(double first, double second) : first(first), second(second) {}
    Betas(const std::pair<double, double>& b) : first(b.first), second(b.second) {}  // NOLINT: implicit
    Betas(const std::tuple<double, double>& b) : first(std::get<0>(b)), second(std::get<1>(b)) {}  // NOLINT
    double first, second;
  };
  MINIDL_ARG(Betas, betas) = {0.9, 0.999};
  MINIDL_ARG(double, eps) = 1e-8;
  MINIDL_ARG(double, weight_decay) = 0;  // a ParamGroup's own weight_decay overrides it
  /// AMSGrad: the denominator uses the largest exp_avg_sq seen so far.
  MINIDL_ARG(bool, amsgrad) = false;
  /// Maximizes the objective (steps along the gradient), as torch's maximize=True.
  MINIDL_ARG(bool, maximize) = false;
};

/// Adam (weight decay added to the gradient), as in PyTorch. On CUDA each step is torch's fused and
/// capturable one: the parameters of a group are updated by a few launches in all, and the step
/// counts, the learning rate and GradScaler's found_inf are read on the device, so a step (a whole
/// cuda::GraphedStep included) can be captured in a CUDA graph and replayed as the schedule changes lr.
///   optim::Adam optimizer(model->parameters(), optim::AdamOptions(1e-3));
class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  Adam(std::vector<Tensor> params, AdamOptions options = {})
      : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
  void step() override;
  /// Skips the step where found_inf != 0: on CUDA in the kernels (no host sync), on the CPU by reading it.
  void step_if_finite(const Tensor& found_inf) override;
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled, const char* name);
  void group_added() override { state_.emplace_back(groups_.back().params.size()); }
  std::vector<StateField> state_fields() const override;
  std::vector<Tensor> param_state(size_t gi, size_t i) const override;
  void set_param_state(size_t gi, size_t i, std::vector<Tensor> values) override;

 private:
  struct State {
    Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;  // the last only with amsgrad
    int64_t step = 0;    // the count on the CPU
    Tensor device_step;  // the count on CUDA (0-d float32), where the kernels advance it
  };
  double weight_decay(size_t group) const { return groups_[group].weight_decay.value_or(options_.weight_decay()); }
  // The count of a parameter's steps, wherever it lives (a device read for CUDA: a sync).
  int64_t step_count(const State& s) const;

  AdamOptions options_;
  bool decoupled_;
  std::vector<std::vector<State>> state_;
};

/// libtorch's AdamWOptions: AdamOptions whose weight_decay defaults to 1e-2, AdamW's default.
struct AdamWOptions : AdamOptions {
  AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay(1e-2); }  // NOLINT: implicit, as in PyTorch
};

/// AdamW: weight decay applied to the weights directly (decoupled); PyTorch's default decay 1e-2.
/// AdamOptions given to it keep their own weight_decay (0 unless set).
///   optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(1e-3));
class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamOptions options = AdamWOptions())
      : Adam(std::move(groups), options, true, "AdamW") {}
  AdamW(std::vector<Tensor> params, AdamOptions options = AdamWOptions())
      : AdamW(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
};

}  // namespace minidl::optim
