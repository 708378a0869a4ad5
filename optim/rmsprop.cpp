#include "optim/rmsprop.h"

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace minidl::optim {

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions options)
    : Optimizer(std::move(groups), options.lr(), "RMSprop"), options_(options) {
  MINIDL_CHECK(options.alpha() >= 0 && options.eps() >= 0 && options.momentum() >= 0 && options.weight_decay() >= 0,
               "RMSprop: alpha, eps, momentum and weight_decay must be >= 0, got ", options.alpha(), ", ",
               options.eps(), ", ", options.momentum(), ", ", options.weight_decay());
  for (ParamGroup& g : groups_) state_.emplace_back(g.params.size());
}

// Composed of tensor ops (a few passes over each parameter): RMSprop is rarely the step a model's
// speed depends on, and the ops run on every device and dtype.
void RMSprop::step() {
  NoGradGuard no_grad;
  const double alpha = options_.alpha();
  for_each_gradient([&](size_t gi, size_t i, Tensor& p, const Tensor& grad_in) {
    State& s = state_[gi][i];
    if (!s.square_avg.defined() || s.square_avg.device() != p.device() || s.square_avg.dtype() != p.dtype()) {
      s = State{zeros_like(p), options_.momentum() > 0 ? zeros_like(p) : Tensor(),
                options_.centered() ? zeros_like(p) : Tensor()};
    }
    Tensor grad = options_.weight_decay() != 0 ? grad_in + p * options_.weight_decay() : grad_in;
    s.square_avg *= alpha;
    s.square_avg += grad * grad * (1 - alpha);
    Tensor avg;
    if (options_.centered()) {
      s.grad_avg *= alpha;
      s.grad_avg += grad * (1 - alpha);
      avg = sqrt(s.square_avg - s.grad_avg * s.grad_avg) + options_.eps();
    } else {
      avg = sqrt(s.square_avg) + options_.eps();
    }
    const double lr = *groups_[gi].lr;
    if (options_.momentum() > 0) {
      s.momentum_buffer *= options_.momentum();
      s.momentum_buffer += grad / avg;
      p -= s.momentum_buffer * lr;
    } else {
      p -= grad / avg * lr;
    }
  });
}

std::vector<Optimizer::StateField> RMSprop::state_fields() const {
  std::vector<StateField> fields{{"square_avg", true}};
  if (options_.momentum() > 0) fields.push_back({"momentum_buffer", true});
  if (options_.centered()) fields.push_back({"grad_avg", true});
  return fields;
}

std::vector<Tensor> RMSprop::param_state(size_t gi, size_t i) const {
  const State& s = state_[gi][i];
  if (!s.square_avg.defined()) return {};
  std::vector<Tensor> out{s.square_avg};
  if (options_.momentum() > 0) out.push_back(s.momentum_buffer);
  if (options_.centered()) out.push_back(s.grad_avg);
  return out;
}

void RMSprop::set_param_state(size_t gi, size_t i, std::vector<Tensor> values) {
  State& s = state_[gi][i];
  if (values.empty()) {
    s = State{};
    return;
  }
  size_t k = 0;
  restore_into(s.square_avg, std::move(values[k++]));
  if (options_.momentum() > 0) restore_into(s.momentum_buffer, std::move(values[k++]));
  if (options_.centered()) restore_into(s.grad_avg, std::move(values[k++]));
}

}  // namespace minidl::optim
