#include "nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <set>
#include <sstream>
#include <typeinfo>

#include "core/autograd.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace minidl::nn {

std::string Module::name() const {
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(*this).name(), nullptr, nullptr, &status);
  std::string full = status == 0 && demangled ? demangled : typeid(*this).name();
  std::free(demangled);
  if (auto colons = full.rfind("::"); colons != std::string::npos) full.erase(0, colons + 2);
  if (full.size() > 4 && full.ends_with("Impl")) full.resize(full.size() - 4);
  return full;
}

Tensor Module::forward(const Tensor&) {
  MINIDL_FAIL(name(), " has no forward(const Tensor&); override it to use this module inside nn::Sequential");
}

namespace {
// Registering an existing name replaces the entry in place, keeping its position (as assigning an
// attribute does in PyTorch): names and registration order stay those of the model.
Tensor& put(std::vector<std::pair<std::string, Tensor>>& entries, const std::string& name, Tensor tensor) {
  for (auto& [existing, t] : entries) {
    if (existing == name) return t = std::move(tensor);
  }
  entries.emplace_back(name, std::move(tensor));
  return entries.back().second;
}
}  // namespace

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_parameter: invalid name \"", name,
               "\" (must be non-empty and contain no '.')");
  if (requires_grad) tensor.requires_grad_();
  return put(parameters_, name, std::move(tensor));
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_buffer: invalid name \"", name, "\"");
  return put(buffers_, name, std::move(tensor));
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  MINIDL_CHECK(module != nullptr, "register_module: \"", name, "\" is null");
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_module: invalid name \"", name, "\"");
  for (auto& [existing, m] : children_) MINIDL_CHECK(existing != name, "register_module: \"", name, "\" already exists");
  children_.emplace_back(name, std::move(module));
}

namespace {
// Calls visit(prefix, module) for `m` and, with `recurse`, its descendants, depth first in
// registration order. With `seen`, a module met before (registered at two places) is skipped with
// everything under it, as PyTorch's named_modules does; without, every registration is walked.
template <class Visit>
void walk(const Module& m, const std::string& prefix, bool recurse, std::set<const Module*>* seen, Visit& visit) {
  if (seen && !seen->insert(&m).second) return;
  visit(prefix, m);
  if (!recurse) return;
  for (const auto& [name, child] : m.named_children()) walk(*child, prefix + name + ".", true, seen, visit);
}
}  // namespace

// One tensor reached under two names (a tied weight) keeps the first: an optimizer given
// parameters() must see each tensor once, or it steps it twice and keeps two sets of state.
template <class Own>
OrderedDict<std::string, Tensor> Module::named_tensors(bool recurse, bool remove_duplicate, Own own) const {
  OrderedDict<std::string, Tensor> out;
  std::set<const Module*> modules;
  std::set<const TensorImpl*> tensors;
  auto visit = [&](const std::string& prefix, const Module& m) {
    for (const auto& [name, t] : own(m)) {
      if (remove_duplicate && t.defined() && !tensors.insert(&t.impl()).second) continue;
      out.insert(prefix + name, t);
    }
  };
  walk(*this, "", recurse, remove_duplicate ? &modules : nullptr, visit);
  return out;
}

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse, bool remove_duplicate) const {
  return named_tensors(recurse, remove_duplicate, [](const Module& m) -> const auto& { return m.parameters_; });
}

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse, bool remove_duplicate) const {
  return named_tensors(recurse, remove_duplicate, [](const Module& m) -> const auto& { return m.buffers_; });
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

namespace {
void collect_modules(const Module& m, const std::string& prefix, std::set<const Module*>* seen,
                     std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  for (const auto& [name, child] : m.named_children()) {
    if (seen && !seen->insert(child.get()).second) continue;
    out.emplace_back(prefix + name, child);
    collect_modules(*child, prefix + name + ".", seen, out);
  }
}
}  // namespace

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules(bool remove_duplicate) const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> found;
  std::set<const Module*> seen{this};
  collect_modules(*this, "", remove_duplicate ? &seen : nullptr, found);
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  for (auto& [name, m] : found) out.insert(std::move(name), std::move(m));
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (auto& [name, m] : named_modules()) fn(*m);
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn) {
  fn("", *this);
  for (auto& [name, m] : named_modules()) fn(name, *m);
}

std::shared_ptr<Module> Module::clone(const std::optional<Device>&) const {
  MINIDL_FAIL(name(), " cannot be cloned: derive it from nn::Cloneable<", name(),
              "> and make its parameters and layers in reset(), as libtorch asks");
}

void Module::clear_registrations() {
  parameters_.clear();
  buffers_.clear();
  children_.clear();
  hooks_.reset();
}

void Module::copy_state_into(Module& copy, const std::optional<Device>& device) const {
  NoGradGuard no_grad;
  std::vector<Tensor> own = parameters();
  if (own.empty()) own = buffers();
  copy.to(device ? *device : own.empty() ? Device::cpu() : own.front().device());
  // Names first: a layer whose state differs from its options' (a weight replaced by hand) is an error, not a mix.
  copy.load_state_dict(state_dict());
  auto mine = named_parameters(true, false);
  for (auto& [name, p] : copy.named_parameters(true, false)) {
    if (const Tensor* original = mine.find(name)) p.requires_grad_(original->requires_grad());
  }
  copy.train(is_training());
}

Module::Hooks& Module::hooks() {
  if (!hooks_) hooks_ = std::make_shared<Hooks>();
  return *hooks_;
}

Tensor Module::call(const Tensor& input) {
  if (!has_forward_hooks()) return forward(input);
  return run_with_hooks({input}, [this](const std::vector<Tensor>& in) {
    MINIDL_CHECK(in.size() == 1, name(), ": a forward pre-hook returned ", in.size(), " inputs, forward takes 1");
    return forward(in[0]);
  });
}

Tensor Module::run_with_hooks(std::vector<Tensor> inputs, const std::function<Tensor(const std::vector<Tensor>&)>& run) {
  // Copies of the lists: a hook may remove itself (or another) while they run.
  const auto pre = hooks_->pre;
  for (const auto& [id, hook] : pre) {
    if (auto replaced = hook(*this, inputs)) inputs = std::move(*replaced);
  }
  Tensor output = run(inputs);
  const auto post = hooks_->post;
  for (const auto& [id, hook] : post) {
    if (auto replaced = hook(*this, inputs, output)) output = std::move(*replaced);
  }
  return output;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : children_) out.push_back(m);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

template <class Fn>
void Module::for_each_tensor(Fn&& fn) {
  for (auto& [name, t] : parameters_) fn(t);
  for (auto& [name, t] : buffers_) fn(t);
  for (auto& [name, child] : children_) child->for_each_tensor(fn);
}

namespace {
// Replaces the data behind `t` in place, like PyTorch's set_data: every handle to this parameter
// (layers keep their own, optimizers too) now sees `data`. Gradients are dropped.
void set_data(Tensor& t, const Tensor& data) {
  TensorImpl& impl = t.impl();
  const TensorImpl& src = data.impl();
  impl.storage = src.storage;
  impl.offset = src.offset;
  impl.shape = src.shape;
  impl.strides = src.strides;
  impl.dtype = src.dtype;
  impl.grad.reset();
}
}  // namespace

void Module::to(Device device) {
  NoGradGuard no_grad;
  for_each_tensor([&](Tensor& t) {
    if (t.defined() && t.device() != device) set_data(t, t.to(device));
  });
}

void Module::to(DType dtype) {
  MINIDL_CHECK(is_floating(dtype), "Module::to: parameters must be floating, got ", dtype);
  NoGradGuard no_grad;
  for_each_tensor([&](Tensor& t) {
    if (t.defined() && is_floating(t.dtype()) && t.dtype() != dtype) set_data(t, t.to(dtype));
  });
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    if (set_to_none || !p.grad().defined()) {
      p.set_grad(Tensor());
    } else {
      Tensor g = p.grad();
      fill_(g, 0);  // in place: a captured CUDA graph keeps writing the same buffer
    }
  }
}

// Every name, tied or not, as PyTorch's state_dict: a file then has the same keys whether or not a
// weight is tied, and loading copies into the one tensor under each of its names.
StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters(true, false)) out[name] = t.detach();
  for (auto& [name, t] : named_buffers(true, false)) out[name] = t.detach();
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  std::vector<std::pair<std::string, Tensor>> own = named_parameters(true, false);
  for (auto& entry : named_buffers(true, false)) own.push_back(entry);
  std::set<std::string> seen;
  std::ostringstream missing;
  for (auto& [name, t] : own) {
    auto it = state.find(name);
    if (it == state.end()) {
      missing << (missing.tellp() > 0 ? ", " : "") << name;
      continue;
    }
    seen.insert(name);
    MINIDL_CHECK(it->second.shape() == t.shape(), "load_state_dict: \"", name, "\" has shape ", it->second.shape(),
                 " in the state dict but ", t.shape(), " in the model");
  }
  std::ostringstream unexpected;
  for (auto& [name, t] : state)
    if (!seen.count(name)) unexpected << (unexpected.tellp() > 0 ? ", " : "") << name;
  MINIDL_CHECK(missing.tellp() == 0 && unexpected.tellp() == 0, "load_state_dict: missing keys [", missing.str(),
               "], unexpected keys [", unexpected.str(), "]");
  NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    Tensor target = t;
    copy_(target, state.at(name));
  }
}

namespace {
void print(std::ostream& os, const Module& m, const std::string& indent) {
  // A multi-line extra_repr (ParameterList's lines) is indented to the module's depth, as PyTorch's.
  std::string extra = m.extra_repr();
  for (size_t at = extra.find('\n'); at != std::string::npos; at = extra.find('\n', at + 1 + indent.size()))
    extra.insert(at + 1, indent);
  os << m.name() << '(' << extra;
  if (m.named_children().empty()) {
    os << ')';
    return;
  }
  os << '\n';
  for (const auto& [name, child] : m.named_children()) {
    os << indent << "  (" << name << "): ";
    print(os, *child, indent + "  ");
    os << '\n';
  }
  os << indent << ')';
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Module& module) {
  print(os, module, "");
  return os;
}

}  // namespace minidl::nn
