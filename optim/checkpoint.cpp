#include "optim/checkpoint.h"

#include <charconv>

#include "nn/serialize.h"

namespace minidl::optim {
namespace {

constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";

template <class Int>
Int parse_number(const safetensors::Metadata& metadata, const char* key, const std::string& path) {
  auto it = metadata.find(key);
  MINIDL_CHECK(it != metadata.end(), path, ": not a minidl checkpoint: its metadata has no \"", key, "\"");
  Int value{};
  const std::string& s = it->second;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  MINIDL_CHECK(error == std::errc() && end == s.data() + s.size(), path, ": metadata \"", key, "\" is \"", s,
               "\", expected an integer");
  return value;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optimizer,
                     const TrainingPosition& position, const safetensors::Metadata& metadata) {
  safetensors::Metadata all = metadata;
  for (auto& [key, value] : metadata) {
    MINIDL_CHECK(!starts_with(key, "minidl."), "save_checkpoint(", path, "): metadata key \"", key,
                 "\" starts with \"minidl.\", which is reserved for minidl's own keys");
  }
  all["minidl.format"] =
      std::string(nn::kFormatVersion);  // from a std::string: GCC 12 misreads the char* assign (-Wrestrict)
  all["minidl.content"] = std::string("checkpoint");
  all["minidl.epoch"] = std::to_string(position.epoch);
  all["minidl.step"] = std::to_string(position.step);
  all["minidl.rng.seed"] = std::to_string(position.rng.seed);
  all["minidl.rng.offset"] = std::to_string(position.rng.offset);
  all["minidl.rng.engine"] = position.rng.engine;

  safetensors::Tensors tensors;
  for (auto& [name, t] : model.state_dict()) tensors[kModelPrefix + name] = t;
  for (auto& [name, t] : optimizer.state_dict()) tensors[kOptimizerPrefix + name] = t;
  safetensors::save(path, tensors, all);
}

TrainingPosition load_checkpoint(const std::string& path, nn::Module& model, Optimizer& optimizer) {
  safetensors::Contents file = safetensors::load(path);
  nn::check_format_version(file.metadata, path);
  auto content = file.metadata.find("minidl.content");
  MINIDL_CHECK(content != file.metadata.end() && content->second == "checkpoint", path,
               ": not a minidl checkpoint (metadata \"minidl.content\" is \"",
               content == file.metadata.end() ? "" : content->second, "\", expected \"checkpoint\")",
               content != file.metadata.end() && content->second == "state_dict" ? "; load it with nn::load" : "");

  nn::StateDict model_state, optimizer_state;
  for (auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix)) {
      model_state[name.substr(std::string(kModelPrefix).size())] = t;
    } else if (starts_with(name, kOptimizerPrefix)) {
      optimizer_state[name.substr(std::string(kOptimizerPrefix).size())] = t;
    } else {
      MINIDL_FAIL(path, ": unexpected tensor \"", name, "\": a checkpoint holds only \"", kModelPrefix, "...\" and \"",
                  kOptimizerPrefix, "...\"");
    }
  }

  // Every check before any change: the model, the position, then the optimizer (whose load checks
  // all of its state before it changes any).
  nn::check_state_dict(model, model_state, path + " (model)");
  TrainingPosition position;
  position.epoch = parse_number<int64_t>(file.metadata, "minidl.epoch", path);
  position.step = parse_number<int64_t>(file.metadata, "minidl.step", path);
  MINIDL_CHECK(position.epoch >= 0 && position.step >= 0, path, ": epoch ", position.epoch, " and step ", position.step,
               " must be >= 0");
  position.rng.seed = parse_number<uint64_t>(file.metadata, "minidl.rng.seed", path);
  position.rng.offset = parse_number<uint64_t>(file.metadata, "minidl.rng.offset", path);
  auto engine = file.metadata.find("minidl.rng.engine");
  MINIDL_CHECK(engine != file.metadata.end(), path,
               ": not a minidl checkpoint: its metadata has no \"minidl.rng.engine\"");
  position.rng.engine = engine->second;
  try {
    Generator trial;
    trial.set_state(position.rng);
    optimizer.load_state_dict(optimizer_state);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());  // the inner message already says where it was raised
  }

  model.load_state_dict(model_state);
  default_generator().set_state(position.rng);
  return position;
}

}  // namespace minidl::optim
