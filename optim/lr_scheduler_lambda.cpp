#include "optim/lr_scheduler_lambda.h"

#include <cmath>

namespace minidl::optim {

namespace {

// One function per group: a single one is shared, a list must match the groups.
std::vector<LRLambda> per_group(const char* name, const Optimizer& optimizer, std::vector<LRLambda> lambdas) {
  const size_t groups = optimizer.param_groups().size();
  if (lambdas.size() == 1) lambdas.resize(groups, lambdas[0]);
  MINIDL_CHECK(lambdas.size() == groups, name, ": expected one lr_lambda for each of the optimizer's ", groups,
               " parameter group(s), got ", lambdas.size());
  for (size_t i = 0; i < lambdas.size(); ++i)
    MINIDL_CHECK(static_cast<bool>(lambdas[i]), name, ": the lr_lambda for group ", i, " is empty");
  return lambdas;
}

double factor(const char* name, const LRLambda& lambda, int64_t epoch) {
  const double f = lambda(epoch);
  MINIDL_CHECK(std::isfinite(f), name, ": lr_lambda(", epoch, ") returned ", f, ", expected a finite factor");
  return f;
}

}  // namespace

LambdaLR::LambdaLR(Optimizer& optimizer, LRLambda lr_lambda)
    : LambdaLR(optimizer, std::vector<LRLambda>{std::move(lr_lambda)}) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas)
    : LRScheduler(optimizer, "LambdaLR"), lambdas_(per_group("LambdaLR", optimizer, std::move(lr_lambdas))) {
  step();
}

// The factor depends on the group, which get_lr(lr, base_lr) does not see: the steps are written here.
void LambdaLR::step() {
  set_last_epoch(last_epoch() + 1);
  set_rates();
}

void LambdaLR::restart() {
  set_last_epoch(0);
  set_rates();
}

void LambdaLR::set_rates() {
  check_groups();
  std::vector<double> lrs;
  for (size_t i = 0; i < lambdas_.size(); ++i)
    lrs.push_back(base_lrs()[i] * factor("LambdaLR", lambdas_[i], last_epoch()));
  set_lrs(lrs);
}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, LRLambda lr_lambda)
    : MultiplicativeLR(optimizer, std::vector<LRLambda>{std::move(lr_lambda)}) {}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas)
    : LRScheduler(optimizer, "MultiplicativeLR"),
      lambdas_(per_group("MultiplicativeLR", optimizer, std::move(lr_lambdas))) {
  step();
}

void MultiplicativeLR::step() {
  check_groups();
  set_last_epoch(last_epoch() + 1);
  std::vector<double> lrs = current_lrs();
  // The constructor's step to epoch 0 leaves the rates, as PyTorch's.
  if (last_epoch() > 0)
    for (size_t i = 0; i < lrs.size(); ++i) lrs[i] *= factor("MultiplicativeLR", lambdas_[i], last_epoch());
  set_lrs(lrs);
}

// At a SequentialLR milestone it starts from the rate the schedule before it left.
void MultiplicativeLR::restart() {
  check_groups();
  set_last_epoch(0);
  set_lrs(current_lrs());
}

}  // namespace minidl::optim
