#include "nn/sequential.h"

#include <string>

namespace minidl::nn {

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (auto& m : modules_) x = m->forward(x);
  return x;
}

std::shared_ptr<Module> SequentialImpl::operator[](size_t index) const {
  MINIDL_CHECK(index < modules_.size(), "Sequential: index ", index, " out of range for ", modules_.size(), " modules");
  return modules_[index];
}

}  // namespace minidl::nn
