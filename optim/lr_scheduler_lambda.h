#pragma once
// Schedules given as functions of the epoch, as PyTorch's LambdaLR and MultiplicativeLR: one function
// for every parameter group, or one per group.
#include <cstdint>
#include <functional>
#include <vector>

#include "optim/lr_scheduler.h"

namespace minidl::optim {

/// A factor of the epoch.
using LRLambda = std::function<double(int64_t epoch)>;

/// base_lr * lr_lambda(epoch), computed afresh each step (not chainable, as in PyTorch): a warm-up
/// then cosine decay written as one function, as nanoGPT's schedule is.
///   optim::LambdaLR schedule(optimizer, [](int64_t it) { return std::min(1.0, (it + 1) / 100.0); });
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, LRLambda lr_lambda);
  /// One function per parameter group, in the groups' order.
  LambdaLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas);
  void step() override;

 protected:
  void restart() override;

 private:
  void set_rates();

  std::vector<LRLambda> lambdas_;
};

/// lr * lr_lambda(epoch) at every step after the constructor's (chainable).
///   optim::MultiplicativeLR schedule(optimizer, [](int64_t) { return 0.95; });
class MultiplicativeLR : public LRScheduler {
 public:
  MultiplicativeLR(Optimizer& optimizer, LRLambda lr_lambda);
  /// One function per parameter group, in the groups' order.
  MultiplicativeLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas);
  void step() override;

 protected:
  void restart() override;

 private:
  std::vector<LRLambda> lambdas_;
};

}  // namespace minidl::optim
