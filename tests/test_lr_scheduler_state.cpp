// A schedule saved mid-run and loaded into a freshly built one continues as if never stopped: the
// rates after the load equal those of the run that went on. And a state of another schedule, of
// other groups or with impossible values is refused with the reason, changing nothing.
#include <gtest/gtest.h>

#include <memory>

#include "minidl.h"
#include "optim/optim.h"
#include "test_file_util.h"
#include "test_util.h"

namespace minidl::lr_scheduler_state_test {

using minidl::testing::expect_error;

namespace {

class SchedulerState : public minidl::testing::TempFolderTest {};

Tensor param() { return Tensor::from_vector<double>({1}).requires_grad_(); }

// A warm-up, then cosine restarts whose cycle doubles: a schedule made of schedules with counters of
// its own.
struct TrainingRun {
  Tensor p = param();
  optim::SGD opt{{p}, optim::SGDOptions(0.1)};
  std::shared_ptr<optim::LinearLR> warmup = std::make_shared<optim::LinearLR>(opt, 0.25, 1.0, 3);
  std::shared_ptr<optim::CosineAnnealingWarmRestarts> restarts =
      std::make_shared<optim::CosineAnnealingWarmRestarts>(opt, 2, 2, 0.01);
  optim::SequentialLR schedule{opt, {warmup, restarts}, {3}};

  std::vector<double> steps(int n) {
    std::vector<double> lrs;
    for (int i = 0; i < n; ++i) {
      schedule.step();
      lrs.push_back(opt.lr());
    }
    return lrs;
  }
};

}  // namespace

TEST_F(SchedulerState, ASavedScheduleResumesWhereItStood) {
  TrainingRun through;
  TrainingRun stopped;
  EXPECT_EQ(through.steps(5), stopped.steps(5));
  save(stopped.opt, path("optimizer.safetensors"));
  save(stopped.schedule, path("schedule.safetensors"));

  TrainingRun resumed;  // built afresh: its constructors took their first steps
  load(resumed.opt, path("optimizer.safetensors"));
  load(resumed.schedule, path("schedule.safetensors"));
  EXPECT_EQ(resumed.schedule.last_epoch(), 5);
  EXPECT_EQ(resumed.restarts->T_i(), stopped.restarts->T_i());
  EXPECT_EQ(resumed.restarts->T_cur(), stopped.restarts->T_cur());
  EXPECT_EQ(resumed.schedule.get_last_lr(), stopped.schedule.get_last_lr());
  // Past the restart at 3 + 2 and the next at 3 + 6.
  EXPECT_EQ(resumed.steps(8), through.steps(8));
}

TEST_F(SchedulerState, APlateauResumesItsCounters) {
  Tensor p = param(), q = param();
  optim::SGD a({p}, optim::SGDOptions(1.0)), b({q}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateau through(a, {.factor = 0.5, .patience = 1, .cooldown = 1});
  optim::ReduceLROnPlateau stopped(b, {.factor = 0.5, .patience = 1, .cooldown = 1});
  for (double metric : {1.0, 0.9, 0.95, 0.97}) {
    through.step(metric);
    stopped.step(metric);
  }
  save(b, path("optimizer.safetensors"));
  save(stopped, path("plateau.safetensors"));
  Tensor r = param();
  optim::SGD c({r}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateau resumed(c, {.factor = 0.5, .patience = 1, .cooldown = 1});
  load(c, path("optimizer.safetensors"));
  load(resumed, path("plateau.safetensors"));
  EXPECT_EQ(resumed.num_bad_epochs(), through.num_bad_epochs());
  for (double metric : {0.99, 0.98, 1.2, 0.5, 0.6, 0.7}) {
    through.step(metric);
    resumed.step(metric);
    EXPECT_EQ(c.lr(), a.lr()) << "after metric " << metric;
  }
  EXPECT_LT(a.lr(), 0.5);  // it did lower the rate more than once
}

TEST_F(SchedulerState, AStateOfAnotherScheduleIsRefused) {
  Tensor p = param();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  optim::StepLR step(opt, 2);
  save(step, path("step.safetensors"));
  optim::CosineAnnealingLR cosine(opt, 4);
  expect_error([&] { load(cosine, path("step.safetensors")); },
               {"holds the state of StepLR", "a CosineAnnealingLR was to be loaded"});
  save(opt, path("optimizer.safetensors"));
  expect_error([&] { load(step, path("optimizer.safetensors")); },
               {"holds a saved optimizer", "a learning-rate schedule was to be loaded"});

  // By state_dict: a missing entry, one of another group count, an entry of another schedule.
  auto state = step.state_dict();
  state.erase("last_lr");
  expect_error([&] { step.load_state_dict(state); }, {"StepLR::load_state_dict", "missing \"last_lr\""});
  state = step.state_dict();
  state["base_lrs"] = Tensor::from_vector<double>({0.1, 0.1}, {2});
  expect_error([&] { step.load_state_dict(state); }, {"\"base_lrs\" is float64 of shape [2]", "of shape [1]"});
  state = step.state_dict();
  state["T_cur"] = scalar_tensor(0.0, kFloat64);
  expect_error([&] { step.load_state_dict(state); }, {"unexpected \"T_cur\""});
}

TEST_F(SchedulerState, ImpossibleValuesChangeNothing) {
  TrainingRun run;
  run.steps(4);
  auto state = run.schedule.state_dict();
  ASSERT_TRUE(state.count("schedulers.1.T_cur"));
  const int64_t epoch = run.schedule.last_epoch();
  const double t_cur = run.restarts->T_cur();
  auto bad = state;
  bad["schedulers.1.T_cur"] = scalar_tensor(7.0, kFloat64);  // past T_i (2)
  bad["last_epoch"] = scalar_tensor(1, kInt64);
  expect_error([&] { run.schedule.load_state_dict(bad); }, {"0 <= T_cur < T_i", "got T_cur 7"});
  EXPECT_EQ(run.schedule.last_epoch(), epoch);
  EXPECT_EQ(run.restarts->T_cur(), t_cur);
  bad = state;
  bad["last_lr"] = Tensor::from_vector<double>({std::nan("")}, {1});
  expect_error([&] { run.schedule.load_state_dict(bad); }, {"\"last_lr\" holds nan", "finite"});
  bad = state;
  bad["last_epoch"] = scalar_tensor(-5, kInt64);
  expect_error([&] { run.schedule.load_state_dict(bad); }, {"\"last_epoch\" is -5"});
}

}  // namespace minidl::lr_scheduler_state_test
