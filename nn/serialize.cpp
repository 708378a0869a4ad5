#include "nn/serialize.h"

#include <vector>

namespace minidl::nn {
namespace {

std::string describe(const Tensor& t) { return minidl::detail::concat(t.dtype(), " of shape ", t.shape()); }

}  // namespace

void check_format_version(const safetensors::Metadata& metadata, const std::string& source) {
  auto it = metadata.find("minidl.format");
  // A file without the key was written by another safetensors writer: its tensors are all there is.
  if (it == metadata.end()) return;
  MINIDL_CHECK(it->second == kFormatVersion, source, ": written in minidl file format \"", it->second,
               "\", but this build reads format \"", kFormatVersion, "\"");
}

void check_state_dict(const Module& module, const StateDict& state, const std::string& source) {
  const StateDict own = module.state_dict();
  // Registration order, so the first problem named is the first one a reader of the model meets;
  // every name of a tied weight, as state_dict() has them.
  std::vector<std::pair<std::string, Tensor>> ordered = module.named_parameters(true, false);
  for (auto& entry : module.named_buffers(true, false)) ordered.push_back(entry);
  for (auto& [name, t] : ordered) {
    auto it = state.find(name);
    MINIDL_CHECK(it != state.end(), source, ": missing \"", name, "\" (", describe(t), " in the model); it holds ",
                 state.size(), " tensors for the model's ", own.size(), " (a checkpoint of another model?)");
    MINIDL_CHECK(it->second.dtype() == t.dtype() && it->second.shape() == t.shape(), source, ": \"", name, "\" is ",
                 describe(it->second), " there but ", describe(t), " in the model");
  }
  for (auto& [name, t] : state) {
    MINIDL_CHECK(own.count(name), source, ": unexpected \"", name, "\" (", describe(t),
                 "): the model has no parameter or buffer of that name (a checkpoint of another model?)");
  }
}

void save(const Module& module, const std::string& path, const safetensors::Metadata& metadata) {
  safetensors::Metadata all = metadata;
  for (auto& [key, value] : metadata) {
    MINIDL_CHECK(key.rfind("minidl.", 0) != 0, "nn::save(", path, "): metadata key \"", key,
                 "\" starts with \"minidl.\", which is reserved for minidl's own keys");
  }
  all["minidl.format"] =
      std::string(kFormatVersion);  // from a std::string: GCC 12 misreads the char* assign (-Wrestrict)
  all["minidl.content"] = std::string("state_dict");
  safetensors::save(path, module.state_dict(), all);
}

safetensors::Metadata load(Module& module, const std::string& path) {
  safetensors::Contents file = safetensors::load(path);
  check_format_version(file.metadata, path);
  auto content = file.metadata.find("minidl.content");
  MINIDL_CHECK(content == file.metadata.end() || content->second == "state_dict", path, ": holds a minidl ",
               content->second, ", not a model's state_dict",
               content->second == "checkpoint" ? " (load it with optim::load_checkpoint)" : "");
  check_state_dict(module, file.tensors, path);
  module.load_state_dict(file.tensors);
  return std::move(file.metadata);
}

}  // namespace minidl::nn
