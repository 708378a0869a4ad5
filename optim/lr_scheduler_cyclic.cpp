#include "optim/lr_scheduler_cyclic.h"

#include <cmath>
#include <numbers>

namespace minidl::optim {

namespace {

CyclicLR::ScaleFn mode_scale(const std::string& mode, double gamma) {
  if (mode == "triangular") return [](double) { return 1.0; };
  if (mode == "triangular2") return [](double cycle) { return 1 / std::pow(2.0, cycle - 1); };
  if (mode == "exp_range") return [gamma](double step) { return std::pow(gamma, step); };
  MINIDL_FAIL("CyclicLR: expected mode \"triangular\", \"triangular2\" or \"exp_range\", got \"", mode, "\"");
}

std::string mode_scale_mode(const std::string& mode) { return mode == "exp_range" ? "iterations" : "cycle"; }

double checked_base_lr(double base_lr, double max_lr) {
  MINIDL_CHECK(std::isfinite(base_lr) && std::isfinite(max_lr) && base_lr >= 0 && max_lr >= 0,
               "CyclicLR: expected finite, non-negative base_lr and max_lr, got ", base_lr, " and ", max_lr);
  return base_lr;
}

}  // namespace

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult,
                                                         double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingWarmRestarts"), t_0_(T_0), t_mult_(T_mult), eta_min_(eta_min), t_i_(T_0) {
  MINIDL_CHECK(T_0 > 0, "CosineAnnealingWarmRestarts: expected T_0 > 0, got ", T_0);
  MINIDL_CHECK(T_mult >= 1, "CosineAnnealingWarmRestarts: expected T_mult >= 1, got ", T_mult);
  step();
}

void CosineAnnealingWarmRestarts::step() {
  if (last_epoch() < 0) return step(0.0);
  t_cur_ += 1;
  if (t_cur_ >= static_cast<double>(t_i_)) {
    t_cur_ -= static_cast<double>(t_i_);
    t_i_ *= t_mult_;
  }
  set_last_epoch(last_epoch() + 1);
  set_rates();
}

void CosineAnnealingWarmRestarts::step(double epoch) {
  MINIDL_CHECK(std::isfinite(epoch) && epoch >= 0, "CosineAnnealingWarmRestarts: expected a non-negative epoch, got ",
               epoch);
  // The cycle `epoch` falls in: cycles of T_0, T_0 * T_mult, T_0 * T_mult^2, ... laid end to end.
  // Counted in integers (PyTorch takes a floating logarithm, which can land one cycle early).
  double start = 0;
  int64_t length = t_0_;
  while (epoch >= start + static_cast<double>(length)) {
    start += static_cast<double>(length);
    if (t_mult_ == 1) {
      // Equal cycles: no need to walk them one by one.
      start += std::floor((epoch - start) / static_cast<double>(length)) * static_cast<double>(length);
      break;
    }
    length *= t_mult_;
  }
  t_i_ = length;
  t_cur_ = epoch - start;
  set_last_epoch(static_cast<int64_t>(std::floor(epoch)));
  set_rates();
}

void CosineAnnealingWarmRestarts::set_rates() {
  check_groups();
  std::vector<double> lrs;
  const double phase = std::numbers::pi * t_cur_ / static_cast<double>(t_i_);
  for (double base_lr : base_lrs()) lrs.push_back(eta_min_ + (base_lr - eta_min_) * (1 + std::cos(phase)) / 2);
  set_lrs(lrs);
}

CyclicLR::CyclicLR(Optimizer& optimizer, double base_lr, double max_lr, int64_t step_size_up,
                   std::optional<int64_t> step_size_down, const std::string& mode, double gamma)
    : CyclicLR(optimizer, base_lr, max_lr, step_size_up, step_size_down, mode_scale(mode, gamma),
               mode_scale_mode(mode)) {}

CyclicLR::CyclicLR(Optimizer& optimizer, double base_lr, double max_lr, int64_t step_size_up,
                   std::optional<int64_t> step_size_down, ScaleFn scale_fn, const std::string& scale_mode)
    : LRScheduler(optimizer, "CyclicLR", checked_base_lr(base_lr, max_lr)),
      max_lr_(max_lr),
      scale_fn_(std::move(scale_fn)),
      scale_by_cycle_(scale_mode == "cycle") {
  const int64_t down = step_size_down.value_or(step_size_up);
  MINIDL_CHECK(step_size_up > 0 && down > 0, "CyclicLR: expected step_size_up and step_size_down > 0, got ",
               step_size_up, " and ", down);
  MINIDL_CHECK(static_cast<bool>(scale_fn_), "CyclicLR: the scale_fn is empty");
  MINIDL_CHECK(scale_mode == "cycle" || scale_mode == "iterations",
               "CyclicLR: expected scale_mode \"cycle\" or \"iterations\", got \"", scale_mode, "\"");
  total_size_ = static_cast<double>(step_size_up + down);
  step_ratio_ = static_cast<double>(step_size_up) / total_size_;
  // The rates start at base_lr (the base class took it as each group's initial_lr).
  auto& groups = optimizer.param_groups();
  for (auto& g : groups) g.lr = base_lr;
  LRScheduler::step();
}

double CyclicLR::get_lr(double, double base_lr) const {
  const double step = static_cast<double>(last_epoch());
  const double cycle = std::floor(1 + step / total_size_);
  const double x = 1 + step / total_size_ - cycle;  // where in the cycle, in [0, 1)
  const double rise = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  return base_lr + (max_lr_ - base_lr) * rise * scale_fn_(scale_by_cycle_ ? cycle : step);
}

}  // namespace minidl::optim
