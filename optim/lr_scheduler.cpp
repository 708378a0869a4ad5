#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace minidl::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const ParamGroup& g : optimizer.param_groups()) base_lrs_.push_back(*g.lr);
}

void LRScheduler::step() {
  ++epoch_;
  apply();
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr = lr_at(base_lrs_[i], epoch_);
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (const ParamGroup& g : optimizer_.param_groups()) out.push_back(*g.lr);
  return out;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  MINIDL_CHECK(step_size > 0, "StepLR: expected step_size > 0, got ", step_size);
}

double StepLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  MINIDL_CHECK(T_max > 0, "CosineAnnealingLR: expected T_max > 0, got ", T_max);
}

double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  double phase = std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(phase)) / 2;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  MINIDL_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
               "MultiStepLR: expected increasing milestones");
}

double MultiStepLR::lr_at(double base_lr, int64_t epoch) const {
  const auto reached = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(reached));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {}

double ExponentialLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch));
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  MINIDL_CHECK(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1,
               "LinearLR: expected 0 < start_factor <= 1 and 0 <= end_factor <= 1, got ", start_factor, " and ",
               end_factor);
  MINIDL_CHECK(total_iters > 0, "LinearLR: expected total_iters > 0, got ", total_iters);
  apply();
}

double LinearLR::lr_at(double base_lr, int64_t epoch) const {
  const double done = static_cast<double>(std::min(epoch, total_iters_)) / static_cast<double>(total_iters_);
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * done);
}

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start,
                       double div_factor, double final_div_factor)
    : LRScheduler(optimizer),
      max_lr_(max_lr),
      initial_lr_(max_lr / div_factor),
      min_lr_(max_lr / div_factor / final_div_factor),
      total_steps_(total_steps),
      warmup_end_(pct_start * static_cast<double>(total_steps) - 1) {
  MINIDL_CHECK(total_steps > 1, "OneCycleLR: expected total_steps > 1, got ", total_steps);
  MINIDL_CHECK(pct_start > 0 && pct_start < 1, "OneCycleLR: expected 0 < pct_start < 1, got ", pct_start);
  MINIDL_CHECK(max_lr > 0 && div_factor > 0 && final_div_factor > 0,
               "OneCycleLR: expected positive max_lr, div_factor and final_div_factor");
  apply();
}

double OneCycleLR::lr_at(double, int64_t step) const {
  MINIDL_CHECK(step <= total_steps_, "OneCycleLR: stepped ", step, " times, but total_steps is ", total_steps_,
               "; the schedule ends there");
  // Cosine from `from` (pct 0) to `to` (pct 1).
  auto anneal = [](double from, double to, double pct) { return to + (from - to) / 2 * (std::cos(std::numbers::pi * pct) + 1); };
  const double s = static_cast<double>(step);
  if (s <= warmup_end_) return anneal(initial_lr_, max_lr_, s / warmup_end_);
  return anneal(max_lr_, min_lr_, (s - warmup_end_) / (static_cast<double>(total_steps_ - 1) - warmup_end_));
}

}  // namespace minidl::optim
