#include "nn/parameter_containers.h"

#include <sstream>

#include "core/autograd.h"

namespace minidl::nn {

namespace {

// "(key): Parameter containing: [float32 of size 3x4]" lines, each after a newline, as PyTorch's
// ParameterList and ParameterDict print (the device too, for one not on the CPU).
std::string parameter_lines(const OrderedDict<std::string, Tensor>& items) {
  std::ostringstream os;
  for (const auto& [key, p] : items) {
    os << "\n  (" << key << "): Parameter containing: [" << p.dtype() << " of size ";
    for (int64_t d = 0; d < p.dim(); ++d) os << (d ? "x" : "") << p.size(d);
    if (!p.device().is_cpu()) os << " (" << p.device() << ')';
    os << ']';
  }
  if (!items.is_empty()) os << '\n';
  return os.str();
}

std::string known_keys(const OrderedDict<std::string, Tensor>& items) {
  std::ostringstream os;
  for (const std::string& k : items.keys()) os << (os.tellp() > 0 ? ", " : "") << k;
  return os.str();
}

}  // namespace

void ParameterListImpl::append(const Tensor& param) {
  MINIDL_CHECK(param.defined(), "ParameterList: cannot append an undefined tensor");
  const std::string key = std::to_string(items_.size());
  items_.insert(key, register_parameter(key, param, param.requires_grad()));
}

Tensor& ParameterListImpl::at(size_t index) {
  MINIDL_CHECK(index < items_.size(), "ParameterList: index ", index, " out of range for ", items_.size(),
               " parameters");
  return items_[index].value();
}

const Tensor& ParameterListImpl::at(size_t index) const { return const_cast<ParameterListImpl&>(*this).at(index); }

std::string ParameterListImpl::extra_repr() const { return parameter_lines(items_); }

std::shared_ptr<Module> ParameterListImpl::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<ParameterListImpl>();
  NoGradGuard no_grad;
  for (const auto& [key, p] : items_) copy->append(p.detach().clone());
  copy_state_into(*copy, device);
  return copy;
}

ParameterDictImpl::ParameterDictImpl(const OrderedDict<std::string, Tensor>& params) { update(params); }

Tensor& ParameterDictImpl::insert(const std::string& key, const Tensor& param) {
  MINIDL_CHECK(param.defined(), "ParameterDict: cannot insert an undefined tensor under \"", key, "\"");
  MINIDL_CHECK(!key.empty() && key.find('.') == std::string::npos, "ParameterDict: invalid key \"", key,
               "\" (expected a non-empty key without '.')");
  const Tensor& registered = register_parameter(key, param, param.requires_grad());
  if (Tensor* existing = items_.find(key)) return *existing = registered;
  return items_.insert(key, registered);
}

Tensor ParameterDictImpl::pop(const std::string& key) {
  Tensor popped = get(key);
  // A module cannot unregister one parameter: register the others again, in their order.
  OrderedDict<std::string, Tensor> kept;
  for (const auto& [k, p] : items_)
    if (k != key) kept.insert(k, p);
  clear();
  update(kept);
  return popped;
}

void ParameterDictImpl::clear() {
  clear_registrations();
  items_ = {};
}

Tensor& ParameterDictImpl::get(const std::string& key) {
  Tensor* found = items_.find(key);
  MINIDL_CHECK(found != nullptr, "ParameterDict: no parameter \"", key, "\"; it holds [", known_keys(items_), "]");
  return *found;
}

const Tensor& ParameterDictImpl::get(const std::string& key) const { return const_cast<ParameterDictImpl&>(*this).get(key); }

std::string ParameterDictImpl::extra_repr() const { return parameter_lines(items_); }

std::shared_ptr<Module> ParameterDictImpl::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<ParameterDictImpl>();
  NoGradGuard no_grad;
  for (const auto& [key, p] : items_) copy->insert(key, p.detach().clone());
  copy_state_into(*copy, device);
  return copy;
}

}  // namespace minidl::nn
