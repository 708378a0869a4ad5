#pragma once
// A training checkpoint: the model, the optimizer and where the run stands, in one safetensors
// file, so a run stopped after any epoch resumes as if it had never stopped.
//
// Layout: the model's state_dict under "model.<name>", the optimizer's under "optimizer.<name>"
// (see Optimizer::state_dict), and the position in the metadata: "minidl.epoch", "minidl.step",
// "minidl.rng.seed", "minidl.rng.offset", "minidl.rng.engine".
#include <cstdint>
#include <string>

#include "core/random.h"
#include "core/safetensors.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace minidl::optim {

/// Where a training run stands: epochs completed, optimizer steps taken, and the default
/// generator's state (by default taken when the position is made), so that dropout and every other
/// draw continue the same stream after a resume.
///   optim::save_checkpoint("run.safetensors", *model, optimizer, {epoch, step});
struct TrainingPosition {
  int64_t epoch = 0;
  int64_t step = 0;
  Generator::State rng = default_generator().state();
};

/// Writes the checkpoint atomically: a failed or interrupted write leaves the previous file intact.
/// `metadata` adds the caller's own strings (keys starting with "minidl." are reserved).
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optimizer,
                     const TrainingPosition& position, const safetensors::Metadata& metadata = {});

/// Restores the model's tensors (onto its device), the optimizer's state and learning rates, and the
/// default generator; returns the saved position (resume at epoch + 1). Everything is checked first:
/// a corrupt file, or one of another model or optimizer, gives an error that names the file and the
/// first problem, and changes nothing.
///   optim::TrainingPosition at = optim::load_checkpoint("run.safetensors", *model, optimizer);
TrainingPosition load_checkpoint(const std::string& path, nn::Module& model, Optimizer& optimizer);

}  // namespace minidl::optim
