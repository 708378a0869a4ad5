// Schedules that compose, as PyTorch's chainable ones: two stepped together, ChainedScheduler,
// SequentialLR, a rate set by hand, and what a bad chain is told. The expected values are PyTorch's,
// worked out by hand from its chainable get_lr() (torch/optim/lr_scheduler.py); each test says how.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "minidl.h"
#include "optim/optim.h"
#include "test_util.h"

namespace minidl::lr_scheduler_test {

namespace {

Tensor param() { return Tensor::from_vector<double>({1}).requires_grad_(); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "entry " << i;
}

// The rate after construction, then after each of `steps` calls to step().
std::vector<double> rates(optim::Optimizer& opt, optim::LRScheduler& schedule, int steps) {
  std::vector<double> seen{opt.lr()};
  for (int i = 0; i < steps; ++i) {
    schedule.step();
    seen.push_back(opt.lr());
  }
  return seen;
}

// PyTorch:
//   opt = SGD([p], lr=0.1)
//   warmup = LinearLR(opt, start_factor=0.5, total_iters=2)
//   decay = ExponentialLR(opt, gamma=0.5)
// LinearLR's constructor multiplies lr by 0.5; its step to epoch e multiplies by
// 1 + (1 - 0.5) / (2 * 0.5 + (e - 1) * (1 - 0.5)): 1.5 at e=1, 4/3 at e=2, 1 after. ExponentialLR's
// constructor leaves lr, and each step multiplies by 0.5. So lr = 0.1 * factor(e) * 0.5^e:
//   0.05, 0.075 * 0.5 = 0.0375, 0.05 * 0.25 = 0.025, 0.0125, 0.00625.
const std::vector<double> kWarmupThenDecay{0.05, 0.0375, 0.025, 0.0125, 0.00625};

}  // namespace

TEST(ChainableLR, WarmupAndDecaySteppedTogetherMultiply) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  optim::LinearLR warmup(opt, 0.5, 1.0, 2);
  optim::ExponentialLR decay(opt, 0.5);
  std::vector<double> seen{opt.lr()};
  for (int e = 1; e <= 4; ++e) {
    warmup.step();
    decay.step();
    seen.push_back(opt.lr());
  }
  expect_near(seen, kWarmupThenDecay);
  // Both take the group's initial_lr as their base, not the 0.05 the warm-up had left (PyTorch's base_lrs).
  EXPECT_EQ(decay.base_lrs(), std::vector<double>{0.1});
  EXPECT_EQ(warmup.last_epoch(), 4);
}

TEST(ChainableLR, ChainedSchedulerStepsEachInOrder) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  // PyTorch: ChainedScheduler([LinearLR(opt, 0.5, total_iters=2), ExponentialLR(opt, 0.5)]) steps
  // both in turn: the sequence above.
  optim::ChainedScheduler chain({std::make_shared<optim::LinearLR>(opt, 0.5, 1.0, 2),
                                 std::make_shared<optim::ExponentialLR>(opt, 0.5)});
  expect_near(rates(opt, chain, 4), kWarmupThenDecay);
  expect_near(chain.get_last_lr(), {0.00625});
}

TEST(ChainableLR, SequentialLRWarmsUpThenAnneals) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  auto warmup = std::make_shared<optim::LinearLR>(opt, 0.5, 1.0, 2);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, /*T_max=*/4, /*eta_min=*/0.01);
  optim::SequentialLR schedule(opt, {warmup, cosine}, /*milestones=*/{2});
  // PyTorch: SequentialLR(opt, [warmup, cosine], milestones=[2]). Its constructor sets lr back to
  // initial_lr 0.1, undoes both schedules' initial steps and takes the warm-up's again: 0.05. Epoch 1
  // is the warm-up's: 0.05 * 1.5 = 0.075. At epoch 2 the cosine restarts at its epoch 0 from its
  // closed form, 0.01 + (0.1 - 0.01) * (1 + cos(0)) / 2 = 0.1; its recursive steps then follow
  // cosine(t) = 0.01 + 0.09 * (1 + cos(pi * t / 4)) / 2, through the trough at t = 4 and, at t = 5,
  // the branch that adds 0.09 * (1 - cos(pi / 4)) / 2.
  auto cosine_at = [](int t) { return 0.01 + 0.09 * (1 + std::cos(std::numbers::pi * t / 4)) / 2; };
  std::vector<double> want{0.05, 0.075};
  for (int t = 0; t <= 8; ++t) want.push_back(cosine_at(t));
  expect_near(rates(opt, schedule, 10), want);
  EXPECT_EQ(schedule.last_epoch(), 10);
  EXPECT_EQ(cosine->last_epoch(), 8);
  expect_near(schedule.get_last_lr(), {want.back()});
}

TEST(ChainableLR, RateSetByHandIsScaledFrom) {
  Tensor p = param();
  // PyTorch's StepLR.get_lr: group["lr"] * gamma at every step_size-th epoch, group["lr"] otherwise.
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::StepLR step(opt, /*step_size=*/2, /*gamma=*/0.5);
  step.step();  // epoch 1: 1
  opt.param_groups()[0].lr = 0.3;
  expect_near(step.get_last_lr(), {1.0});  // what the schedule wrote, as PyTorch's _last_lr
  step.step();  // epoch 2: 0.3 * 0.5
  EXPECT_NEAR(opt.lr(), 0.15, 1e-12);
  step.step();  // epoch 3: unchanged
  step.step();  // epoch 4: 0.15 * 0.5
  EXPECT_NEAR(opt.lr(), 0.075, 1e-12);

  // PyTorch's ExponentialLR.get_lr: group["lr"] * gamma.
  optim::SGD opt2({p}, optim::SGDOptions(2.0));
  optim::ExponentialLR exp(opt2, 0.5);
  exp.step();  // 1
  opt2.param_groups()[0].lr = 0.8;
  exp.step();
  EXPECT_NEAR(opt2.lr(), 0.4, 1e-12);
  exp.step();
  EXPECT_NEAR(opt2.lr(), 0.2, 1e-12);
  expect_near(exp.get_last_lr(), {0.2});
}

TEST(ChainableLR, BadChainsSayWhatWasExpected) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  optim::SGD other({p}, optim::SGDOptions(0.1));
  auto warmup = std::make_shared<optim::LinearLR>(opt, 0.5, 1.0, 2);
  auto decay = std::make_shared<optim::ExponentialLR>(opt, 0.5);
  auto elsewhere = std::make_shared<optim::ExponentialLR>(other, 0.5);

  minidl::testing::expect_error([&] { optim::SequentialLR(opt, {warmup, decay}, {}); },
                        {"SequentialLR", "one milestone fewer than schedules, 1 for 2 schedules, got 0"});
  minidl::testing::expect_error([&] { optim::SequentialLR(opt, {warmup, decay}, {2, 4}); },
                        {"SequentialLR", "1 for 2 schedules, got 2"});
  minidl::testing::expect_error([&] { optim::SequentialLR(opt, {warmup, elsewhere}, {2}); },
                        {"SequentialLR", "same optimizer", "index 1 acts on another"});
  minidl::testing::expect_error([&] { optim::SequentialLR(other, {warmup}, {}); },
                        {"SequentialLR", "index 0 acts on another"});
  minidl::testing::expect_error([&] { optim::SequentialLR(opt, {warmup, decay, decay}, {3, 3}); },
                        {"SequentialLR", "milestones > 0 and increasing, got 3 at index 1"});
  minidl::testing::expect_error([&] { optim::SequentialLR(opt, {}, {}); }, {"SequentialLR", "at least one schedule"});
  minidl::testing::expect_error([&] { optim::ChainedScheduler({warmup, elsewhere}); },
                        {"ChainedScheduler", "same optimizer", "index 1 acts on another"});
  minidl::testing::expect_error([&] { optim::ChainedScheduler({}); }, {"ChainedScheduler", "at least one schedule"});
  // None of these touched the rates: still the warm-up's 0.05.
  EXPECT_NEAR(opt.lr(), 0.05, 1e-12);
}

}  // namespace minidl::lr_scheduler_test
