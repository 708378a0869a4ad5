#pragma once
// Schedules made of schedules, as PyTorch's: SequentialLR hands over from one schedule to the next at
// milestones; ChainedScheduler steps several at once, each scaling the rate the one before left.
#include <memory>
#include <vector>

#include "optim/lr_scheduler.h"

namespace minidl::optim {

/// Runs `schedulers[0]` until the epoch `milestones[0]`, then `schedulers[1]` from its own epoch 0
/// (its closed form there, from the initial lr), and so on. All must act on `optimizer`. Building it
/// resets the rates to the initial ones and undoes the initial step every schedule took when it was
/// built, then takes the first schedule's again, as PyTorch does.
///   auto warmup = std::make_shared<optim::LinearLR>(optimizer, 0.1, 1.0, 5);
///   auto cosine = std::make_shared<optim::CosineAnnealingLR>(optimizer, epochs - 5);
///   optim::SequentialLR schedule(optimizer, {warmup, cosine}, /*milestones=*/{5});
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  /// Steps the schedule whose turn it is; at a milestone, restarts the next one at its epoch 0.
  void step() override;

 protected:
  void add_state(std::map<std::string, Tensor>& state) const override;
  void check_state(const std::map<std::string, Tensor>& state) const override;
  void set_state(const std::map<std::string, Tensor>& state) override;

 private:
  void undo_initial_step() override;

  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

/// Steps every schedule in order on each step(): each scales the rate the one before it left, so a
/// warm-up and a decay stepped together multiply. All must act on one optimizer.
///   optim::ChainedScheduler schedule({std::make_shared<optim::LinearLR>(optimizer, 0.5, 1.0, 2),
///                                     std::make_shared<optim::ExponentialLR>(optimizer, 0.9)});
class ChainedScheduler : public LRScheduler {
 public:
  explicit ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers);
  void step() override;

 protected:
  void add_state(std::map<std::string, Tensor>& state) const override;
  void check_state(const std::map<std::string, Tensor>& state) const override;
  void set_state(const std::map<std::string, Tensor>& state) override;

 private:
  void undo_initial_step() override;

  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
};

}  // namespace minidl::optim
