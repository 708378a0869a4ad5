// The schedules given as functions (LambdaLR, MultiplicativeLR), the constant and polynomial ones,
// and the cyclic ones (CosineAnnealingWarmRestarts, CyclicLR). The expected values are PyTorch's,
// worked out by hand from its get_lr() and step() (torch/optim/lr_scheduler.py); each test says how.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "minidl.h"
#include "optim/optim.h"
#include "test_util.h"

namespace minidl::lr_scheduler_more_test {

using minidl::testing::expect_error;

namespace {

Tensor param() { return Tensor::from_vector<double>({1}).requires_grad_(); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "entry " << i;
}

// The first group's rate after construction, then after each of `steps` calls to step().
std::vector<double> rates(optim::Optimizer& opt, optim::LRScheduler& schedule, int steps) {
  std::vector<double> seen{opt.param_groups()[0].lr.value()};
  for (int i = 0; i < steps; ++i) {
    schedule.step();
    seen.push_back(opt.param_groups()[0].lr.value());
  }
  return seen;
}

double half_cosine(double t, double period) { return (1 + std::cos(std::numbers::pi * t / period)) / 2; }

}  // namespace

// base_lr * lambda(epoch), one function per group; a rate set by hand is overwritten.
TEST(LambdaLR, EachGroupGetsItsFunctionOfTheEpoch) {
  Tensor a = param(), b = param();
  optim::SGD opt({optim::ParamGroup({a}, 0.1), optim::ParamGroup({b}, 1.0)}, optim::SGDOptions(0.1));
  optim::LambdaLR schedule(opt, {[](int64_t e) { return 1.0 / static_cast<double>(e + 1); },
                                 [](int64_t e) { return std::pow(0.5, static_cast<double>(e)); }});
  expect_near({opt.param_groups()[0].lr.value(), opt.param_groups()[1].lr.value()}, {0.1, 1.0});
  schedule.step();
  schedule.step();
  expect_near(schedule.get_last_lr(), {0.1 / 3, 0.25});
  opt.param_groups()[0].lr = 5.0;
  schedule.step();
  expect_near(schedule.get_last_lr(), {0.1 / 4, 0.125});
  EXPECT_EQ(schedule.last_epoch(), 3);
}

// nanoGPT's schedule as one function: linear warm-up over 2 iterations, then cosine to 0.1x at 6.
TEST(LambdaLR, WarmupThenCosineAsOneFunction) {
  Tensor p = param();
  optim::AdamW opt({p}, optim::AdamWOptions(1e-3));
  auto factor = [](int64_t it) {
    if (it < 2) return static_cast<double>(it + 1) / 2;
    const double progress = static_cast<double>(it - 2) / 4;
    return 0.1 + 0.9 * half_cosine(std::min(progress, 1.0), 1.0);
  };
  optim::LambdaLR schedule(opt, factor);
  std::vector<double> want;
  for (int64_t it = 0; it <= 8; ++it) want.push_back(1e-3 * factor(it));
  expect_near(rates(opt, schedule, 8), want);
  // The shape: half at the first step, the peak at 2, 0.1x from 6 on.
  EXPECT_NEAR(want[0], 5e-4, 1e-15);
  EXPECT_NEAR(want[2], 1e-3, 1e-15);
  EXPECT_NEAR(want[8], 1e-4, 1e-15);
}

// lr * lambda(epoch) after the constructor's step, from whatever the rate is.
TEST(MultiplicativeLR, ScalesTheRateItFinds) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  optim::MultiplicativeLR schedule(opt, [](int64_t) { return 0.9; });
  expect_near(rates(opt, schedule, 2), {0.1, 0.09, 0.081});
  opt.param_groups()[0].lr = 1.0;
  schedule.step();
  EXPECT_NEAR(opt.param_groups()[0].lr.value(), 0.9, 1e-15);
}

// PyTorch: SequentialLR(opt, [LinearLR(opt, 0.5, total_iters=2), MultiplicativeLR(opt, 0.5)], [3])
// from lr 0.1. LinearLR: 0.05, then x1.5 = 0.075, x4/3 = 0.1. At the milestone MultiplicativeLR's
// step(0) has no closed form and returns the rate as it is (0.1); then x0.5 each step.
TEST(MultiplicativeLR, InASequenceContinuesFromTheRateBeforeIt) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  auto warmup = std::make_shared<optim::LinearLR>(opt, 0.5, 1.0, 2);
  auto decay = std::make_shared<optim::MultiplicativeLR>(opt, [](int64_t) { return 0.5; });
  optim::SequentialLR schedule(opt, {warmup, decay}, {3});
  expect_near(rates(opt, schedule, 5), {0.05, 0.075, 0.1, 0.1, 0.05, 0.025});
}

// PyTorch: ConstantLR(factor=0.5, total_iters=2) stepped with ExponentialLR(0.5), from 0.1. Constant:
// x0.5 at construction, unchanged at 1, x2 at 2. Exponential: x0.5 from epoch 1 on.
//   0.05; 0.05 * 0.5 = 0.025; 0.025 * 2 * 0.5 = 0.025; 0.0125.
TEST(ConstantLR, ChainsWithADecay) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  optim::ConstantLR warmup(opt, 0.5, 2);
  optim::ExponentialLR decay(opt, 0.5);
  std::vector<double> seen{opt.lr()};
  for (int e = 1; e <= 3; ++e) {
    warmup.step();
    decay.step();
    seen.push_back(opt.lr());
  }
  expect_near(seen, {0.05, 0.025, 0.025, 0.0125});
}

// PyTorch: SequentialLR(opt, [ExponentialLR(opt, 0.5), ConstantLR(opt, 0.5, 2)], [2]) from 0.1.
// Exponential: 0.1, 0.05. At the milestone ConstantLR's closed form at epoch 0: 0.1 * 0.5. Then
// unchanged at its epoch 1, doubled at 2.
TEST(ConstantLR, RestartsFromItsClosedForm) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  auto decay = std::make_shared<optim::ExponentialLR>(opt, 0.5);
  auto constant = std::make_shared<optim::ConstantLR>(opt, 0.5, 2);
  optim::SequentialLR schedule(opt, {decay, constant}, {2});
  expect_near(rates(opt, schedule, 5), {0.1, 0.05, 0.05, 0.05, 0.1, 0.1});
}

// base_lr * (1 - e/4)^2: 1, 9/16, 1/4, 1/16, 0, and 0 after.
TEST(PolynomialLR, DecaysToZeroAndStays) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::PolynomialLR schedule(opt, 4, 2.0);
  expect_near(rates(opt, schedule, 6), {1, 0.5625, 0.25, 0.0625, 0, 0, 0});
}

// PyTorch: SequentialLR(opt, [ConstantLR(opt, 1.0, 1), PolynomialLR(opt, 2, 1.0)], [1]) from 1.0:
// at the milestone PolynomialLR's closed form at epoch 0 is the base rate; then 1/2, 0.
TEST(PolynomialLR, RestartsFromItsClosedForm) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  auto hold = std::make_shared<optim::ConstantLR>(opt, 1.0, 1);
  auto decay = std::make_shared<optim::PolynomialLR>(opt, 2, 1.0);
  optim::SequentialLR schedule(opt, {hold, decay}, {1});
  expect_near(rates(opt, schedule, 3), {1, 1, 0.5, 0});
}

// T_0 = 2, T_mult = 2 from 1.0: cycles of 2, 4, 8 epochs, each a half cosine from 1 down.
//   epoch 0: 1; 1: cos half of 1/2 = 0.5; 2 (restart, T_i 4): 1; 3: half_cosine(1, 4); 4: 0.5; 5:
//   half_cosine(3, 4); 6 (restart, T_i 8): 1.
TEST(CosineAnnealingWarmRestarts, RestartsWithLongerCycles) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::CosineAnnealingWarmRestarts schedule(opt, 2, 2);
  expect_near(rates(opt, schedule, 6), {1, 0.5, 1, half_cosine(1, 4), 0.5, half_cosine(3, 4), 1});
  EXPECT_EQ(schedule.T_i(), 8);
  EXPECT_EQ(schedule.T_cur(), 0);
}

// step(epoch) finds the cycle: [0, 2), [2, 6), [6, 14), [14, 30) for T_0 = 2, T_mult = 2; eta_min
// is the floor. last_epoch() is the epoch's floor, and step() then goes on from the fraction.
TEST(CosineAnnealingWarmRestarts, StepsToAFractionalEpoch) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::CosineAnnealingWarmRestarts schedule(opt, 2, 2, 0.1);
  auto lr_at = [](double t, double period) { return 0.1 + 0.9 * half_cosine(t, period); };
  struct Case { double epoch, t_cur; int64_t t_i; };
  for (const Case c : {Case{0.5, 0.5, 2}, Case{5, 3, 4}, Case{6, 0, 8}, Case{13.5, 7.5, 8}, Case{14, 0, 16},
                       Case{2.5, 0.5, 4}}) {
    schedule.step(c.epoch);
    EXPECT_EQ(schedule.T_i(), c.t_i) << "epoch " << c.epoch;
    EXPECT_DOUBLE_EQ(schedule.T_cur(), c.t_cur) << "epoch " << c.epoch;
    EXPECT_NEAR(opt.lr(), lr_at(c.t_cur, static_cast<double>(c.t_i)), 1e-12) << "epoch " << c.epoch;
  }
  EXPECT_EQ(schedule.last_epoch(), 2);
  schedule.step();  // T_cur 1.5 of 4
  EXPECT_NEAR(opt.lr(), lr_at(1.5, 4), 1e-12);
  EXPECT_EQ(schedule.last_epoch(), 3);
  // T_mult = 1: equal cycles of 3.
  optim::CosineAnnealingWarmRestarts equal(opt, 3);
  equal.step(7.5);
  EXPECT_EQ(equal.T_i(), 3);
  EXPECT_DOUBLE_EQ(equal.T_cur(), 1.5);
}

// base 0.1, max 1.0, 2 steps up and 4 down (a cycle of 6):
//   0.1, 0.55, 1.0, 0.775, 0.55, 0.325, then 0.1 again. triangular2 halves the second cycle's
//   height: its peak (step 8) is 0.1 + 0.9 / 2; exp_range scales by gamma^step: 0.1 + 0.9 * 0.81 at 2.
TEST(CyclicLR, TriangularCyclesAndTheirScalings) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.5));
  optim::CyclicLR schedule(opt, 0.1, 1.0, 2, 4);
  expect_near(rates(opt, schedule, 8), {0.1, 0.55, 1.0, 0.775, 0.55, 0.325, 0.1, 0.55, 1.0});

  optim::SGD opt2({param()}, optim::SGDOptions(0.5));
  optim::CyclicLR halving(opt2, 0.1, 1.0, 2, 4, "triangular2");
  EXPECT_NEAR(rates(opt2, halving, 8).back(), 0.55, 1e-12);

  optim::SGD opt3({param()}, optim::SGDOptions(0.5));
  optim::CyclicLR shrinking(opt3, 0.1, 1.0, 2, std::nullopt, "exp_range", 0.9);
  EXPECT_NEAR(rates(opt3, shrinking, 2).back(), 0.1 + 0.9 * 0.81, 1e-12);

  // A scale of one's own, by cycle: 1/cycle.
  optim::SGD opt4({param()}, optim::SGDOptions(0.5));
  optim::CyclicLR custom(opt4, 0.1, 1.0, 2, 4, [](double cycle) { return 1 / cycle; });
  EXPECT_NEAR(rates(opt4, custom, 8).back(), 0.55, 1e-12);
}

TEST(LRSchedulersMore, BadArgumentsSayWhatWasExpected) {
  Tensor a = param(), b = param();
  optim::SGD opt({optim::ParamGroup({a}), optim::ParamGroup({b})}, optim::SGDOptions(0.1));
  auto one = [](int64_t) { return 1.0; };
  expect_error([&] { optim::LambdaLR(opt, {one, one, one}); }, {"LambdaLR", "2 parameter group", "got 3"});
  expect_error([&] { optim::LambdaLR(opt, optim::LRLambda()); }, {"LambdaLR", "empty"});
  expect_error([&] { optim::LambdaLR(opt, [](int64_t) { return std::nan(""); }); }, {"lr_lambda(0)", "finite"});
  expect_error([&] { optim::ConstantLR(opt, 0.0); }, {"ConstantLR", "0 < factor <= 1", "got 0"});
  expect_error([&] { optim::PolynomialLR(opt, 0); }, {"PolynomialLR", "total_iters > 0"});
  expect_error([&] { optim::CosineAnnealingWarmRestarts(opt, 0); }, {"T_0 > 0"});
  expect_error([&] { optim::CosineAnnealingWarmRestarts(opt, 2, 0); }, {"T_mult >= 1"});
  optim::CosineAnnealingWarmRestarts restarts(opt, 2);
  expect_error([&] { restarts.step(-1.0); }, {"non-negative epoch", "-1"});
  expect_error([&] { optim::CyclicLR(opt, 0.1, 1.0, 2, 4, "sawtooth"); }, {"CyclicLR", "triangular2", "sawtooth"});
  expect_error([&] { optim::CyclicLR(opt, 0.1, 1.0, 0); }, {"step_size_up and step_size_down > 0"});
}

}  // namespace minidl::lr_scheduler_more_test
