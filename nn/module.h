#pragma once
// nn::Module: the base of every layer and model. It owns named parameters, buffers and child
// modules, in registration order, and moves them between devices together.
#include <concepts>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace minidl::nn {

/// name -> tensor, as saved and loaded by state_dict / load_state_dict.
using StateDict = std::map<std::string, Tensor>;

/// Base class for layers and models, as in PyTorch.
///   struct Net : nn::Module { Net() : fc(register_module("fc", nn::Linear(4, 2))) {} ... };
class Module {
 public:
  virtual ~Module() = default;

  /// The module's computation for one input. Layers override it; a model may define its own
  /// forward with any signature instead. Needed for use inside nn::Sequential.
  virtual Tensor forward(const Tensor& input);
  /// The type name, for printing and errors: the class's own name (without namespace or an
  /// "Impl" suffix) unless a layer overrides it.
  virtual std::string name() const;
  /// The layer's options, as printing a model shows them: "in_features=784, out_features=512, bias=true".
  virtual std::string extra_repr() const { return ""; }

  /// Adds a trainable tensor and returns a handle that shares it.   weight = register_parameter("weight", w);
  /// Registering a name again replaces that parameter, as assigning one does in PyTorch; this is how a
  /// layer's weight is tied to another's (the member must follow, since it is a handle of its own):
  ///   decoder->weight = decoder->register_parameter("weight", encoder->weight);
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  /// Adds a non-trainable tensor that moves with the module and is saved in state_dict; registering a
  /// name again replaces that buffer.
  Tensor& register_buffer(const std::string& name, Tensor tensor);
  /// Adds a child; its parameters appear as "name.param".
  template <class ModuleType>
  std::shared_ptr<ModuleType> register_module(const std::string& name, std::shared_ptr<ModuleType> module) {
    add_child(name, module);
    return module;
  }
  /// Holder overload: `register_module("fc1", fc1)` with `nn::Linear fc1`.
  template <class Holder, class = decltype(std::declval<Holder>().ptr())>
  Holder register_module(const std::string& name, Holder holder) {
    add_child(name, holder.ptr());
    return holder;
  }

  /// Every parameter once, in registration order: a tied weight (one tensor registered in two
  /// modules, or a module registered twice) is listed once, so an optimizer steps it once.
  ///   optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.01));
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Parameters by dotted name ("fc1.weight"). A tensor reached under several names keeps the first
  /// one met in registration order; remove_duplicate=false lists every name, as state_dict does.
  ///   for (auto& [name, p] : model->named_parameters()) std::cout << name << ' ' << p.shape() << '\n';
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true, bool remove_duplicate = true) const;
  /// Buffers (running statistics, ...) once each, as parameters() lists parameters.
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Buffers by dotted name ("bn1.running_mean"), deduplicated as named_parameters.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true, bool remove_duplicate = true) const;
  /// The direct children in registration order, one entry per registration (a child registered
  /// under two names appears under both, as PyTorch prints it).
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  /// Every descendant, depth first, by dotted name ("layers.0"); the module itself is not included.
  /// A module registered at two places is listed once, under its first name, as in PyTorch;
  /// remove_duplicate=false lists it (and what is under it) under every name.
  ///   for (auto& [name, m] : model->named_modules()) std::cout << name << ": " << m->name() << '\n';
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(bool remove_duplicate = true) const;
  /// Elements in all parameters (trainable or not), as sum(p.numel() for p in model.parameters()):
  /// a tied weight counts once.
  int64_t num_parameters() const;

  /// Training mode on (default) or off, recursively; layers like Dropout read it.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Moves every parameter and buffer in place: handles held elsewhere see the new device.
  void to(Device device);
  /// Converts floating parameters and buffers, e.g. to kFloat64 for gradient checks.
  void to(DType dtype);
  /// Drops every parameter's gradient (set to none, as PyTorch does by default), or zeroes it in place.
  void zero_grad(bool set_to_none = true);

  /// Detached handles to every parameter and buffer by dotted name. A tied weight appears under each
  /// of its names, as in PyTorch, so the keys are those of the untied model.
  StateDict state_dict() const;
  /// Copies values in. Every key must match a parameter or buffer of the same shape, and every
  /// parameter or buffer must be given; otherwise throws naming what is missing, unexpected or mismatched.
  /// Values are copied into the existing tensors, so tied weights stay tied.
  void load_state_dict(const StateDict& state);

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  template <class Fn>
  void for_each_tensor(Fn&& fn);
  template <class Own>
  std::vector<std::pair<std::string, Tensor>> named_tensors(bool recurse, bool remove_duplicate, Own own) const;

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// PyTorch's holder idiom: `nn::Linear` is a shared handle to `nn::LinearImpl`, so modules can be
/// members by value and still be registered and shared.   nn::Linear fc(784, 10); fc->forward(x); fc(x);
template <class Impl>
class ModuleHolder {
 public:
  using ImplType = Impl;
  template <class... Args>
    requires std::is_constructible_v<Impl, Args...>
  explicit ModuleHolder(Args&&... args) : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT: implicit like PyTorch's
  /// An empty holder, to be assigned later.   nn::Linear fc{nullptr};
  ModuleHolder(std::nullptr_t) {}  // NOLINT

  Impl* operator->() const { return impl_.get(); }
  Impl& operator*() const { return *impl_; }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  Impl* get() const { return impl_.get(); }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    return impl_->forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

/// Declares `Name` as the holder of `NameImpl`, in any namespace.
#define MINIDL_MODULE(Name)                                    \
  class Name : public ::minidl::nn::ModuleHolder<Name##Impl> { \
   public:                                                     \
    using ::minidl::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }

/// Prints the module tree with each layer's options, as PyTorch does:
///   Net(
///     (fc1): Linear(in_features=784, out_features=128, bias=true)
///   )
std::ostream& operator<<(std::ostream& os, const Module& module);

/// Prints the module a pointer holds, as `os << *model` does, not the pointer's address.
///   auto model = std::make_shared<Net>();  std::cout << model << '\n';
template <class M>
  requires std::derived_from<M, Module>
std::ostream& operator<<(std::ostream& os, const std::shared_ptr<M>& module) {
  MINIDL_CHECK(module != nullptr, "printing a module: the pointer is null (a model not made yet?)");
  return os << static_cast<const Module&>(*module);
}

/// Prints the module a holder holds.   nn::Linear fc(784, 10);  std::cout << fc;
template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& holder) {
  MINIDL_CHECK(holder.get() != nullptr, "printing a module: the holder is empty (made with nullptr)");
  return os << static_cast<const Module&>(*holder);
}

}  // namespace minidl::nn
