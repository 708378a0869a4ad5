#include "optim/lr_scheduler_chain.h"

#include <algorithm>

namespace minidl::optim {

namespace {

using Schedules = std::vector<std::shared_ptr<LRScheduler>>;

Optimizer& first_optimizer(const char* name, const Schedules& schedulers) {
  MINIDL_CHECK(!schedulers.empty(), name, ": expected at least one schedule, got none");
  MINIDL_CHECK(schedulers[0], name, ": expected a schedule at index 0, got a null pointer");
  return schedulers[0]->optimizer();
}

void check_same_optimizer(const char* name, const Optimizer& optimizer, const Schedules& schedulers) {
  first_optimizer(name, schedulers);
  for (size_t i = 0; i < schedulers.size(); ++i) {
    MINIDL_CHECK(schedulers[i], name, ": expected a schedule at index ", i, ", got a null pointer");
    MINIDL_CHECK(&schedulers[i]->optimizer() == &optimizer, name,
                 ": expected every schedule to act on the same optimizer, but the one at index ", i,
                 " acts on another");
  }
}

}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, Schedules schedulers, std::vector<int64_t> milestones)
    : LRScheduler(optimizer, "SequentialLR"), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  check_same_optimizer(name_, optimizer, schedulers_);
  MINIDL_CHECK(milestones_.size() + 1 == schedulers_.size(), "SequentialLR: expected one milestone fewer than "
               "schedules, ", schedulers_.size() - 1, " for ", schedulers_.size(), " schedules, got ",
               milestones_.size());
  for (size_t i = 0; i < milestones_.size(); ++i)
    MINIDL_CHECK(milestones_[i] > (i == 0 ? 0 : milestones_[i - 1]),
                 "SequentialLR: expected milestones > 0 and increasing, got ", milestones_[i], " at index ", i);
  // Every schedule took its initial step when it was built, each from what the one before left; the
  // sequence starts from the initial rates with the first schedule's step alone.
  last_epoch_ = 0;
  auto& groups = optimizer.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr = base_lrs()[i];
  for (auto& s : schedulers_) s->undo_initial_step();
  schedulers_[0]->step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const auto turn = static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                        milestones_.begin());
  LRScheduler& current = *schedulers_[turn];
  if (turn > 0 && milestones_[turn - 1] == last_epoch_)
    current.restart();
  else
    current.step();
  last_lr_ = current.get_last_lr();
}

// A schedule inside a schedule undoes its parts, as PyTorch's recursive_undo does.
void SequentialLR::undo_initial_step() {
  for (auto& s : schedulers_) s->undo_initial_step();
}

ChainedScheduler::ChainedScheduler(Schedules schedulers)
    : LRScheduler(first_optimizer("ChainedScheduler", schedulers), "ChainedScheduler"),
      schedulers_(std::move(schedulers)) {
  check_same_optimizer(name_, optimizer(), schedulers_);
  last_epoch_ = 0;
}

void ChainedScheduler::step() {
  ++last_epoch_;
  for (auto& s : schedulers_) s->step();
  last_lr_ = current_lrs();
}

void ChainedScheduler::undo_initial_step() {
  for (auto& s : schedulers_) s->undo_initial_step();
}

}  // namespace minidl::optim
