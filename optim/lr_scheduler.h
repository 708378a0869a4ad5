#pragma once
// Learning-rate schedules, as in PyTorch: step() once per epoch (OneCycleLR: once per batch). A step
// computes each group's new rate from the rate the group has now (PyTorch's chainable form), so
// schedules stepped together on one optimizer compose, and a rate set by hand is scaled from.
// SequentialLR and ChainedScheduler are in optim/lr_scheduler_chain.h; the schedules given as
// functions (LambdaLR, MultiplicativeLR) in optim/lr_scheduler_lambda.h; the cyclic ones
// (CyclicLR, CosineAnnealingWarmRestarts) in optim/lr_scheduler_cyclic.h; ReduceLROnPlateau, which
// reacts to a metric, in optim/reduce_lr_on_plateau.h.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace minidl::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch: every group's rate becomes the schedule's next one, computed from its rate now.
  ///   optimizer.step(); scheduler.step();
  virtual void step();
  /// The epoch the schedule stands at: 0 after the constructor, one more after each step().
  ///   if (scheduler.last_epoch() == warmup) ...
  int64_t last_epoch() const { return last_epoch_; }
  /// The rates the last step() (or the constructor) wrote, one per group; not one set by hand since.
  ///   double lr = scheduler.get_last_lr()[0];
  std::vector<double> get_last_lr() const { return last_lr_; }
  /// Each group's initial_lr (ParamGroup::initial_lr): its rate when the first schedule of the
  /// optimizer was built (OneCycleLR's max_lr / div_factor after one), shared by all, as in PyTorch.
  ///   double peak = scheduler.base_lrs()[0];
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// The optimizer whose rates the schedule writes.
  ///   scheduler.optimizer().param_groups()[0].lr = 0.01;
  Optimizer& optimizer() const { return optimizer_; }
  /// PyTorch's class name ("StepLR"), for messages and saved files.
  const char* name() const { return name_; }

  /// Where the schedule stands, as named tensors (PyTorch's scheduler.state_dict()): "last_epoch"
  /// (int64 scalar), "base_lrs" and "last_lr" (float64, one per group), a schedule's own counters
  /// (CosineAnnealingWarmRestarts' "T_cur", "T_i"), and the parts of a schedule made of schedules
  /// under "schedulers.K.". Functions (LambdaLR's) are not saved: the schedule built to load into
  /// brings its own. The rates themselves are the optimizer's to save.
  ///   save(scheduler, "schedule.safetensors");  // optim/serialize.h
  std::map<std::string, Tensor> state_dict() const;
  /// Restores state_dict() of a schedule of the same kind over as many groups. Build the optimizer
  /// and the schedule, then load both (the constructor's first step changes the rates; loading the
  /// optimizer after it sets them back). Everything is checked first: on an error nothing changes,
  /// and the message names the first missing, unexpected or mismatched entry.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  /// Takes each group's initial_lr (`initial_lr` replaces it, as OneCycleLR's does) and leaves the
  /// rates alone. A schedule's constructor ends with LRScheduler::step(), PyTorch's initial step to
  /// epoch 0, once its own fields are set.
  LRScheduler(Optimizer& optimizer, const char* name, std::optional<double> initial_lr = std::nullopt);
  /// A group's rate after a step to last_epoch() (already advanced), from its rate `lr` now.
  virtual double get_lr(double lr, double base_lr) const;
  /// The rate at last_epoch() from `base_lr` alone; SequentialLR restarts a schedule with it.
  virtual double closed_form_lr(double lr, double base_lr) const { return get_lr(lr, base_lr); }
  /// Starts over at epoch 0 from the closed form: what SequentialLR does at a milestone.
  virtual void restart();
  /// Writes one rate per group and remembers them for get_last_lr().
  void set_lrs(const std::vector<double>& lrs);
  std::vector<double> current_lrs() const;
  void check_groups() const;
  /// For a schedule that moves to a given epoch (CosineAnnealingWarmRestarts::step(epoch)).
  void set_last_epoch(int64_t epoch) { last_epoch_ = epoch; }
  /// A schedule's own entries of state_dict(), beside the base class's.
  virtual void add_state(std::map<std::string, Tensor>& /*state*/) const {}
  /// Checks the values of a state whose keys, dtypes and shapes are this schedule's own; throws
  /// before anything changes. An override calls LRScheduler::check_state first.
  virtual void check_state(const std::map<std::string, Tensor>& state) const;
  /// Takes back what check_state() passed. An override calls LRScheduler::set_state first.
  virtual void set_state(const std::map<std::string, Tensor>& state);

 private:
  friend class SequentialLR;
  friend class ChainedScheduler;
  /// Undoes the epoch the constructor's initial step counted (PyTorch's SequentialLR.recursive_undo).
  virtual void undo_initial_step() { --last_epoch_; }

  const char* name_;  // for error messages
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  std::vector<double> last_lr_;
};

/// lr * gamma at every step_size-th epoch.   optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.7);
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double get_lr(double lr, double base_lr) const override;
  double closed_form_lr(double lr, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// From the initial lr down to eta_min along half a cosine over T_max epochs, in PyTorch's recursive
/// form: eta_min + (lr - eta_min) * (1 + cos(pi * epoch / T_max)) / (1 + cos(pi * (epoch - 1) / T_max)).
///   optim::CosineAnnealingLR s(optimizer, 10);
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double get_lr(double lr, double base_lr) const override;
  double closed_form_lr(double lr, double base_lr) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// lr * gamma at each milestone (gamma^k at a milestone listed k times).
///   optim::MultiStepLR s(optimizer, {30, 80}, 0.1);
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double get_lr(double lr, double base_lr) const override;
  double closed_form_lr(double lr, double base_lr) const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

/// lr * gamma every epoch.   optim::ExponentialLR s(optimizer, 0.9);
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double get_lr(double lr, double base_lr) const override;
  double closed_form_lr(double lr, double base_lr) const override;

 private:
  double gamma_;
};

/// A linear warm-up (or decay): the factor goes from start_factor to end_factor over total_iters
/// steps, then stays. The constructor multiplies lr by start_factor; each step by the ratio of this
/// epoch's factor to the last one's.
///   optim::LinearLR warmup(optimizer, /*start_factor=*/0.1, /*end_factor=*/1.0, /*total_iters=*/5);
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    int64_t total_iters = 5);

 protected:
  double get_lr(double lr, double base_lr) const override;
  double closed_form_lr(double lr, double base_lr) const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// lr * factor until the epoch total_iters, then lr: a constant warm-up. factor in (0, 1].
///   optim::ConstantLR warmup(optimizer, /*factor=*/0.5, /*total_iters=*/4);
class ConstantLR : public LRScheduler {
 public:
  explicit ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, int64_t total_iters = 5);

 protected:
  double get_lr(double lr, double base_lr) const override;
  double closed_form_lr(double lr, double base_lr) const override;

 private:
  double factor_;
  int64_t total_iters_;
};

/// Polynomial decay to zero over total_iters epochs: base_lr * (1 - epoch / total_iters)^power,
/// then 0. power 1 is a linear decay.   optim::PolynomialLR decay(optimizer, /*total_iters=*/100, 2.0);
class PolynomialLR : public LRScheduler {
 public:
  explicit PolynomialLR(Optimizer& optimizer, int64_t total_iters = 5, double power = 1.0);

 protected:
  double get_lr(double lr, double base_lr) const override;
  double closed_form_lr(double lr, double base_lr) const override;

 private:
  int64_t total_iters_;
  double power_;
};

/// The one-cycle policy, stepped once per batch: from max_lr / div_factor up to max_lr over the
/// first pct_start of total_steps, then down to max_lr / (div_factor * final_div_factor), both
/// halves by cosine annealing. Only the learning rate cycles (PyTorch's cycle_momentum=False). Each
/// rate is computed afresh (not chainable, as in PyTorch), so it overrides what came before.
///   optim::OneCycleLR s(optimizer, /*max_lr=*/0.1, /*total_steps=*/epochs * batches);
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25, double final_div_factor = 1e4);

 protected:
  double get_lr(double lr, double base_lr) const override;

 private:
  double max_lr_, initial_lr_, min_lr_;
  int64_t total_steps_;
  double warmup_end_;  // the step at which max_lr is reached
};

}  // namespace minidl::optim
