#include "optim/sgd.h"

#include "core/autograd.h"
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
  for_each_gradient([&](size_t gi, size_t i, Tensor& p, const Tensor& grad) {
    Tensor* buf = nullptr;
    bool first = false;
    if (options_.momentum() != 0) {
      Tensor& b = momentum_[gi][i];
      // The buffer follows the parameter: a model moved after the optimizer was built starts afresh.
      if (!b.defined() || b.device() != p.device() || b.dtype() != p.dtype()) {
        b = Tensor::empty(p.shape(), p.dtype(), p.device());
        first = true;
      }
      buf = &b;
    }
    SgdConfig config{*groups_[gi].lr,     options_.momentum(), options_.dampening(), options_.weight_decay(),
                     options_.nesterov(), first,               lr_on_device(gi, p)};
    sgd_update_(p, grad.contiguous(), buf, config);
  });
}

}  // namespace minidl::optim
