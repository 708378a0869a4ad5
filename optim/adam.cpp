#include "optim/adam.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "ops/autocast_masters.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/optim.h"

namespace minidl::optim {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam(std::move(groups), options, false, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options, bool decoupled, const char* name)
    : Optimizer(std::move(groups), options.lr(), name, /*group_weight_decay=*/true),
      options_(options),
      decoupled_(decoupled) {
  auto [b1, b2] = options.betas();
  MINIDL_CHECK(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, name, ": betas must be in [0, 1), got (", b1, ", ", b2, ")");
  MINIDL_CHECK(options.eps() >= 0 && options.weight_decay() >= 0, name, ": eps and weight_decay must be >= 0");
  for (ParamGroup& g : groups_) state_.emplace_back(g.params.size());
}

void Adam::step() {
  NoGradGuard no_grad;
  // CUDA parameters that share a group, device and dtype are stepped together by adam_update_multi_.
  struct Batch {
    size_t group;
    Device device;
    DType dtype;
    AdamTensorLists lists;
  };
  std::vector<Batch> batches;
  int cpu_skip = -1;  // on the CPU, found_inf is read once, where a CPU parameter needs it
  std::vector<Tensor> cpu_updated;  // CPU parameters stepped one by one: their 16-bit copies after
  const bool amsgrad = options_.amsgrad();
  for_each_gradient([&](size_t gi, size_t i, Tensor& p, const Tensor& grad) {
    State& s = state_[gi][i];
    // The state follows the parameter: a model moved after the optimizer was built starts afresh.
    if (!s.exp_avg.defined() || s.exp_avg.device() != p.device() || s.exp_avg.dtype() != p.dtype()) {
      s = State{zeros_like(p), zeros_like(p), amsgrad ? zeros_like(p) : Tensor(), 0, Tensor()};
    }
    if (!p.device().is_cuda()) {
      if (found_inf_) {
        if (cpu_skip < 0) cpu_skip = found_inf_->to(kFloat32).to(Device::cpu()).item<float>() != 0;
        if (cpu_skip) return;
      }
      ++s.step;
      AdamConfig config{*groups_[gi].lr, options_.betas().first, options_.betas().second, options_.eps(),
                        weight_decay(gi), decoupled_, s.step, amsgrad, options_.maximize(),
                        amsgrad ? &s.max_exp_avg_sq : nullptr};
      adam_update_(p, grad.contiguous(), s.exp_avg, s.exp_avg_sq, config);
      cpu_updated.push_back(p);
      return;
    }
    if (!s.device_step.defined() || s.device_step.device() != p.device())
      s.device_step = full({}, static_cast<double>(s.step), kFloat32, p.device());
    auto it = std::find_if(batches.begin(), batches.end(), [&](const Batch& b) {
      return b.group == gi && b.device == p.device() && b.dtype == p.dtype();
    });
    if (it == batches.end()) it = batches.insert(batches.end(), Batch{gi, p.device(), p.dtype(), {}});
    AdamTensorLists& l = it->lists;
    l.params.push_back(p);
    l.grads.push_back(grad.contiguous());
    l.exp_avgs.push_back(s.exp_avg);
    l.exp_avg_sqs.push_back(s.exp_avg_sq);
    if (amsgrad) l.max_exp_avg_sqs.push_back(s.max_exp_avg_sq);
    l.steps.push_back(s.device_step);
  });
  for (Batch& b : batches) {
    AdamMultiConfig config{options_.betas().first, options_.betas().second, options_.eps(), weight_decay(b.group),
                           decoupled_, amsgrad, options_.maximize(), lr_on_device(b.group, b.lists.params[0])};
    Tensor found_inf_here;  // the flag on this batch's device
    if (found_inf_) {
      found_inf_here = found_inf_->device() == b.device ? *found_inf_ : found_inf_->to(b.device);
      config.found_inf = &found_inf_here;
    }
    // Autocast's 16-bit copies of these weights are written by the same update, as SGD's are.
    const std::vector<Tensor> copies = autocast::copies_to_write(b.lists.params);
    if (!copies.empty()) config.copies = &copies;
    adam_update_multi_(b.lists, config);
    if (!copies.empty()) autocast::copies_written(b.lists.params, copies);
  }
  // The CPU steps parameter by parameter; their copies follow, as SGD's CPU update writes them, rather
  // than in a pass of their own at the next region.
  std::vector<Tensor> copies = autocast::copies_to_write(cpu_updated);
  if (copies.empty()) return;
  for (size_t i = 0; i < copies.size(); ++i)
    if (copies[i].defined()) copy_(copies[i], cpu_updated[i]);  // rounded to the copy's dtype
  autocast::copies_written(cpu_updated, copies);
}

void Adam::step_if_finite(const Tensor& found_inf) { step_reading_found_inf(found_inf); }

int64_t Adam::step_count(const State& s) const {
  if (!s.device_step.defined()) return s.step;
  return std::llround(s.device_step.to(Device::cpu()).item<float>());
}

std::vector<Optimizer::StateField> Adam::state_fields() const {
  if (options_.amsgrad()) return {{"exp_avg", true}, {"exp_avg_sq", true}, {"max_exp_avg_sq", true}, {"step", false}};
  return {{"exp_avg", true}, {"exp_avg_sq", true}, {"step", false}};
}

std::vector<Tensor> Adam::param_state(size_t gi, size_t i) const {
  const State& s = state_[gi][i];
  if (!s.exp_avg.defined()) return {};
  Tensor step = Tensor::empty({}, kInt64);
  *step.data<int64_t>() = step_count(s);
  if (options_.amsgrad()) return {s.exp_avg, s.exp_avg_sq, s.max_exp_avg_sq, step};
  return {s.exp_avg, s.exp_avg_sq, step};
}

void Adam::set_param_state(size_t gi, size_t i, std::vector<Tensor> values) {
  State& s = state_[gi][i];
  if (values.empty()) {
    s = State{};
    return;
  }
  restore_into(s.exp_avg, std::move(values[0]));
  restore_into(s.exp_avg_sq, std::move(values[1]));
  if (options_.amsgrad()) restore_into(s.max_exp_avg_sq, std::move(values[2]));
  s.step = values.back().item<int64_t>();
  // In place on the device, so that a captured step goes on from the loaded count.
  if (s.device_step.defined()) fill_(s.device_step, static_cast<double>(s.step));
}

}  // namespace minidl::optim
