#include "optim/reduce_lr_on_plateau.h"

#include <algorithm>
#include <limits>

namespace minidl::optim {

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(optimizer),
      options_(options),
      best_(options.maximize ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()) {
  MINIDL_CHECK(options.factor > 0 && options.factor < 1, "ReduceLROnPlateau: expected 0 < factor < 1, got ",
               options.factor);
  MINIDL_CHECK(options.patience >= 0 && options.cooldown >= 0 && options.threshold >= 0,
               "ReduceLROnPlateau: expected patience, cooldown and threshold >= 0");
  remember_lrs();
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const double t = options_.threshold;
  if (options_.maximize) return options_.threshold_abs ? metric > best_ + t : metric > best_ * (1 + t);
  return options_.threshold_abs ? metric < best_ - t : metric < best_ * (1 - t);
}

void ReduceLROnPlateau::step(double metric) {
  if (is_better(metric)) {
    best_ = metric;
    num_bad_ = 0;
  } else {
    ++num_bad_;
  }
  if (cooldown_left_ > 0) {  // bad epochs right after a reduction do not count
    --cooldown_left_;
    num_bad_ = 0;
  }
  if (num_bad_ > options_.patience) {
    for (ParamGroup& g : optimizer_.param_groups()) {
      const double lowered = std::max(*g.lr * options_.factor, options_.min_lr);
      if (*g.lr - lowered > options_.eps) g.lr = lowered;
    }
    cooldown_left_ = options_.cooldown;
    num_bad_ = 0;
  }
  remember_lrs();
}

void ReduceLROnPlateau::remember_lrs() {
  last_lr_.clear();
  for (const ParamGroup& g : optimizer_.param_groups()) last_lr_.push_back(*g.lr);
}

}  // namespace minidl::optim
