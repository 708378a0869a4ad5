#pragma once
#include <memory>
#include <vector>

#include "nn/module.h"

namespace minidl::nn {

template <class T>
concept is_module_holder = requires(const T& holder) { holder.ptr(); };

/// Runs its modules in order, each one's output the next one's input. Children are named "0", "1", ...
///   nn::Sequential net(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 10));
class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  template <class... Holders>
    requires(sizeof...(Holders) > 0 && (is_module_holder<std::decay_t<Holders>> && ...))
  explicit SequentialImpl(Holders&&... modules) {
    (push_back(std::forward<Holders>(modules)), ...);
  }

  void push_back(std::shared_ptr<Module> module);
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  void push_back(const Holder& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Sequential"; }
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t index) const;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
MINIDL_MODULE(Sequential);

}  // namespace minidl::nn
