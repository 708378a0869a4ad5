#include "optim/optimizer.h"

#include "ops/creation.h"

namespace minidl::optim {

Optimizer::Optimizer(std::vector<ParamGroup> groups, double default_lr, const char* name) : groups_(std::move(groups)) {
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

void Optimizer::zero_grad(bool set_to_none) {
  for (ParamGroup& g : groups_) {
    for (Tensor& p : g.params) p.set_grad(set_to_none || !p.grad().defined() ? Tensor() : zeros_like(p));
  }
}

}  // namespace minidl::optim
