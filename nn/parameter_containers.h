#pragma once
// ParameterList and ParameterDict: containers that register tensors as the owner's parameters
// ("0", "1", ... or their keys), with libtorch's API. Each entry here is a handle that shares the
// registered tensor, as a layer's `weight` member is: to replace a parameter, insert it again.
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/ordered_dict.h"

namespace minidl::nn {

/// Parameters by position, named "0", "1", ...   nn::ParameterList scales(torch::ones({4}), torch::zeros({4}));
///   params->append(randn({8}).requires_grad_());  for (auto& item : *params) use(item.value());
/// A tensor keeps its own requires_grad, as libtorch's ParameterList keeps it.
class ParameterListImpl : public Module {
 public:
  using Item = OrderedDict<std::string, Tensor>::Item;
  ParameterListImpl() = default;
  template <class... Tensors>
    requires(sizeof...(Tensors) > 0 && (std::is_convertible_v<const Tensors&, const Tensor&> && ...))
  explicit ParameterListImpl(const Tensors&... params) {
    (append(params), ...);
  }
  /// Registers `param` as parameter std::to_string(size()).
  void append(const Tensor& param);
  /// Appends pair.value() (the key is not kept: a list names its entries by position).
  void append(const Item& pair) { append(pair.value()); }
  /// Appends every tensor (or item) of `container`: a std::vector<Tensor>, another list, ...
  template <class Container>
  void extend(const Container& container) {
    for (const auto& p : container) append(p);
  }
  /// The parameter at `index`; throws naming the index and the size when it is out of range.
  Tensor& at(size_t index);
  const Tensor& at(size_t index) const;
  Tensor& operator[](size_t index) { return at(index); }
  const Tensor& operator[](size_t index) const { return at(index); }
  size_t size() const noexcept { return items_.size(); }
  bool is_empty() const noexcept { return items_.is_empty(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  std::string name() const override { return "ParameterList"; }
  /// One line per parameter, as PyTorch prints them: "(0): Parameter containing: [float32 of size 3x4]".
  std::string extra_repr() const override;
  /// A list of copies of the parameters (on `device` when given), with their requires_grad.
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;

 private:
  OrderedDict<std::string, Tensor> items_;
};
MINIDL_MODULE(ParameterList);

/// Parameters by name, in insertion order.   nn::ParameterDict dict;  dict->insert("scale", ones({4}));  (*dict)["scale"]
/// A tensor keeps its own requires_grad, as libtorch's ParameterDict keeps it.
class ParameterDictImpl : public Module {
 public:
  using Item = OrderedDict<std::string, Tensor>::Item;
  ParameterDictImpl() = default;
  explicit ParameterDictImpl(const OrderedDict<std::string, Tensor>& params);
  /// Registers `param` under `key` (no '.'), replacing a parameter of that key; returns the entry.
  Tensor& insert(const std::string& key, const Tensor& param);
  /// Removes the parameter of `key` and returns it; throws naming the keys there are when it is missing.
  Tensor pop(const std::string& key);
  /// Removes every parameter.
  void clear();
  /// insert()s every item of `container` (an OrderedDict, another ParameterDict, a std::map, ...).
  template <class Container>
  void update(const Container& container) {
    for (const auto& [key, value] : container) insert(key, value);
  }
  bool contains(const std::string& key) const noexcept { return items_.contains(key); }
  size_t size() const noexcept { return items_.size(); }
  bool empty() const noexcept { return items_.is_empty(); }
  std::vector<std::string> keys() const { return items_.keys(); }
  std::vector<Tensor> values() const { return items_.values(); }
  /// (key, parameter) pairs in insertion order.
  const std::vector<Item>& items() const noexcept { return items_.items(); }
  /// The parameter of `key`; throws naming the keys there are when it is missing.
  Tensor& get(const std::string& key);
  const Tensor& get(const std::string& key) const;
  Tensor& operator[](const std::string& key) { return get(key); }
  const Tensor& operator[](const std::string& key) const { return get(key); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  std::string name() const override { return "ParameterDict"; }
  /// One line per parameter: "(key): Parameter containing: [float32 of size 3x4]".
  std::string extra_repr() const override;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override;

 private:
  OrderedDict<std::string, Tensor> items_;
};
MINIDL_MODULE(ParameterDict);

}  // namespace minidl::nn
