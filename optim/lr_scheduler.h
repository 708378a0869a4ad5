#pragma once
// Learning-rate schedules, as in PyTorch: step() once per epoch (OneCycleLR: once per batch). Each
// writes the rate of every parameter group from that group's initial rate. ReduceLROnPlateau,
// which reacts to a metric, is in optim/reduce_lr_on_plateau.h.
#include <vector>

#include "optim/optimizer.h"

namespace minidl::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /// Advances one epoch and writes the new rate into every parameter group.
  void step();
  int64_t last_epoch() const { return epoch_; }
  std::vector<double> get_last_lr() const;

 protected:
  /// The rate of a group whose initial rate was `base_lr`, at `epoch`.
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;
  /// Writes the rates of the current epoch; schedules whose epoch-0 rate is not the initial one
  /// (LinearLR, OneCycleLR) call it from their constructor, as PyTorch's do.
  void apply();

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;
};

/// lr * gamma^(epoch / step_size).   optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.7);
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// eta_min + (lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.   optim::CosineAnnealingLR s(optimizer, 10);
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// lr * gamma^(number of milestones reached).   optim::MultiStepLR s(optimizer, {30, 80}, 0.1);
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

/// lr * gamma^epoch.   optim::ExponentialLR s(optimizer, 0.9);
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  double gamma_;
};

/// A linear warm-up (or decay): the factor goes from start_factor to end_factor over total_iters
/// steps, then stays. From the constructor on, lr = initial lr * start_factor.
///   optim::LinearLR warmup(optimizer, /*start_factor=*/0.1, /*end_factor=*/1.0, /*total_iters=*/5);
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    int64_t total_iters = 5);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// The one-cycle policy, stepped once per batch: from max_lr / div_factor up to max_lr over the
/// first pct_start of total_steps, then down to max_lr / (div_factor * final_div_factor), both
/// halves by cosine annealing. Only the learning rate cycles (PyTorch's cycle_momentum=False).
///   optim::OneCycleLR s(optimizer, /*max_lr=*/0.1, /*total_steps=*/epochs * batches);
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25, double final_div_factor = 1e4);

 protected:
  double lr_at(double base_lr, int64_t epoch) const override;

 private:
  double max_lr_, initial_lr_, min_lr_;
  int64_t total_steps_;
  double warmup_end_;  // the step at which max_lr is reached
};

}  // namespace minidl::optim
