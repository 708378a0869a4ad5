#pragma once
// Learning-rate schedules, stepped once per epoch, as in PyTorch.
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

}  // namespace minidl::optim
