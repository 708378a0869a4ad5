#pragma once
#include "nn/containers.h"

namespace minidl::nn {

/// Runs its modules in order, each one's output the next one's input. Children are named "0", "1", ...
///   nn::Sequential net(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 10));
class SequentialImpl : public ModuleListImpl {
 public:
  using ModuleListImpl::ModuleListImpl;
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Sequential"; }
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
};
MINIDL_MODULE(Sequential);

}  // namespace minidl::nn
