#include "optim/adagrad.h"

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace minidl::optim {

Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions options)
    : Optimizer(std::move(groups), options.lr(), "Adagrad"), options_(options) {
  MINIDL_CHECK(options.lr_decay() >= 0 && options.weight_decay() >= 0 && options.initial_accumulator_value() >= 0 &&
                   options.eps() >= 0,
               "Adagrad: lr_decay, weight_decay, initial_accumulator_value and eps must be >= 0");
  for (ParamGroup& g : groups_) state_.emplace_back(g.params.size());
}

// Composed of tensor ops, as RMSprop (optim/rmsprop.cpp says why).
void Adagrad::step() {
  NoGradGuard no_grad;
  for_each_gradient([&](size_t gi, size_t i, Tensor& p, const Tensor& grad_in) {
    State& s = state_[gi][i];
    if (!s.sum.defined() || s.sum.device() != p.device() || s.sum.dtype() != p.dtype()) {
      s = State{full_like(p, options_.initial_accumulator_value()), 0};
    }
    ++s.step;
    Tensor grad = options_.weight_decay() != 0 ? grad_in + p * options_.weight_decay() : grad_in;
    const double clr = *groups_[gi].lr / (1 + static_cast<double>(s.step - 1) * options_.lr_decay());
    s.sum += grad * grad;
    p -= grad / (sqrt(s.sum) + options_.eps()) * clr;
  });
}

std::vector<Optimizer::StateField> Adagrad::state_fields() const { return {{"sum", true}, {"step", false}}; }

std::vector<Tensor> Adagrad::param_state(size_t gi, size_t i) const {
  const State& s = state_[gi][i];
  if (!s.sum.defined()) return {};
  return {s.sum, full({}, static_cast<double>(s.step), kInt64)};
}

void Adagrad::set_param_state(size_t gi, size_t i, std::vector<Tensor> values) {
  State& s = state_[gi][i];
  if (values.empty()) {
    s = State{};
    return;
  }
  restore_into(s.sum, std::move(values[0]));
  s.step = values[1].item<int64_t>();
}

}  // namespace minidl::optim
