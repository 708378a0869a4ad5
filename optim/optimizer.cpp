#include "optim/optimizer.h"

#include "ops/creation.h"

namespace minidl::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, double default_lr, const char* name)
    : groups_(std::move(groups)), name_(name) {
  size_t count = 0;
  for (const ParamGroup& g : groups_) count += g.params.size();
  MINIDL_CHECK(count > 0, name, ": got an empty parameter list; pass model->parameters()");
  for (ParamGroup& g : groups_) {
    if (!g.lr) g.lr = default_lr;
    MINIDL_CHECK(*g.lr >= 0, name, ": expected a learning rate >= 0, got ", *g.lr);
    for (const Tensor& p : g.params) {
      MINIDL_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), name,
                   ": every parameter must be a leaf tensor that requires grad");
    }
  }
}

const Tensor* Optimizer::lr_on_device(size_t gi, const Tensor& like) {
  if (!like.device().is_cuda()) return nullptr;
  device_lr_.resize(groups_.size());
  DeviceLr& d = device_lr_[gi];
  const double lr = *groups_[gi].lr;
  if (!d.value.defined() || d.value.device() != like.device() || d.value.dtype() != like.dtype()) {
    d.value = full({}, lr, like.dtype(), like.device());
    d.written = lr;
  } else if (d.written != lr) {
    fill_(d.value, lr);
    d.written = lr;
  }
  return &d.value;
}

void Optimizer::sync_device_state() {
  for (size_t gi = 0; gi < device_lr_.size(); ++gi) {
    DeviceLr& d = device_lr_[gi];
    if (d.value.defined() && d.written != *groups_[gi].lr) {
      fill_(d.value, *groups_[gi].lr);
      d.written = *groups_[gi].lr;
    }
  }
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
