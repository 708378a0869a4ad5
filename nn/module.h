#pragma once
// nn::Module: the base of every layer and model. It owns named parameters, buffers and child
// modules, in registration order, and moves them between devices together.
#include <concepts>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "nn/ordered_dict.h"

namespace minidl::nn {

/// name -> tensor, as saved and loaded by state_dict / load_state_dict.
using StateDict = std::map<std::string, Tensor>;

/// Takes a hook off the module it was registered on (PyTorch's RemovableHandle); harmless when the
/// module is gone or the hook was removed already.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  explicit RemovableHandle(std::function<void()> remove) : remove_(std::move(remove)) {}
  void remove() {
    if (remove_) std::exchange(remove_, nullptr)();
  }

 private:
  std::function<void()> remove_;
};

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
  ///   model->named_parameters()["fc1.weight"]   (libtorch's OrderedDict: by name or position)
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true, bool remove_duplicate = true) const;
  /// Buffers (running statistics, ...) once each, as parameters() lists parameters.
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// Buffers by dotted name ("bn1.running_mean"), deduplicated as named_parameters.
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true, bool remove_duplicate = true) const;
  /// The direct children in registration order, one entry per registration (a child registered
  /// under two names appears under both, as PyTorch prints it).
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  /// Every descendant, depth first, by dotted name ("layers.0"); the module itself is not included.
  /// A module registered at two places is listed once, under its first name, as in PyTorch;
  /// remove_duplicate=false lists it (and what is under it) under every name.
  ///   for (auto& [name, m] : model->named_modules()) std::cout << name << ": " << m->name() << '\n';
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules(bool remove_duplicate = true) const;
  /// Elements in all parameters (trainable or not), as sum(p.numel() for p in model.parameters()):
  /// a tied weight counts once.
  int64_t num_parameters() const;

  /// Calls fn on this module, then on every descendant once, depth first, as libtorch's apply.
  ///   model->apply([](nn::Module& m) { if (auto* fc = m.as<nn::Linear>()) nn::init::zeros_(fc->bias); });
  void apply(const std::function<void(Module&)>& fn);
  /// The same with each module's dotted name ("" for this one, then "fc1", "block.conv", ...).
  void apply(const std::function<void(const std::string&, Module&)>& fn);
  /// This module as a `T` (a layer's holder type such as nn::Linear, or any Module class), or null.
  template <class T>
  auto* as() noexcept {
    if constexpr (requires { typename T::ImplType; }) {
      return dynamic_cast<typename T::ImplType*>(this);
    } else {
      return dynamic_cast<T*>(this);
    }
  }

  /// Runs before forward when the module is called through its holder (`fc(x)`) or by
  /// nn::Sequential, as PyTorch's forward pre-hooks run on `module(x)`, not on `module.forward(x)`.
  /// `hook(module, inputs)` may return nothing, a Tensor (the new first input) or a vector of
  /// inputs. Returns a handle whose remove() takes the hook off.
  ///   auto h = fc->register_forward_pre_hook([](nn::Module&, const std::vector<Tensor>& in) { std::cout << in[0].sizes(); });
  template <class Hook>
  RemovableHandle register_forward_pre_hook(Hook hook);
  /// Runs after forward, on the same calls as the pre-hooks: `hook(module, inputs, output)` may
  /// return nothing or a Tensor that replaces the output.
  ///   fc->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, const Tensor& out) { seen = out; });
  template <class Hook>
  RemovableHandle register_forward_hook(Hook hook);
  bool has_forward_hooks() const noexcept { return hooks_ && (!hooks_->pre.empty() || !hooks_->post.empty()); }
  /// forward(input) with the hooks around it: how nn::Sequential and holders call a module.
  Tensor call(const Tensor& input);
  /// The hooks around a forward of `inputs`: the pre-hooks may replace the inputs, `run` computes
  /// the output from them, the forward hooks may replace it.
  Tensor run_with_hooks(std::vector<Tensor> inputs, const std::function<Tensor(const std::vector<Tensor>&)>& run);

  /// A deep copy, as libtorch's clone(): new parameters and buffers with the same values and
  /// requires_grad (on `device` when given, else where they are), the same training mode; hooks are
  /// not copied. Every layer can be cloned; a model of your own derives from nn::Cloneable<Self> and
  /// makes its layers in reset(), as libtorch asks.   auto target = std::dynamic_pointer_cast<Net>(net->clone());
  virtual std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const;

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
  /// Forgets every registered parameter, buffer, child and hook: the first step of a clone, before
  /// reset() registers fresh ones.
  void clear_registrations();
  /// The last step of a clone: `copy` (the same names, fresh tensors) gets this module's values,
  /// requires_grad flags and training mode, on `device` when given, else on this module's device.
  void copy_state_into(Module& copy, const std::optional<Device>& device) const;

 private:
  template <class Fn>
  void for_each_tensor(Fn&& fn);
  template <class Own>
  OrderedDict<std::string, Tensor> named_tensors(bool recurse, bool remove_duplicate, Own own) const;

  struct Hooks {
    using Pre = std::function<std::optional<std::vector<Tensor>>(Module&, const std::vector<Tensor>&)>;
    using Post = std::function<std::optional<Tensor>(Module&, const std::vector<Tensor>&, const Tensor&)>;
    std::list<std::pair<uint64_t, Pre>> pre;
    std::list<std::pair<uint64_t, Post>> post;
    uint64_t next_id = 0;
  };
  Hooks& hooks();

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::shared_ptr<Hooks> hooks_;  // made by the first hook: most modules have none
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// The base of a module that clone() can copy, as libtorch's: the derived class makes its
/// parameters, buffers and layers in reset() (its constructor calls reset()), so a clone is a copy
/// of the object whose reset() makes fresh ones, then filled with this module's values.
///   struct Net : nn::Cloneable<Net> {
///     Net() { reset(); }
///     void reset() override { fc = register_module("fc", nn::Linear(4, 2)); }
///     nn::Linear fc{nullptr};
///   };
template <class Derived>
class Cloneable : public Module {
 public:
  /// Makes (again) every parameter, buffer and child of the module.
  virtual void reset() = 0;
  std::shared_ptr<Module> clone(const std::optional<Device>& device = std::nullopt) const override {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->clear_registrations();
    copy->reset();
    copy_state_into(*copy, device);
    return copy;
  }
};

/// clone() for a layer made from its `options`: `MINIDL_CLONE_FROM_OPTIONS(LinearImpl)` in its class.
#define MINIDL_CLONE_FROM_OPTIONS(Impl)                                                             \
  std::shared_ptr<::minidl::nn::Module> clone(const std::optional<::minidl::Device>& device = std::nullopt) \
      const override {                                                                               \
    auto copy = std::make_shared<Impl>(options);                                                     \
    copy_state_into(*copy, device);                                                                  \
    return copy;                                                                                     \
  }
/// clone() for a layer without tensors (ReLU, Softmax, ...): a copy of the object is deep.
#define MINIDL_CLONE_STATELESS(Impl)                                                                 \
  std::shared_ptr<::minidl::nn::Module> clone(const std::optional<::minidl::Device>& = std::nullopt) \
      const override {                                                                               \
    auto copy = std::make_shared<Impl>(*this);                                                       \
    copy->clear_registrations(); /* the hooks */                                                     \
    return copy;                                                                                     \
  }

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
  /// Indexing forwarded to the module, as libtorch's holders do:   seq[0], dict["head"]
  template <class Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (*impl_)[std::forward<Arg>(arg)];
  }
  /// forward(args...), with the module's forward hooks around it when it has any (forward of
  /// tensors only; see Module::register_forward_hook).
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    if constexpr (sizeof...(Args) > 0 && (std::is_convertible_v<Args, Tensor> && ...) &&
                  std::is_same_v<decltype(impl_->forward(std::forward<Args>(args)...)), Tensor>) {
      if (impl_->has_forward_hooks()) {
        return impl_->run_with_hooks({Tensor(args)...}, [this](const std::vector<Tensor>& in) {
          return forward_from(in, std::index_sequence_for<Args...>{});
        });
      }
    } else {
      MINIDL_CHECK(!impl_->has_forward_hooks(), impl_->name(),
                   ": forward hooks run only around a forward of tensors returning a tensor");
    }
    return impl_->forward(std::forward<Args>(args)...);
  }

 private:
  template <size_t... I>
  Tensor forward_from(const std::vector<Tensor>& inputs, std::index_sequence<I...>) const {
    MINIDL_CHECK(inputs.size() == sizeof...(I), impl_->name(), ": a forward pre-hook returned ", inputs.size(),
                 " inputs, forward takes ", sizeof...(I));
    return impl_->forward(inputs[I]...);
  }
  std::shared_ptr<Impl> impl_;
};

template <class Hook>
RemovableHandle Module::register_forward_pre_hook(Hook hook) {
  using Result = std::invoke_result_t<Hook&, Module&, const std::vector<Tensor>&>;
  Hooks& h = hooks();
  const uint64_t id = h.next_id++;
  h.pre.emplace_back(id, [hook = std::move(hook)](Module& m, const std::vector<Tensor>& in) mutable
                             -> std::optional<std::vector<Tensor>> {
    if constexpr (std::is_void_v<Result>) {
      hook(m, in);
      return std::nullopt;
    } else if constexpr (std::is_convertible_v<Result, Tensor>) {
      std::vector<Tensor> replaced = in;
      replaced.at(0) = hook(m, in);
      return replaced;
    } else {
      return std::vector<Tensor>(hook(m, in));
    }
  });
  return RemovableHandle([weak = std::weak_ptr<Hooks>(hooks_), id] {
    if (auto alive = weak.lock()) alive->pre.remove_if([id](const auto& entry) { return entry.first == id; });
  });
}

template <class Hook>
RemovableHandle Module::register_forward_hook(Hook hook) {
  using Result = std::invoke_result_t<Hook&, Module&, const std::vector<Tensor>&, const Tensor&>;
  Hooks& h = hooks();
  const uint64_t id = h.next_id++;
  h.post.emplace_back(id, [hook = std::move(hook)](Module& m, const std::vector<Tensor>& in, const Tensor& out) mutable
                              -> std::optional<Tensor> {
    if constexpr (std::is_void_v<Result>) {
      hook(m, in, out);
      return std::nullopt;
    } else {
      return Tensor(hook(m, in, out));
    }
  });
  return RemovableHandle([weak = std::weak_ptr<Hooks>(hooks_), id] {
    if (auto alive = weak.lock()) alive->post.remove_if([id](const auto& entry) { return entry.first == id; });
  });
}

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
