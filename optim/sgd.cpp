#include "optim/sgd.h"

#include <algorithm>

#include "core/autograd.h"
#include "ops/autocast_masters.h"
#include "ops/creation.h"
#include "ops/optim.h"

namespace minidl::optim {

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer(std::move(groups), options.lr(), "SGD"), options_(options) {
  MINIDL_CHECK(options.momentum() >= 0 && options.weight_decay() >= 0, "SGD: expected momentum >= 0 and weight_decay >= 0, got ",
               options.momentum(), " and ", options.weight_decay());
  MINIDL_CHECK(!options.nesterov() || (options.momentum() > 0 && options.dampening() == 0),
               "SGD: Nesterov momentum requires momentum > 0 and dampening = 0");
  for (ParamGroup& g : groups_) momentum_.emplace_back(g.params.size());
}

void SGD::step() {
  NoGradGuard no_grad;
  // Parameters that share a group, device, dtype and first-step flag are updated together: one
  // kernel launch for all of them on CUDA.
  struct Batch {
    size_t group;
    Device device;
    DType dtype;
    bool first;
    std::vector<Tensor> params, grads, bufs;
  };
  std::vector<Batch> batches;
  for_each_gradient([&](size_t gi, size_t i, Tensor& p, const Tensor& grad) {
    bool first = false;
    if (options_.momentum() != 0) {
      Tensor& b = momentum_[gi][i];
      // The buffer follows the parameter: a model moved after the optimizer was built starts afresh.
      if (!b.defined() || b.device() != p.device() || b.dtype() != p.dtype()) {
        // Zeros where the step may be skipped on the device: a skipped first step leaves the buffer
        // as it was, and the next step, no longer first, starts from zero momentum (the same as a first
        // step without dampening).
        b = found_inf_ ? zeros(p.shape(), TensorOptions().dtype(p.dtype()).device(p.device()))
                       : Tensor::empty(p.shape(), p.dtype(), p.device());
        first = true;
      }
    }
    auto it = std::find_if(batches.begin(), batches.end(), [&](const Batch& b) {
      return b.group == gi && b.device == p.device() && b.dtype == p.dtype() && b.first == first;
    });
    if (it == batches.end()) it = batches.insert(batches.end(), Batch{gi, p.device(), p.dtype(), first, {}, {}, {}});
    it->params.push_back(p);
    it->grads.push_back(grad.contiguous());
    if (options_.momentum() != 0) it->bufs.push_back(momentum_[gi][i]);
  });
  for (Batch& b : batches) {
    SgdConfig config{*groups_[b.group].lr, options_.momentum(), options_.dampening(), options_.weight_decay(),
                     options_.nesterov(),  b.first,             lr_on_device(b.group, b.params[0])};
    Tensor found_inf_here;  // the flag on this batch's device
    if (found_inf_) {
      found_inf_here = found_inf_->device() == b.device ? *found_inf_ : found_inf_->to(b.device);
      config.found_inf = &found_inf_here;
    }
    // Autocast's 16-bit copies of these weights are written by the same update, not by a pass of
    // their own at the next forward (ops/autocast_masters.h).
    const std::vector<Tensor> copies = autocast::copies_to_write(b.params);
    if (!copies.empty()) config.copies = &copies;
    sgd_update_(b.params, b.grads, b.bufs, config);
    if (!copies.empty()) autocast::copies_written(b.params, copies);
  }
}

void SGD::step_if_finite(const Tensor& found_inf) { step_reading_found_inf(found_inf); }

// Only a momentum buffer, and only with momentum: plain SGD keeps nothing between steps.
std::vector<Optimizer::StateField> SGD::state_fields() const {
  if (options_.momentum() == 0) return {};
  return {{"momentum_buffer", true}};
}

std::vector<Tensor> SGD::param_state(size_t gi, size_t i) const {
  if (options_.momentum() == 0 || !momentum_[gi][i].defined()) return {};
  return {momentum_[gi][i]};
}

void SGD::set_param_state(size_t gi, size_t i, std::vector<Tensor> values) {
  if (options_.momentum() != 0) restore_into(momentum_[gi][i], values.empty() ? Tensor() : std::move(values[0]));
}

}  // namespace minidl::optim
