#pragma once
// libtorch's save and load: one call for a module, an optimizer, a schedule or tensors, each to a safetensors
// file (written atomically; PyTorch reads it with safetensors.torch.load_file).
//   save(model, "model.safetensors");  save(optimizer, "optimizer.safetensors");  load(model, "model.safetensors");
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "nn/module.h"
#include "nn/serialize.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/reduce_lr_on_plateau.h"

namespace minidl {

/// A module's state_dict (nn::save).
inline void save(const nn::Module& module, const std::string& path) { nn::save(module, path); }
template <class M>
  requires std::derived_from<M, nn::Module>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  MINIDL_CHECK(module != nullptr, "save: the module pointer is null");
  nn::save(*module, path);
}
template <class Impl>
void save(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  MINIDL_CHECK(module.get() != nullptr, "save: the module holder is empty");
  nn::save(*module, path);
}
/// Into a module of the same names and shapes (nn::load).
inline void load(nn::Module& module, const std::string& path) { nn::load(module, path); }
template <class M>
  requires std::derived_from<M, nn::Module>
void load(const std::shared_ptr<M>& module, const std::string& path) {
  MINIDL_CHECK(module != nullptr, "load: the module pointer is null");
  nn::load(*module, path);
}
template <class Impl>
void load(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  MINIDL_CHECK(module.get() != nullptr, "load: the module holder is empty");
  nn::load(*module, path);
}

/// An optimizer's state_dict (its buffers and step counts), to resume it with load.
void save(const optim::Optimizer& optimizer, const std::string& path);
/// Restores save(optimizer)'s file into an optimizer of the same kind over parameters of the same shapes.
void load(optim::Optimizer& optimizer, const std::string& path);

/// A learning-rate schedule's state_dict (where it stands), to resume it with load. Build the
/// optimizer and the schedule first, then load both.
///   save(scheduler, "schedule.safetensors");  ...  load(scheduler, "schedule.safetensors");
void save(const optim::LRScheduler& scheduler, const std::string& path);
/// Restores save(scheduler)'s file into a schedule of the same class over as many parameter groups.
void load(optim::LRScheduler& scheduler, const std::string& path);
void save(const optim::ReduceLROnPlateau& scheduler, const std::string& path);
void load(optim::ReduceLROnPlateau& scheduler, const std::string& path);

/// One tensor (stored under the name "tensor"), or a list (under "0", "1", ...).
void save(const Tensor& tensor, const std::string& path);
void save(const std::vector<Tensor>& tensors, const std::string& path);
/// Reads save(tensor)'s file; the tensor is on the CPU.
void load(Tensor& tensor, const std::string& path);
void load(std::vector<Tensor>& tensors, const std::string& path);

/// Its arguments streamed into one string, as torch::str.   save(x, str("sample-", step, ".safetensors"))
template <class... Args>
std::string str(const Args&... args) {
  return detail::concat(args...);
}

}  // namespace minidl
