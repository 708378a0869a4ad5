#include "optim/adadelta.h"

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace minidl::optim {

Adadelta::Adadelta(std::vector<ParamGroup> groups, AdadeltaOptions options)
    : Optimizer(std::move(groups), options.lr(), "Adadelta"), options_(options) {
  MINIDL_CHECK(options.rho() >= 0 && options.rho() <= 1, "Adadelta: rho must be in [0, 1], got ", options.rho());
  MINIDL_CHECK(options.eps() >= 0 && options.weight_decay() >= 0, "Adadelta: eps and weight_decay must be >= 0");
  for (ParamGroup& g : groups_) state_.emplace_back(g.params.size());
}

// Composed of tensor ops, as RMSprop (optim/rmsprop.cpp says why).
void Adadelta::step() {
  NoGradGuard no_grad;
  const double rho = options_.rho(), eps = options_.eps();
  for_each_gradient([&](size_t gi, size_t i, Tensor& p, const Tensor& grad_in) {
    State& s = state_[gi][i];
    if (!s.square_avg.defined() || s.square_avg.device() != p.device() || s.square_avg.dtype() != p.dtype()) {
      s = State{zeros_like(p), zeros_like(p)};
    }
    Tensor grad = options_.weight_decay() != 0 ? grad_in + p * options_.weight_decay() : grad_in;
    s.square_avg *= rho;
    s.square_avg += grad * grad * (1 - rho);
    Tensor delta = sqrt(s.acc_delta + eps) / sqrt(s.square_avg + eps) * grad;
    s.acc_delta *= rho;
    s.acc_delta += delta * delta * (1 - rho);
    p -= delta * *groups_[gi].lr;
  });
}

std::vector<Optimizer::StateField> Adadelta::state_fields() const {
  return {{"square_avg", true}, {"acc_delta", true}};
}

std::vector<Tensor> Adadelta::param_state(size_t gi, size_t i) const {
  const State& s = state_[gi][i];
  if (!s.square_avg.defined()) return {};
  return {s.square_avg, s.acc_delta};
}

void Adadelta::set_param_state(size_t gi, size_t i, std::vector<Tensor> values) {
  State& s = state_[gi][i];
  if (values.empty()) {
    s = State{};
    return;
  }
  restore_into(s.square_avg, std::move(values[0]));
  restore_into(s.acc_delta, std::move(values[1]));
}

}  // namespace minidl::optim
