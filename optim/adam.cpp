#include "optim/adam.h"

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/optim.h"

namespace minidl::optim {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam(std::move(groups), options, false, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled, const char* name)
    : Optimizer(std::move(groups), options.lr(), name), options_(options), decoupled_(decoupled) {
  auto [b1, b2] = options.betas();
  MINIDL_CHECK(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, name, ": betas must be in [0, 1), got (", b1, ", ", b2, ")");
  MINIDL_CHECK(options.eps() >= 0 && options.weight_decay() >= 0, name, ": eps and weight_decay must be >= 0");
  for (ParamGroup& g : groups_) state_.emplace_back(g.params.size());
}

void Adam::step() {
  NoGradGuard no_grad;
  for_each_gradient([&](size_t gi, size_t i, Tensor& p, const Tensor& grad) {
    State& s = state_[gi][i];
    if (!s.exp_avg.defined() || s.exp_avg.device() != p.device() || s.exp_avg.dtype() != p.dtype()) {
      s = State{zeros_like(p), zeros_like(p), 0};
    }
    ++s.step;
    AdamConfig config{*groups_[gi].lr, options_.betas().first, options_.betas().second, options_.eps(),
                      options_.weight_decay(), decoupled_, s.step};
    adam_update_(p, grad.contiguous(), s.exp_avg, s.exp_avg_sq, config);
  });
}

std::vector<Optimizer::StateField> Adam::state_fields() const {
  return {{"exp_avg", true}, {"exp_avg_sq", true}, {"step", false}};
}

std::vector<Tensor> Adam::param_state(size_t gi, size_t i) const {
  const State& s = state_[gi][i];
  if (!s.exp_avg.defined()) return {};
  Tensor step = Tensor::empty({}, kInt64);
  *step.data<int64_t>() = s.step;
  return {s.exp_avg, s.exp_avg_sq, step};
}

void Adam::set_param_state(size_t gi, size_t i, std::vector<Tensor> values) {
  if (values.empty()) {
    state_[gi][i] = State{};
    return;
  }
  State& s = state_[gi][i];
  restore_into(s.exp_avg, std::move(values[0]));
  restore_into(s.exp_avg_sq, std::move(values[1]));
  s.step = values[2].item<int64_t>();
}

}  // namespace minidl::optim
