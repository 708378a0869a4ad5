// Weight tying: one tensor reached under two names (a parameter registered in two modules, or a
// module registered twice) is one parameter. It is listed and counted once, an optimizer steps it
// once with one set of state, and an optimizer given it twice refuses. state_dict keeps every name,
// as PyTorch's does, and loading copies into the tied tensor, so the tie survives a round trip.
#include <gtest/gtest.h>

#include "test_file_util.h"
#include "test_util.h"

namespace minidl::weight_tying_test {

using namespace minidl::testing;

namespace {

// y = x @ weight: the decoder of an autoencoder whose weight is the encoder's, [hidden, features].
struct TransposedLinearImpl : nn::Module {
  explicit TransposedLinearImpl(Tensor tied) { weight = register_parameter("weight", std::move(tied)); }
  Tensor forward(const Tensor& x) override { return matmul(x, weight); }
  Tensor weight;
};
MINIDL_MODULE(TransposedLinear);

// One tensor under two names, "encoder.weight" and "decoder.weight", as a language model ties its
// embedding to its output layer.
struct TiedAutoencoder : nn::Module {
  TiedAutoencoder()
      : encoder(register_module("encoder", nn::Linear(nn::LinearOptions(6, 3).bias(false)))),
        decoder(register_module("decoder", TransposedLinear(encoder->weight))) {}
  Tensor forward(const Tensor& x) override { return decoder(tanh(encoder(x))); }
  nn::Linear encoder;
  TransposedLinear decoder;
};

// The same computation with one weight used twice, listed once: autograd adds both uses' gradients
// into its .grad, which is the gradient a tied weight must be stepped by.
Tensor untied_reference_loss(const Tensor& weight, const Tensor& x) {
  return mse_loss(matmul(tanh(linear(x, weight)), weight), x);
}

// One module registered under two names (applied twice), and a BatchNorm registered twice for buffers.
struct SharedBlock : nn::Module {
  SharedBlock() : block(nn::Linear(4, 4)), norm(nn::BatchNorm1d(4)) {
    register_module("first", block);
    register_module("second", block);
    register_module("norm", norm);
    register_module("norm_again", norm);
  }
  Tensor forward(const Tensor& x) override { return norm(block(relu(block(x)))); }
  nn::Linear block;
  nn::BatchNorm1d norm;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (auto& [name, t] : named) out.push_back(name);
  return out;
}

std::vector<std::string> keys_of(const std::map<std::string, Tensor>& state) {
  std::vector<std::string> out;
  for (auto& [name, t] : state) out.push_back(name);
  return out;
}

std::vector<double> doubles(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

// Steps the tied model and an untied reference with the same optimizer kind, `steps` times, and
// expects the same weight: a tied weight stepped twice per step, or with two sets of state, differs.
template <class Make>
void expect_steps_like_untied_reference(Make make_optimizer, int steps) {
  manual_seed(3);
  TiedAutoencoder model;
  model.to(kFloat64);
  Tensor reference = model.encoder->weight.detach().clone().requires_grad_();
  auto optimizer = make_optimizer(model.parameters());
  auto reference_optimizer = make_optimizer(std::vector<Tensor>{reference});
  for (int step = 0; step < steps; ++step) {
    Tensor x = randn({5, 6}, kFloat64);
    optimizer.zero_grad();
    mse_loss(model.forward(x), x).backward();
    optimizer.step();
    reference_optimizer.zero_grad();
    untied_reference_loss(reference, x).backward();
    reference_optimizer.step();
  }
  const std::vector<double> got = doubles(model.encoder->weight), want = doubles(reference);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
  EXPECT_TRUE(model.decoder->weight.is_same(model.encoder->weight));
}

}  // namespace

TEST(WeightTying, TiedParameterIsListedAndCountedOnce) {
  TiedAutoencoder model;
  ASSERT_EQ(model.parameters().size(), 1u);
  EXPECT_TRUE(model.parameters()[0].is_same(model.encoder->weight));
  EXPECT_EQ(names_of(model.named_parameters()), (std::vector<std::string>{"encoder.weight"}));  // first name wins
  EXPECT_EQ(model.num_parameters(), 3 * 6);
}

TEST(WeightTying, SharedModuleIsListedOnceWithItsParametersAndBuffers) {
  SharedBlock model;
  EXPECT_EQ(names_of(model.named_parameters()),
            (std::vector<std::string>{"first.weight", "first.bias", "norm.weight", "norm.bias"}));
  EXPECT_EQ(model.parameters().size(), 4u);
  EXPECT_EQ(model.num_parameters(), (16 + 4) + (4 + 4));
  EXPECT_EQ(names_of(model.named_buffers()),
            (std::vector<std::string>{"norm.running_mean", "norm.running_var", "norm.num_batches_tracked"}));
  EXPECT_EQ(model.buffers().size(), 3u);
  auto module_names = [&](bool remove_duplicate) {
    std::vector<std::string> out;
    for (auto& [name, m] : model.named_modules(remove_duplicate)) out.push_back(name);
    return out;
  };
  EXPECT_EQ(module_names(true), (std::vector<std::string>{"first", "norm"}));
  EXPECT_EQ(module_names(false), (std::vector<std::string>{"first", "second", "norm", "norm_again"}));
  EXPECT_EQ(model.named_parameters(true, false).size(), 8u);
  EXPECT_EQ(model.named_buffers(true, false).size(), 6u);
}

TEST(WeightTying, LayerWeightTiedByRegisteringItAgain) {
  nn::Linear encoder(4, 4), decoder(4, 4);
  decoder->weight = decoder->register_parameter("weight", encoder->weight);
  nn::Sequential net(encoder, nn::ReLU(), decoder);
  EXPECT_EQ(names_of(decoder->named_parameters()), (std::vector<std::string>{"weight", "bias"}));  // replaced in place
  EXPECT_EQ(names_of(net->named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.bias"}));
  EXPECT_EQ(names_of(net->named_parameters(true, false)),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(net->num_parameters(), 16 + 4 + 4);

  optim::SGD optimizer(net->parameters(), optim::SGDOptions(0.1));
  mse_loss(net(randn({8, 4})), randn({8, 4})).backward();
  const std::vector<double> before = doubles(encoder->weight), grad = doubles(encoder->weight.grad());
  optimizer.step();
  const std::vector<double> after = doubles(decoder->weight);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i] - 0.1 * grad[i], 1e-6) << "element " << i;
}

TEST(WeightTying, SgdStepsATiedWeightOnce) {
  expect_steps_like_untied_reference([](std::vector<Tensor> params) { return optim::SGD(params, optim::SGDOptions(0.1)); },
                                     1);
}

TEST(WeightTying, SgdWithMomentumKeepsOneBufferPerTiedWeight) {
  expect_steps_like_untied_reference(
      [](std::vector<Tensor> params) { return optim::SGD(params, optim::SGDOptions(0.1).momentum(0.9)); }, 3);
}

TEST(WeightTying, AdamKeepsOneStateForATiedWeight) {
  expect_steps_like_untied_reference([](std::vector<Tensor> params) { return optim::Adam(params, optim::AdamOptions(0.01)); },
                                     3);
  TiedAutoencoder model;
  optim::Adam adam(model.parameters(), optim::AdamOptions(0.01));
  Tensor x = randn({5, 6});
  mse_loss(model.forward(x), x).backward();
  adam.step();
  EXPECT_EQ(keys_of(adam.state_dict()), (std::vector<std::string>{"param_groups.0.lr", "param_groups.0.params",
                                                                  "state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step"}));
}

TEST(WeightTying, SgdStepsAModuleRegisteredTwiceOnce) {
  SharedBlock model;
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(0.5));
  mse_loss(model.forward(randn({8, 4})), randn({8, 4})).backward();  // a sum would have no gradient through the norm
  Tensor weight = model.block->weight;
  const std::vector<double> before = doubles(weight), grad = doubles(weight.grad());
  optimizer.step();
  const std::vector<double> after = doubles(weight);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i] - 0.5 * grad[i], 1e-6) << "element " << i;
}

TEST(WeightTying, OptimizerRefusesATensorListedTwice) {
  Tensor w = randn({2, 3}).requires_grad_(), b = randn({3}).requires_grad_();
  expect_error([&] { optim::SGD(std::vector<Tensor>{w, b, w}, optim::SGDOptions(0.1)); },
               {"SGD", "parameter 2 of group 0", "float32 of shape [2, 3]", "same tensor as parameter 0 of group 0",
                "parameter group with duplicate parameters"});
  expect_error([&] { optim::Adam({optim::ParamGroup({b}), optim::ParamGroup({w, b})}, optim::AdamOptions()); },
               {"Adam", "parameter 1 of group 1", "parameter 0 of group 0", "more than one parameter group"});
  // A detached alias registered as a second weight: two tensors, one memory, two gradients.
  Tensor alias = w.detach().requires_grad_();
  expect_error([&] { optim::SGD(std::vector<Tensor>{w, alias}, optim::SGDOptions(0.1)); },
               {"parameter 1 of group 0 and parameter 0 of group 0", "same memory"});
  EXPECT_NO_THROW(optim::SGD(std::vector<Tensor>{w, b}, optim::SGDOptions(0.1)));
}

class WeightTyingFiles : public TempFolderTest {};

TEST_F(WeightTyingFiles, StateDictKeepsEveryNameAndLoadingKeepsTheTie) {
  manual_seed(1);
  TiedAutoencoder model;
  EXPECT_EQ(keys_of(model.state_dict()), (std::vector<std::string>{"decoder.weight", "encoder.weight"}));
  nn::save(model, path("tied.safetensors"));

  manual_seed(2);
  TiedAutoencoder loaded;
  Tensor tied = loaded.encoder->weight;
  nn::load(loaded, path("tied.safetensors"));
  EXPECT_EQ(snapshot(loaded), snapshot(model));
  EXPECT_TRUE(loaded.encoder->weight.is_same(tied));  // copied into, not replaced
  EXPECT_TRUE(loaded.decoder->weight.is_same(tied));
  EXPECT_EQ(loaded.parameters().size(), 1u);
}

TEST_F(WeightTyingFiles, CheckpointResumesATiedModelLikeAnUninterruptedRun) {
  manual_seed(4);
  TiedAutoencoder model;
  optim::Adam adam(model.parameters(), optim::AdamOptions(0.01));
  Tensor x = randn({5, 6});
  auto step = [&](TiedAutoencoder& m, optim::Adam& opt) {
    opt.zero_grad();
    mse_loss(m.forward(x), x).backward();
    opt.step();
  };
  step(model, adam);
  optim::save_checkpoint(path("run.safetensors"), model, adam, {1, 1});
  step(model, adam);

  manual_seed(5);
  TiedAutoencoder resumed;
  optim::Adam resumed_adam(resumed.parameters(), optim::AdamOptions(0.01));
  optim::load_checkpoint(path("run.safetensors"), resumed, resumed_adam);
  step(resumed, resumed_adam);
  EXPECT_EQ(snapshot(resumed), snapshot(model));
  EXPECT_EQ(snapshot(resumed_adam), snapshot(adam));
  EXPECT_TRUE(resumed.decoder->weight.is_same(resumed.encoder->weight));
}

}  // namespace minidl::weight_tying_test
