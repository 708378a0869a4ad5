#pragma once
// Containers that register modules without running them: a model's forward decides how.
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace minidl::nn {

template <class T>
concept is_module_holder = requires(const T& holder) { holder.ptr(); };

/// An indexable list of modules, children "0", "1", ...: their parameters belong to the owner.
/// nn::Sequential is one that also runs them in order.
///   nn::ModuleList blocks;  for (int i = 0; i < 4; ++i) blocks->push_back(nn::Linear(64, 64));
///   for (auto& block : *blocks) x = block->forward(x);
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() = default;
  template <class... Holders>
    requires(sizeof...(Holders) > 0 && (is_module_holder<std::decay_t<Holders>> && ...))
  explicit ModuleListImpl(Holders&&... modules) {
    (push_back(std::forward<Holders>(modules)), ...);
  }
  void push_back(std::shared_ptr<Module> module);
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  void push_back(const Holder& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }
  std::string name() const override { return "ModuleList"; }
  /// A list of clones of the modules.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](size_t index) const;
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 protected:
  /// The clones of the modules, in order, added to `copy`.
  void clone_modules_into(ModuleListImpl& copy, const std::optional<Device>& device) const;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
MINIDL_MODULE(ModuleList);

/// Modules by name, in insertion order.   heads->insert("digits", nn::Linear(128, 10)); (*heads)["digits"]
class ModuleDictImpl : public Module {
 public:
  void insert(const std::string& key, std::shared_ptr<Module> module);
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  void insert(const std::string& key, const Holder& holder) {
    insert(key, std::static_pointer_cast<Module>(holder.ptr()));
  }
  std::string name() const override { return "ModuleDict"; }
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;
  size_t size() const { return named_children().size(); }
  bool contains(const std::string& key) const;
  std::vector<std::string> keys() const;
  /// Throws naming the key and the keys there are when it is missing.
  std::shared_ptr<Module> operator[](const std::string& key) const;
};
MINIDL_MODULE(ModuleDict);

}  // namespace minidl::nn
