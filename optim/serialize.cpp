#include "optim/serialize.h"

#include <string>

#include "core/safetensors.h"

namespace minidl {

namespace {
// The metadata key telling what a file of save() holds, checked by load() for a clear error when
// a file of another kind is given.
constexpr const char* kKindKey = "minidl.saved";

// The schedule's class, so that a StepLR's file is not taken for a CosineAnnealingLR's.
constexpr const char* kScheduleKey = "minidl.schedule";

std::string a_kind(const std::string& kind) {
  if (kind == "tensor") return "a tensor";
  if (kind == "tensors") return "a tensor list";
  if (kind == "schedule") return "a learning-rate schedule";
  return "an " + kind;
}

safetensors::Contents load_kind(const std::string& path, const std::string& kind) {
  safetensors::Contents contents = safetensors::load(path);
  auto it = contents.metadata.find(kKindKey);
  MINIDL_CHECK(it != contents.metadata.end() && it->second == kind, "load: ", path, " holds ",
               it == contents.metadata.end() ? std::string("no minidl save() of a ") + kind : "a saved " + it->second,
               ", but ", a_kind(kind), " was to be loaded");
  return contents;
}

void save_schedule(const std::string& name, const std::map<std::string, Tensor>& state, const std::string& path) {
  safetensors::Tensors tensors(state.begin(), state.end());
  safetensors::save(path, tensors, {{kKindKey, "schedule"}, {kScheduleKey, name}});
}

std::map<std::string, Tensor> load_schedule(const std::string& name, const std::string& path) {
  safetensors::Contents contents = load_kind(path, "schedule");
  auto it = contents.metadata.find(kScheduleKey);
  const std::string saved = it == contents.metadata.end() ? "an unnamed schedule" : it->second;
  MINIDL_CHECK(saved == name, "load: ", path, " holds the state of ", saved, ", but a ", name, " was to be loaded");
  return {contents.tensors.begin(), contents.tensors.end()};
}
}  // namespace

void save(const optim::LRScheduler& scheduler, const std::string& path) {
  save_schedule(scheduler.name(), scheduler.state_dict(), path);
}

void load(optim::LRScheduler& scheduler, const std::string& path) {
  scheduler.load_state_dict(load_schedule(scheduler.name(), path));
}

void save(const optim::ReduceLROnPlateau& scheduler, const std::string& path) {
  save_schedule("ReduceLROnPlateau", scheduler.state_dict(), path);
}

void load(optim::ReduceLROnPlateau& scheduler, const std::string& path) {
  scheduler.load_state_dict(load_schedule("ReduceLROnPlateau", path));
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  safetensors::Tensors tensors;
  for (const auto& [name, t] : optimizer.state_dict()) tensors.emplace(name, t);
  safetensors::save(path, tensors, {{kKindKey, "optimizer"}});
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  safetensors::Contents contents = load_kind(path, "optimizer");
  optimizer.load_state_dict(std::map<std::string, Tensor>(contents.tensors.begin(), contents.tensors.end()));
}

void save(const Tensor& tensor, const std::string& path) {
  MINIDL_CHECK(tensor.defined(), "save: the tensor is undefined");
  safetensors::save(path, {{"tensor", tensor}}, {{kKindKey, "tensor"}});
}

void save(const std::vector<Tensor>& tensors, const std::string& path) {
  safetensors::Tensors named;
  for (size_t i = 0; i < tensors.size(); ++i) {
    MINIDL_CHECK(tensors[i].defined(), "save: tensor ", i, " of the list is undefined");
    named.emplace(std::to_string(i), tensors[i]);
  }
  safetensors::save(path, named, {{kKindKey, "tensors"}, {"minidl.count", std::to_string(tensors.size())}});
}

void load(Tensor& tensor, const std::string& path) { tensor = load_kind(path, "tensor").tensors.at("tensor"); }

void load(std::vector<Tensor>& tensors, const std::string& path) {
  safetensors::Contents contents = load_kind(path, "tensors");
  const size_t count = std::stoul(contents.metadata.at("minidl.count"));
  tensors.clear();
  for (size_t i = 0; i < count; ++i) {
    auto it = contents.tensors.find(std::to_string(i));
    MINIDL_CHECK(it != contents.tensors.end(), "load: ", path, " lacks tensor ", i, " of ", count);
    tensors.push_back(it->second);
  }
}

}  // namespace minidl
