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

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_parameter: invalid name \"", name,
               "\" (must be non-empty and contain no '.')");
  for (auto& [existing, t] : parameters_) MINIDL_CHECK(existing != name, "register_parameter: \"", name, "\" already exists");
  if (requires_grad) tensor.requires_grad_();
  parameters_.emplace_back(name, std::move(tensor));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_buffer: invalid name \"", name, "\"");
  buffers_.emplace_back(name, std::move(tensor));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  MINIDL_CHECK(module != nullptr, "register_module: \"", name, "\" is null");
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_module: invalid name \"", name, "\"");
  for (auto& [existing, m] : children_) MINIDL_CHECK(existing != name, "register_module: \"", name, "\" already exists");
  children_.emplace_back(name, std::move(module));
}

namespace {
template <class Get>
void collect(const Module& m, const std::string& prefix, bool recurse, Get get,
             std::vector<std::pair<std::string, Tensor>>& out) {
  for (const auto& [name, t] : get(m)) out.emplace_back(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : m.named_children()) collect(*child, prefix + name + ".", true, get, out);
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(*this, "", recurse, [](const Module& m) -> const auto& { return m.parameters_; }, out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect(*this, "", recurse, [](const Module& m) -> const auto& { return m.buffers_; }, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

namespace {
void collect_modules(const Module& m, const std::string& prefix,
                     std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  for (const auto& [name, child] : m.named_children()) {
    out.emplace_back(prefix + name, child);
    collect_modules(*child, prefix + name + ".", out);
  }
}
}  // namespace

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  collect_modules(*this, "", out);
  return out;
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

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out[name] = t.detach();
  for (auto& [name, t] : named_buffers()) out[name] = t.detach();
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  std::vector<std::pair<std::string, Tensor>> own = named_parameters();
  for (auto& entry : named_buffers()) own.push_back(entry);
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
  os << m.name() << '(' << m.extra_repr();
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
