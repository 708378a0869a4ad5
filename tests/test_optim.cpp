// Optimizer steps against hand-computed values, parameter groups, and schedules.
#include <gtest/gtest.h>

#include <cmath>

#include "minidl.h"
#include "optim/optim.h"

namespace minidl::optim_test {

namespace {
Tensor param(std::vector<double> v) { return Tensor::from_vector<double>(v).requires_grad_(); }
void set_grad(Tensor& p, std::vector<double> g) { p.set_grad(Tensor::from_vector<double>(g)); }
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST(SGD, PlainStep) {
  Tensor p = param({1, 2});
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  set_grad(p, {0.5, -1});
  opt.step();
  EXPECT_NEAR(values(p)[0], 0.95, 1e-12);
  EXPECT_NEAR(values(p)[1], 2.1, 1e-12);
}

TEST(SGD, MomentumDampeningWeightDecay) {
  // PyTorch: d = g + wd*p; buf = d on the first step, then m*buf + (1-dampening)*d; p -= lr*buf.
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.5).weight_decay(0.1));
  set_grad(p, {1});
  opt.step();  // d = 1.1, buf = 1.1, p = 1 - 0.11 = 0.89
  EXPECT_NEAR(values(p)[0], 0.89, 1e-12);
  set_grad(p, {1});
  opt.step();  // d = 1.089, buf = 0.99 + 0.5445 = 1.5345, p = 0.89 - 0.15345
  EXPECT_NEAR(values(p)[0], 0.89 - 0.15345, 1e-12);
}

TEST(SGD, Nesterov) {
  Tensor p = param({0});
  optim::SGD opt({p}, optim::SGDOptions(1).momentum(0.5).nesterov(true));
  set_grad(p, {1});
  opt.step();  // buf = 1, d = 1 + 0.5 = 1.5
  EXPECT_NEAR(values(p)[0], -1.5, 1e-12);
  set_grad(p, {1});
  opt.step();  // buf = 1.5, d = 1 + 0.75 = 1.75
  EXPECT_NEAR(values(p)[0], -3.25, 1e-12);
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(1).nesterov(true)), Error);
}

TEST(SGD, SkipsParametersWithoutGradientAndZeroGrad) {
  Tensor a = param({1}), b = param({1});
  optim::SGD opt({a, b}, optim::SGDOptions(1));
  set_grad(a, {1});
  opt.step();
  EXPECT_EQ(values(a)[0], 0.0);
  EXPECT_EQ(values(b)[0], 1.0);
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  set_grad(a, {3});
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(values(a.grad())[0], 0.0);
}

TEST(SGD, ParameterGroupsHaveTheirOwnLearningRate) {
  Tensor a = param({1}), b = param({1});
  optim::SGD opt({optim::ParamGroup({a}, 0.5), optim::ParamGroup({b})}, optim::SGDOptions(0.1));
  set_grad(a, {1});
  set_grad(b, {1});
  opt.step();
  EXPECT_NEAR(values(a)[0], 0.5, 1e-12);
  EXPECT_NEAR(values(b)[0], 0.9, 1e-12);
}

TEST(Adam, StepsMatchHandComputation) {
  Tensor p = param({1.0});
  optim::Adam opt({p}, optim::AdamOptions(0.1));
  double m = 0, v = 0, x = 1.0;
  for (int t = 1; t <= 3; ++t) {
    double g = 2 * x;  // gradient of x^2
    set_grad(p, {g});
    opt.step();
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    double mhat = m / (1 - std::pow(0.9, t)), vhat = v / (1 - std::pow(0.999, t));
    x -= 0.1 * mhat / (std::sqrt(vhat) + 1e-8);
    EXPECT_NEAR(values(p)[0], x, 1e-12) << "step " << t;
  }
}

TEST(Adam, WeightDecayCoupledAndDecoupled) {
  Tensor a = param({2.0}), b = param({2.0});
  optim::Adam adam({a}, optim::AdamOptions(0.1).weight_decay(0.5));
  optim::AdamW adamw({b}, optim::AdamOptions(0.1).weight_decay(0.5));
  set_grad(a, {1});
  set_grad(b, {1});
  adam.step();
  adamw.step();
  // Adam: g = 1 + 0.5*2 = 2; first step moves by lr * sign = 0.1.
  EXPECT_NEAR(values(a)[0], 1.9, 1e-7);
  // AdamW: p *= 1 - 0.1*0.5, then moves by 0.1.
  EXPECT_NEAR(values(b)[0], 2.0 * 0.95 - 0.1, 1e-7);
}

TEST(LRScheduler, StepLR) {
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::StepLR sched(opt, 2, 0.5);
  std::vector<double> seen;
  for (int e = 0; e < 5; ++e) {
    seen.push_back(opt.lr());
    sched.step();
  }
  EXPECT_EQ(seen, (std::vector<double>{1, 1, 0.5, 0.5, 0.25}));
}

TEST(LRScheduler, CosineAnnealing) {
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::CosineAnnealingLR sched(opt, 4, 0.1);
  EXPECT_DOUBLE_EQ(opt.lr(), 1.0);
  sched.step();
  sched.step();
  EXPECT_NEAR(opt.lr(), 0.55, 1e-12);  // halfway: the mean of 1 and 0.1
  sched.step();
  sched.step();
  EXPECT_NEAR(opt.lr(), 0.1, 1e-12);
  EXPECT_NEAR(sched.get_last_lr()[0], 0.1, 1e-12);
}

namespace {

// The lr after each of `steps` calls to step(), starting with the value before the first.
template <class Scheduler>
std::vector<double> schedule(optim::Optimizer& opt, Scheduler& sched, int steps) {
  std::vector<double> seen{opt.lr()};
  for (int i = 0; i < steps; ++i) {
    sched.step();
    seen.push_back(opt.lr());
  }
  return seen;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "step " << i;
}

}  // namespace

TEST(LRScheduler, MultiStepAndExponential) {
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::MultiStepLR multi(opt, {2, 4}, 0.5);
  expect_near(schedule(opt, multi, 5), {1, 1, 0.5, 0.5, 0.25, 0.25});
  EXPECT_THROW(optim::MultiStepLR(opt, {4, 2}), Error);
  optim::SGD opt2({p}, optim::SGDOptions(2.0));
  optim::ExponentialLR exp(opt2, 0.5);
  expect_near(schedule(opt2, exp, 3), {2, 1, 0.5, 0.25});
}

TEST(LRScheduler, LinearWarmup) {
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::LinearLR warmup(opt, 0.25, 1.0, 3);  // applied at construction, as in PyTorch
  expect_near(schedule(opt, warmup, 4), {0.25, 0.5, 0.75, 1.0, 1.0});
  EXPECT_THROW(optim::LinearLR(opt, 0.0), Error);
}

TEST(LRScheduler, OneCycle) {
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(0.123));  // ignored: the cycle is set by max_lr
  // total 10, pct_start 0.3: up over steps 0..2 (0.3 * 10 - 1 = 2), down over steps 2..9.
  optim::OneCycleLR cycle(opt, 1.0, 10, 0.3, 25, 1e4);
  const double initial = 1.0 / 25, min_lr = initial / 1e4;
  auto cos_anneal = [](double from, double to, double pct) { return to + (from - to) / 2 * (std::cos(M_PI * pct) + 1); };
  std::vector<double> want;
  for (int s = 0; s <= 9; ++s)
    want.push_back(s <= 2 ? cos_anneal(initial, 1.0, s / 2.0) : cos_anneal(1.0, min_lr, (s - 2) / 7.0));
  expect_near(schedule(opt, cycle, 9), want);
  EXPECT_NEAR(want[2], 1.0, 1e-12);  // the peak
  EXPECT_NEAR(want[9], min_lr, 1e-12);
  cycle.step();  // step 10 == total_steps: still allowed, as in PyTorch
  EXPECT_THROW(cycle.step(), Error);
}

TEST(LRScheduler, ReduceOnPlateau) {
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateauOptions o;
  o.patience = 1;
  o.factor = 0.5;
  o.cooldown = 1;
  o.min_lr = 0.2;
  optim::ReduceLROnPlateau plateau(opt, o);
  std::vector<double> seen;
  // Improves, then stalls: the second bad epoch (> patience 1) halves lr; the cooldown epoch after
  // it does not count; two more bad epochs halve again; min_lr stops the third.
  for (double metric : {10.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0}) {
    plateau.step(metric);
    seen.push_back(opt.lr());
  }
  expect_near(seen, {1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2});
  // A relative threshold: 8.9995 is not 1e-4 better than 9 (9 * (1 - 1e-4) = 8.9991).
  optim::SGD opt2({p}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateauOptions strict;
  strict.patience = 0;
  optim::ReduceLROnPlateau p2(opt2, strict);
  p2.step(9.0);
  p2.step(8.9995);
  EXPECT_NEAR(opt2.lr(), 0.1, 1e-12);
  EXPECT_EQ(p2.num_bad_epochs(), 0);
}

TEST(Optimizer, RejectsBadParameters) {
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{}, optim::SGDOptions(0.1)), Error);
  EXPECT_THROW(optim::SGD({Tensor::from_vector<double>({1})}, optim::SGDOptions(0.1)), Error);  // no requires_grad
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  p.impl().grad = Tensor::from_vector<double>({1, 2}).impl_ptr();  // wrong shape, bypassing set_grad's check
  EXPECT_THROW(opt.step(), Error);
}

TEST(Optimizer, StepIsNotRecorded) {
  Tensor p = param({1});
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9));
  (p * p).sum().backward();
  size_t before = autograd::tape_size();
  opt.step();
  EXPECT_EQ(autograd::tape_size(), before);
  EXPECT_TRUE(p.is_leaf());
}

}  // namespace minidl::optim_test
