#pragma once
// Schedules that cycle, stepped once per batch (or per epoch), as PyTorch's: CyclicLR between two
// rates, and CosineAnnealingWarmRestarts, a cosine that starts over. Each computes its rates afresh
// (not chainable), so it overrides what came before it. OneCycleLR is in optim/lr_scheduler.h.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "optim/lr_scheduler.h"

namespace minidl::optim {

/// A cosine from each group's initial lr down to eta_min over T_i epochs, then a restart at the
/// initial lr with T_i multiplied by T_mult (T_0 first): SGDR. step() advances one epoch; step(epoch)
/// goes to a fractional one, so a schedule stepped every batch restarts mid-epoch where it should.
///   optim::CosineAnnealingWarmRestarts s(optimizer, /*T_0=*/10, /*T_mult=*/2);
///   for (int64_t i = 0; i < iters; ++i) { ...; s.step(epoch + double(i) / double(iters)); }
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult = 1, double eta_min = 0);
  void step() override;
  /// To `epoch` (>= 0, fractional allowed); last_epoch() becomes its floor.
  void step(double epoch);
  /// Epochs since the last restart (fractional after step(epoch)).
  double T_cur() const { return t_cur_; }
  /// The length of the current cycle.
  int64_t T_i() const { return t_i_; }

 protected:
  void restart() override { step(0.0); }
  void add_state(std::map<std::string, Tensor>& state) const override;
  void check_state(const std::map<std::string, Tensor>& state) const override;
  void set_state(const std::map<std::string, Tensor>& state) override;

 private:
  void set_rates();

  int64_t t_0_, t_mult_;
  double eta_min_;
  double t_cur_ = 0;
  int64_t t_i_;
};

/// The cyclical learning rate (Smith, 2017), stepped once per batch: from base_lr up to max_lr
/// over step_size_up steps, down over step_size_down (default: as up), again and again. The cycle's
/// height is scaled by mode: "triangular" (constant), "triangular2" (halved each cycle) or
/// "exp_range" (gamma^step). Only the learning rate cycles (PyTorch's cycle_momentum=False). The
/// constructor sets every group's rate to base_lr.
///   optim::CyclicLR s(optimizer, /*base_lr=*/1e-4, /*max_lr=*/1e-2, /*step_size_up=*/500);
class CyclicLR : public LRScheduler {
 public:
  /// A factor of the cycle (scale_mode "cycle", counted from 1) or of the step ("iterations").
  using ScaleFn = std::function<double(double)>;

  CyclicLR(Optimizer& optimizer, double base_lr, double max_lr, int64_t step_size_up = 2000,
           std::optional<int64_t> step_size_down = std::nullopt, const std::string& mode = "triangular",
           double gamma = 1.0);
  /// A cycle scaled by a function of your own.
  ///   CyclicLR(opt, 1e-4, 1e-2, 500, std::nullopt, [](double c) { return 1 / c; }, "cycle")
  CyclicLR(Optimizer& optimizer, double base_lr, double max_lr, int64_t step_size_up,
           std::optional<int64_t> step_size_down, ScaleFn scale_fn, const std::string& scale_mode = "cycle");

 protected:
  double get_lr(double lr, double base_lr) const override;

 private:
  double max_lr_;
  double total_size_, step_ratio_;
  ScaleFn scale_fn_;
  bool scale_by_cycle_;
};

}  // namespace minidl::optim
