#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace minidl::optim {

namespace {

// OneCycleLR's initial_lr, once its arguments are known to be good: it replaces the optimizer's.
double one_cycle_initial_lr(double max_lr, int64_t total_steps, double pct_start, double div_factor,
                            double final_div_factor) {
  MINIDL_CHECK(total_steps > 1, "OneCycleLR: expected total_steps > 1, got ", total_steps);
  MINIDL_CHECK(pct_start > 0 && pct_start < 1, "OneCycleLR: expected 0 < pct_start < 1, got ", pct_start);
  MINIDL_CHECK(max_lr > 0 && div_factor > 0 && final_div_factor > 0,
               "OneCycleLR: expected positive max_lr, div_factor and final_div_factor, got ", max_lr, ", ",
               div_factor, " and ", final_div_factor);
  return max_lr / div_factor;
}

}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name, std::optional<double> initial_lr)
    : name_(name), optimizer_(optimizer) {
  // As PyTorch's setdefault("initial_lr", lr): the first schedule of a group fixes its base rate,
  // which later schedules share (not the rate an earlier schedule's first step left).
  for (ParamGroup& g : optimizer.param_groups()) {
    if (initial_lr) g.initial_lr = initial_lr;
    else if (!g.initial_lr) g.initial_lr = g.lr;
    base_lrs_.push_back(*g.initial_lr);
  }
  last_lr_ = current_lrs();
}

void LRScheduler::step() {
  check_groups();
  ++last_epoch_;
  std::vector<double> lrs = current_lrs();
  for (size_t i = 0; i < lrs.size(); ++i) lrs[i] = get_lr(lrs[i], base_lrs_[i]);
  set_lrs(lrs);
}

void LRScheduler::restart() {
  check_groups();
  last_epoch_ = 0;
  std::vector<double> lrs = current_lrs();
  for (size_t i = 0; i < lrs.size(); ++i) lrs[i] = closed_form_lr(lrs[i], base_lrs_[i]);
  set_lrs(lrs);
}

double LRScheduler::get_lr(double, double) const {
  MINIDL_FAIL(name_, ": a schedule made of schedules has no closed form to restart from at a SequentialLR "
              "milestone; only the first schedule of a SequentialLR may be one");
}

void LRScheduler::set_lrs(const std::vector<double>& lrs) {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < lrs.size(); ++i) groups[i].lr = lrs[i];
  last_lr_ = lrs;
}

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> out;
  for (const ParamGroup& g : optimizer_.param_groups()) out.push_back(*g.lr);
  return out;
}

void LRScheduler::check_groups() const {
  MINIDL_CHECK(optimizer_.param_groups().size() == base_lrs_.size(), name_, ": expected the ", base_lrs_.size(),
               " parameter group(s) the optimizer had when the schedule was built, found ",
               optimizer_.param_groups().size());
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  MINIDL_CHECK(step_size > 0, "StepLR: expected step_size > 0, got ", step_size);
  LRScheduler::step();
}

double StepLR::get_lr(double lr, double) const {
  const bool boundary = last_epoch() > 0 && last_epoch() % step_size_ == 0;
  return boundary ? lr * gamma_ : lr;
}

double StepLR::closed_form_lr(double, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(last_epoch() / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  MINIDL_CHECK(T_max > 0, "CosineAnnealingLR: expected T_max > 0, got ", T_max);
  LRScheduler::step();
}

double CosineAnnealingLR::get_lr(double lr, double base_lr) const {
  const int64_t e = last_epoch();
  if (e == 0) return lr;
  const double t_max = static_cast<double>(t_max_);
  // Past T_max the cosine rises again. At the epoch after each trough the ratio below would divide by
  // zero (1 + cos(pi) = 0), so PyTorch adds the closed form's first rise instead.
  if ((e - 1 - t_max_) % (2 * t_max_) == 0)
    return lr + (base_lr - eta_min_) * (1 - std::cos(std::numbers::pi / t_max)) / 2;
  const double now = 1 + std::cos(std::numbers::pi * static_cast<double>(e) / t_max);
  const double before = 1 + std::cos(std::numbers::pi * static_cast<double>(e - 1) / t_max);
  return eta_min_ + (lr - eta_min_) * now / before;
}

double CosineAnnealingLR::closed_form_lr(double, double base_lr) const {
  const double phase = std::numbers::pi * static_cast<double>(last_epoch()) / static_cast<double>(t_max_);
  return eta_min_ + (base_lr - eta_min_) * (1 + std::cos(phase)) / 2;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  MINIDL_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
               "MultiStepLR: expected increasing milestones");
  LRScheduler::step();
}

double MultiStepLR::get_lr(double lr, double) const {
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch());
  return lr * std::pow(gamma_, static_cast<double>(hits));
}

double MultiStepLR::closed_form_lr(double, double base_lr) const {
  const auto reached = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch()) - milestones_.begin();
  return base_lr * std::pow(gamma_, static_cast<double>(reached));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer, "ExponentialLR"), gamma_(gamma) {
  LRScheduler::step();
}

double ExponentialLR::get_lr(double lr, double) const { return last_epoch() == 0 ? lr : lr * gamma_; }

double ExponentialLR::closed_form_lr(double, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(last_epoch()));
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer, "LinearLR"), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  MINIDL_CHECK(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1,
               "LinearLR: expected 0 < start_factor <= 1 and 0 <= end_factor <= 1, got ", start_factor, " and ",
               end_factor);
  MINIDL_CHECK(total_iters > 0, "LinearLR: expected total_iters > 0, got ", total_iters);
  LRScheduler::step();
}

double LinearLR::get_lr(double lr, double) const {
  const int64_t e = last_epoch();
  if (e == 0) return lr * start_factor_;
  if (e > total_iters_) return lr;
  // factor(e) / factor(e - 1), with factor(e) = start + (end - start) * e / total_iters.
  const double slope = end_factor_ - start_factor_;
  return lr * (1 + slope / (static_cast<double>(total_iters_) * start_factor_ + static_cast<double>(e - 1) * slope));
}

double LinearLR::closed_form_lr(double, double base_lr) const {
  const double done = static_cast<double>(std::min(last_epoch(), total_iters_)) / static_cast<double>(total_iters_);
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * done);
}

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, int64_t total_iters)
    : LRScheduler(optimizer, "ConstantLR"), factor_(factor), total_iters_(total_iters) {
  // PyTorch accepts factor 0 and then divides by it at total_iters; a NaN rate helps no one.
  MINIDL_CHECK(factor > 0 && factor <= 1, "ConstantLR: expected 0 < factor <= 1, got ", factor);
  MINIDL_CHECK(total_iters >= 0, "ConstantLR: expected total_iters >= 0, got ", total_iters);
  LRScheduler::step();
}

double ConstantLR::get_lr(double lr, double) const {
  const int64_t e = last_epoch();
  if (e == 0) return e == total_iters_ ? lr : lr * factor_;
  return e == total_iters_ ? lr / factor_ : lr;
}

double ConstantLR::closed_form_lr(double, double base_lr) const {
  return last_epoch() >= total_iters_ ? base_lr : base_lr * factor_;
}

PolynomialLR::PolynomialLR(Optimizer& optimizer, int64_t total_iters, double power)
    : LRScheduler(optimizer, "PolynomialLR"), total_iters_(total_iters), power_(power) {
  MINIDL_CHECK(total_iters > 0, "PolynomialLR: expected total_iters > 0, got ", total_iters);
  LRScheduler::step();
}

double PolynomialLR::get_lr(double lr, double) const {
  const int64_t e = last_epoch();
  if (e == 0 || e > total_iters_) return lr;
  // (1 - e/T)^p / (1 - (e-1)/T)^p = ((T - e) / (T - e + 1))^p.
  const double left = static_cast<double>(total_iters_ - e);
  return lr * std::pow(left / (left + 1), power_);
}

double PolynomialLR::closed_form_lr(double, double base_lr) const {
  const double done = static_cast<double>(std::min(last_epoch(), total_iters_)) / static_cast<double>(total_iters_);
  return base_lr * std::pow(1 - done, power_);
}

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start,
                       double div_factor, double final_div_factor)
    : LRScheduler(optimizer, "OneCycleLR",
                  one_cycle_initial_lr(max_lr, total_steps, pct_start, div_factor, final_div_factor)),
      max_lr_(max_lr),
      initial_lr_(max_lr / div_factor),
      min_lr_(max_lr / div_factor / final_div_factor),
      total_steps_(total_steps),
      warmup_end_(pct_start * static_cast<double>(total_steps) - 1) {
  LRScheduler::step();
}

double OneCycleLR::get_lr(double, double) const {
  const int64_t step = last_epoch();
  MINIDL_CHECK(step <= total_steps_, "OneCycleLR: stepped ", step, " times, but total_steps is ", total_steps_,
               "; the schedule ends there");
  // Cosine from `from` (pct 0) to `to` (pct 1).
  auto anneal = [](double from, double to, double pct) { return to + (from - to) / 2 * (std::cos(std::numbers::pi * pct) + 1); };
  const double s = static_cast<double>(step);
  if (s <= warmup_end_) return anneal(initial_lr_, max_lr_, s / warmup_end_);
  return anneal(max_lr_, min_lr_, (s - warmup_end_) / (static_cast<double>(total_steps_ - 1) - warmup_end_));
}

}  // namespace minidl::optim
