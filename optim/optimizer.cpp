#include "optim/optimizer.h"

#include <map>
#include <tuple>

#include "ops/creation.h"

namespace minidl::optim {
namespace {

struct Position {
  size_t group, index;
};

std::string describe(const Position& at) { return detail::concat("parameter ", at.index, " of group ", at.group); }

// A tensor listed twice would be updated twice per step, with two sets of state (momentum, Adam's
// moments). PyTorch refuses it across groups and warns within one; both are errors here. Two leaf
// tensors over the same memory (a detach() of a weight registered as another weight) would be
// updated twice as well, each time by one of two gradients that were never added.
void check_each_tensor_once(const std::vector<ParamGroup>& groups, const char* name) {
  std::map<const TensorImpl*, Position> tensors;
  std::map<std::tuple<const Storage*, int64_t, Shape, Strides>, Position> memory;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (size_t i = 0; i < groups[gi].params.size(); ++i) {
      const Tensor& p = groups[gi].params[i];
      const Position here{gi, i};
      auto [same, fresh] = tensors.emplace(&p.impl(), here);
      if (!fresh) {
        const Position& first = same->second;
        MINIDL_FAIL(name, ": ", describe(here), " (", p.dtype(), " of shape ", p.shape(), ") is the same tensor as ",
                    describe(first), ": ",
                    first.group == gi ? "the optimizer contains a parameter group with duplicate parameters"
                                      : "some parameters appear in more than one parameter group",
                    ", and each step would update it twice; list each tensor once (model->parameters() lists a tied "
                    "weight once)");
      }
      if (p.numel() == 0) continue;
      const TensorImpl& impl = p.impl();
      auto [alias, unseen] = memory.emplace(std::tuple(impl.storage.get(), impl.offset, impl.shape, impl.strides), here);
      MINIDL_CHECK(unseen, name, ": ", describe(here), " and ", describe(alias->second), " (", p.dtype(), " of shape ",
                   p.shape(), ") are two tensors over the same memory, which each step would update twice, once by "
                   "each one's gradient; tie weights by registering one tensor in both modules, not a detached copy");
    }
  }
}

}  // namespace

namespace {
void check_group_weight_decay(const ParamGroup& g, bool supported, const char* name) {
  if (!g.weight_decay) return;
  MINIDL_CHECK(supported, name, ": a parameter group sets weight_decay, which ", name,
               " takes from its options only (Adam and AdamW take one per group)");
  MINIDL_CHECK(*g.weight_decay >= 0, name, ": expected a group weight_decay >= 0, got ", *g.weight_decay);
}
}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double default_lr, const char* name, bool group_weight_decay)
    : groups_(std::move(groups)), name_(name), default_lr_(default_lr), group_weight_decay_(group_weight_decay) {
  size_t count = 0;
  for (const ParamGroup& g : groups_) count += g.params.size();
  MINIDL_CHECK(count > 0, name, ": got an empty parameter list; pass model->parameters()");
  for (ParamGroup& g : groups_) {
    if (!g.lr) g.lr = default_lr;
    MINIDL_CHECK(*g.lr >= 0, name, ": expected a learning rate >= 0, got ", *g.lr);
    check_group_weight_decay(g, group_weight_decay, name);
    for (const Tensor& p : g.params) {
      MINIDL_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), name,
                   ": every parameter must be a leaf tensor that requires grad");
    }
  }
  check_each_tensor_once(groups_, name);
}

void Optimizer::add_param_group(ParamGroup group) {
  MINIDL_CHECK(!group.params.empty(), name_, ": add_param_group got an empty parameter list");
  if (!group.lr) group.lr = default_lr_;
  MINIDL_CHECK(*group.lr >= 0, name_, ": expected a learning rate >= 0, got ", *group.lr);
  check_group_weight_decay(group, group_weight_decay_, name_);
  for (const Tensor& p : group.params) {
    MINIDL_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), name_,
                 ": every parameter must be a leaf tensor that requires grad");
  }
  std::vector<ParamGroup> all = groups_;
  all.push_back(group);
  check_each_tensor_once(all, name_);  // before anything changes
  groups_.push_back(std::move(group));
  group_added();
}

const Tensor* Optimizer::lr_on_device(size_t gi, const Tensor& like) {
  if (!like.device().is_cuda()) return nullptr;
  device_lr_.resize(groups_.size());
  DeviceLr& d = device_lr_[gi];
  const double lr = *groups_[gi].lr;
  if (!d.serves(like)) {
    d.value = full({}, lr, like.dtype(), like.device());
    d.written = lr;
  } else if (d.written != lr) {
    fill_(d.value, lr);
    d.written = lr;
  }
  return &d.value;
}

std::vector<Optimizer::DeviceRate> Optimizer::device_rates() {
  std::vector<DeviceRate> rates;
  device_lr_.resize(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (groups_[gi].params.empty()) continue;
    const Tensor& like = groups_[gi].params[0];
    if (!like.device().is_cuda()) continue;
    // Made by lr_on_device as a step would make it; not refreshed here, where the caller writes it.
    if (!device_lr_[gi].serves(like)) lr_on_device(gi, like);
    rates.push_back({&device_lr_[gi].value, *groups_[gi].lr});
  }
  return rates;
}

void Optimizer::device_rates_written() {
  for (size_t gi = 0; gi < device_lr_.size(); ++gi)
    if (device_lr_[gi].value.defined()) device_lr_[gi].written = *groups_[gi].lr;
}

void Optimizer::sync_device_state() {
  // Every changed rate in one launch: a schedule changes them all at every step, and each launch
  // between two replays leaves the GPU idle for its few microseconds.
  std::vector<Tensor*> changed;
  std::vector<double> rates;
  for (size_t gi = 0; gi < device_lr_.size(); ++gi) {
    DeviceLr& d = device_lr_[gi];
    if (d.value.defined() && d.written != *groups_[gi].lr) {
      if (!changed.empty() && d.value.device() != changed[0]->device()) {
        fill_scalars_(changed, rates);
        changed.clear();
        rates.clear();
      }
      changed.push_back(&d.value);
      rates.push_back(*groups_[gi].lr);
      d.written = *groups_[gi].lr;
    }
  }
  fill_scalars_(changed, rates);
}

// The fallback for optimizers whose kernels do not take the flag: a host sync, visible here.
void Optimizer::step_if_finite(const Tensor& found_inf) {
  MINIDL_CHECK(found_inf.defined() && found_inf.numel() == 1, name_,
               ": step_if_finite expected a one-element found_inf tensor");
  if (found_inf.to(kFloat32).item<float>() == 0) step();
}

void Optimizer::step_reading_found_inf(const Tensor& found_inf) {
  MINIDL_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == kFloat32, name_,
               ": step_if_finite expected a one-element float32 found_inf tensor");
  struct Reset {  // cleared however step() ends
    const Tensor*& slot;
    ~Reset() { slot = nullptr; }
  } reset{found_inf_};
  found_inf_ = &found_inf;
  step();
}

void Optimizer::zero_grad(bool set_to_none) {
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) {
      if (set_to_none || !p.grad().defined()) {
        p.set_grad(Tensor());
      } else {
        Tensor grad = p.grad();
        fill_(grad, 0);  // in place, as PyTorch: the buffer (and a graph that writes it) stays
      }
    }
  }
}

}  // namespace minidl::optim
