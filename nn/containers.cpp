#include "nn/containers.h"

#include <sstream>

namespace minidl::nn {

void ModuleListImpl::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleListImpl::operator[](size_t index) const {
  MINIDL_CHECK(index < modules_.size(), "ModuleList: index ", index, " out of range for ", modules_.size(), " modules");
  return modules_[index];
}

void ModuleListImpl::clone_modules_into(ModuleListImpl& copy, const std::optional<Device>& device) const {
  for (const auto& m : modules_) copy.push_back(m->clone(device));
  copy.train(is_training());
}

std::shared_ptr<Module> ModuleListImpl::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<ModuleListImpl>();
  clone_modules_into(*copy, device);
  return copy;
}

std::shared_ptr<Module> ModuleDictImpl::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<ModuleDictImpl>();
  for (const auto& [name, m] : named_children()) copy->insert(name, m->clone(device));
  copy->train(is_training());
  return copy;
}

void ModuleDictImpl::insert(const std::string& key, std::shared_ptr<Module> module) { add_child(key, std::move(module)); }

bool ModuleDictImpl::contains(const std::string& key) const {
  for (const auto& [name, m] : named_children())
    if (name == key) return true;
  return false;
}

std::vector<std::string> ModuleDictImpl::keys() const {
  std::vector<std::string> out;
  for (const auto& [name, m] : named_children()) out.push_back(name);
  return out;
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  for (const auto& [name, m] : named_children())
    if (name == key) return m;
  std::ostringstream known;
  for (const std::string& k : keys()) known << (known.tellp() > 0 ? ", " : "") << k;
  MINIDL_FAIL("ModuleDict: no module \"", key, "\"; it holds [", known.str(), "]");
}

}  // namespace minidl::nn
