// Checkpoints: model and optimizer round trips (bit-identical outputs and next steps), refusing a
// checkpoint of another model or optimizer without changing anything, and a resumed training run
// that matches an uninterrupted one loss for loss.
#include <gtest/gtest.h>

#include "data/dataloader.h"
#include "test_file_util.h"
#include "test_util.h"

namespace minidl::checkpoint_test {

using namespace minidl::testing;

class Checkpoint : public TempFolderTest {};

// ---- models and optimizers ----

TEST_F(Checkpoint, SaveThenLoadGivesBitIdenticalOutputs) {
  manual_seed(5);
  nn::Sequential model = small_model();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  Tensor x = randn({16, 6});
  opt.zero_grad();
  model(x).sum().backward();  // a training step moves the BatchNorm buffers too
  opt.step();
  nn::save(*model, path("m.safetensors"), {{"note", "after one step"}});

  manual_seed(6);
  nn::Sequential loaded = small_model();
  EXPECT_NE(snapshot(*loaded), snapshot(*model));
  safetensors::Metadata meta = nn::load(*loaded, path("m.safetensors"));
  EXPECT_EQ(meta.at("note"), "after one step");
  EXPECT_EQ(meta.at("minidl.format"), "1");
  EXPECT_EQ(snapshot(*loaded), snapshot(*model));
  model->eval();
  loaded->eval();
  EXPECT_EQ(float32_values(model(x)), float32_values(loaded(x)));
  expect_error([&] { optim::load_checkpoint(path("m.safetensors"), *loaded, opt); },
               {"not a minidl checkpoint", "nn::load"});
}

namespace {

// Two steps, a checkpoint, then one more step on each of the original and the restored copy: the
// parameters must agree bit for bit, which they do only if the optimizer state came back whole.
template <class MakeOptimizer>
void expect_identical_next_step(const std::string& file, const char* buffer_name, MakeOptimizer make) {
  manual_seed(7);
  nn::Sequential model = small_model();
  model->eval();  // no dropout: the step depends on the state only
  auto opt = make(model->parameters());
  Tensor x = randn({8, 6});
  auto step = [&](nn::Sequential& m, optim::Optimizer& o) {
    o.zero_grad();
    Tensor y = m(x);
    (y * y).mean().backward();
    o.step();
  };
  step(model, *opt);
  step(model, *opt);
  opt->param_groups()[0].lr = 0.0123;  // as a schedule would have left it
  optim::save_checkpoint(file, *model, *opt, {2, 2});
  const Snapshot saved = snapshot(*opt);

  manual_seed(8);
  nn::Sequential restored = small_model();
  restored->eval();
  auto restored_opt = make(restored->parameters());
  optim::TrainingPosition at = optim::load_checkpoint(file, *restored, *restored_opt);
  EXPECT_EQ(at.epoch, 2);
  EXPECT_EQ(at.step, 2);
  EXPECT_EQ(restored_opt->lr(), 0.0123);
  EXPECT_EQ(snapshot(*restored_opt), snapshot(*opt));
  step(model, *opt);
  step(restored, *restored_opt);
  EXPECT_EQ(snapshot(*restored), snapshot(*model));

  // Loading into an optimizer that has state writes into its buffers in place, so a captured CUDA
  // graph that reads them would see the loaded values.
  const std::string key = std::string("state.0.") + buffer_name;
  const void* buffer = opt->state_dict().at(key).raw_data();
  optim::load_checkpoint(file, *model, *opt);
  EXPECT_EQ(snapshot(*opt), saved);
  EXPECT_EQ(opt->state_dict().at(key).raw_data(), buffer);
}

}  // namespace

TEST_F(Checkpoint, SgdMomentumNextStepIsIdentical) {
  expect_identical_next_step(path("sgd.safetensors"), "momentum_buffer", [](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
  });
}

TEST_F(Checkpoint, AdamNextStepIsIdentical) {
  expect_identical_next_step(path("adam.safetensors"), "exp_avg", [](std::vector<Tensor> p) {
    return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-2));
  });
  expect_identical_next_step(path("adamw.safetensors"), "exp_avg_sq",
                             [](std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(std::move(p)); });
}

TEST_F(Checkpoint, OptimizerStateHasPyTorchsNamesAndRefusesAMismatch) {
  Tensor a = Tensor::from_vector<double>({1, 2}).requires_grad_(),
         b = Tensor::from_vector<double>({3}).requires_grad_();
  optim::Adam adam(std::vector<optim::ParamGroup>{optim::ParamGroup({a}, 0.1), optim::ParamGroup({b})},
                   optim::AdamOptions(0.01));
  a.set_grad(Tensor::from_vector<double>({1, 1}));
  adam.step();  // only `a` has a gradient: `b` has no state yet
  std::map<std::string, Tensor> state = adam.state_dict();
  std::vector<std::string> names;
  for (auto& entry : state) names.push_back(entry.first);
  EXPECT_EQ(names, (std::vector<std::string>{"param_groups.0.lr", "param_groups.0.params", "param_groups.1.lr",
                                             "param_groups.1.params", "state.0.exp_avg", "state.0.exp_avg_sq",
                                             "state.0.step"}));
  EXPECT_EQ(state["state.0.step"].item<int64_t>(), 1);
  EXPECT_EQ(state["param_groups.1.params"].to_vector<int64_t>(), (std::vector<int64_t>{1}));

  optim::SGD sgd(std::vector<optim::ParamGroup>{optim::ParamGroup({a}, 0.1), optim::ParamGroup({b})},
                 optim::SGDOptions(0.01).momentum(0.9));
  const Snapshot before = snapshot(sgd);
  expect_error([&] { sgd.load_state_dict(state); }, {"SGD::load_state_dict", "unexpected \"state.0.exp_avg\""});
  std::map<std::string, Tensor> partial = state;
  partial.erase("state.0.exp_avg_sq");
  expect_error([&] { adam.load_state_dict(partial); }, {"missing \"state.0.exp_avg_sq\""});
  std::map<std::string, Tensor> wrong = state;
  wrong["state.0.exp_avg"] = zeros({3}, kFloat64);
  expect_error([&] { adam.load_state_dict(wrong); },
               {"\"state.0.exp_avg\" is float64 of shape [3]", "expected float64 of shape [2]"});
  optim::Adam one_group(std::vector<Tensor>{a, b});
  expect_error([&] { one_group.load_state_dict(state); },
               {"\"param_groups.0.params\" is int64 of shape [1], expected int64 of shape [2]"});
  EXPECT_EQ(snapshot(sgd), before);
}

TEST_F(Checkpoint, ACheckpointOfAnotherModelOrOptimizerChangesNothing) {
  manual_seed(9);
  nn::Sequential model = small_model();
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  sgd.zero_grad();
  model(randn({4, 6})).sum().backward();
  sgd.step();
  optim::save_checkpoint(path("sgd.safetensors"), *model, sgd, {1, 1});

  nn::Sequential other = small_model();
  optim::Adam adam(other->parameters());
  const Snapshot model_before = snapshot(*other), adam_before = snapshot(adam);
  const Generator::State rng_before = default_generator().state();
  // The model part fits; the optimizer part does not: the model must not have been loaded either.
  expect_error([&] { optim::load_checkpoint(path("sgd.safetensors"), *other, adam); },
               {"sgd.safetensors", "Adam::load_state_dict", "momentum_buffer"});
  EXPECT_EQ(snapshot(*other), model_before);
  EXPECT_EQ(snapshot(adam), adam_before);
  EXPECT_EQ(default_generator().state().engine, rng_before.engine);

  nn::Linear linear(6, 3);
  optim::SGD linear_sgd(linear->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  expect_error([&] { optim::load_checkpoint(path("sgd.safetensors"), *linear, linear_sgd); },
               {"sgd.safetensors (model)", "missing \"weight\"", "a checkpoint of another model?"});
}

// ---- resuming a run ----

namespace {

struct TrainingRun {
  nn::Sequential model = small_model();
  std::unique_ptr<optim::Adam> opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(5e-3));
};

// Seeded training on random data, with shuffling and dropout: both the data order and the
// generator's stream must continue where they stopped.
std::vector<float> train(TrainingRun& run, data::DataLoader& loader, int first_epoch, int last_epoch) {
  std::vector<float> losses;
  for (int epoch = first_epoch; epoch <= last_epoch; ++epoch) {
    for (data::Batch& batch : loader) {
      run.opt->zero_grad();
      Tensor loss = nn::functional::cross_entropy(run.model(batch.data), batch.target);
      loss.backward();
      run.opt->step();
      losses.push_back(loss.item<float>());
    }
  }
  return losses;
}

}  // namespace

TEST_F(Checkpoint, AResumedRunMatchesAnUninterruptedOne) {
  manual_seed(11);
  auto dataset = std::make_shared<data::TensorDataset>(randn({40, 6}), argmax(randn({40, 3}), 1));
  auto options = data::DataLoaderOptions().batch_size(8).shuffle(true).seed(3);

  manual_seed(12);
  TrainingRun whole;
  data::DataLoader whole_loader(dataset, options);
  const std::vector<float> expected = train(whole, whole_loader, 1, 3);

  manual_seed(12);
  TrainingRun first;
  data::DataLoader first_loader(dataset, options);
  std::vector<float> losses = train(first, first_loader, 1, 1);
  optim::save_checkpoint(path("run.safetensors"), *first.model, *first.opt, {1, first_loader.size()});

  // A fresh process: other initial weights, another generator state.
  auto resume = [&](bool restore_rng) {
    manual_seed(99);
    TrainingRun second;
    const Generator::State unrelated = default_generator().state();
    optim::TrainingPosition at = optim::load_checkpoint(path("run.safetensors"), *second.model, *second.opt);
    if (!restore_rng) default_generator().set_state(unrelated);
    data::DataLoader loader(dataset, options);
    loader.set_epoch(at.epoch);
    return train(second, loader, static_cast<int>(at.epoch) + 1, 3);
  };
  std::vector<float> rest = resume(true);
  losses.insert(losses.end(), rest.begin(), rest.end());
  EXPECT_EQ(losses, expected);

  // The control: the same resume with another dropout stream diverges, so the test can fail.
  std::vector<float> diverged = resume(false);
  EXPECT_NE(diverged, std::vector<float>(expected.begin() + 5, expected.end()));
}

}  // namespace minidl::checkpoint_test
