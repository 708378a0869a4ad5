#pragma once
// The model and optimizer whose files fuzz_nn_load and fuzz_checkpoint load, and bit-exact
// snapshots that show whether a failed load changed anything. make_corpus writes their seeds.
#include <map>
#include <memory>
#include <string>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace minidl::fuzz {

/// Parameters of two shapes, float32 buffers and an int64 buffer (BatchNorm's count).
inline nn::Sequential make_model() {
  manual_seed(0);
  return nn::Sequential(nn::Linear(3, 4), nn::ReLU(), nn::BatchNorm1d(4), nn::Linear(4, 2));
}

/// Two parameter groups, so that group indices and learning rates are in the file too.
inline std::unique_ptr<optim::Adam> make_optimizer(nn::Module& model) {
  auto params = model.parameters();
  std::vector<Tensor> first(params.begin(), params.begin() + 2), rest(params.begin() + 2, params.end());
  return std::make_unique<optim::Adam>(std::vector<optim::ParamGroup>{{first, 0.1}, {rest}},
                                       optim::AdamOptions(1e-2));
}

/// Name -> dtype, shape and bytes, copied (optimizer state_dicts share the live tensors).
inline std::map<std::string, std::string> snapshot(const std::map<std::string, Tensor>& state) {
  std::map<std::string, std::string> out;
  for (auto& [name, t] : state) {
    Tensor c = t.contiguous();
    out[name] = detail::concat(c.dtype(), c.shape()) +
                std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  return out;
}

}  // namespace minidl::fuzz
