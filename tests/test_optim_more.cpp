// RMSprop, Adagrad and Adadelta against their update rules written out in doubles, add_param_group,
// and save/load of optimizers, modules and tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_util.h"

namespace minidl::optim_more_test {

using minidl::testing::expect_error;

namespace {

const std::vector<double> kStart{0.5, -1.5, 2.0, 0.25};
const std::vector<double> kTarget{1.0, 1.0, -1.0, 0.0};

// Steps `optimizer` (made over p) 6 times on loss 0.5 * sum((p - target)^2), whose gradient is p - target.
std::vector<double> run(const std::function<std::unique_ptr<optim::Optimizer>(Tensor&)>& make) {
  Tensor p = Tensor::from_vector(kStart).requires_grad_();
  Tensor target = Tensor::from_vector(kTarget);
  auto optimizer = make(p);
  for (int step = 0; step < 6; ++step) {
    optimizer->zero_grad();
    Tensor d = p - target;
    (sum(d * d) * 0.5).backward();
    optimizer->step();
  }
  return p.to_vector<double>();
}

// The reference: `update(p, g, slot)` applied 6 times per element, g = p - target.
template <class Update>
std::vector<double> reference(Update update) {
  std::vector<double> out;
  for (size_t i = 0; i < kStart.size(); ++i) {
    double p = kStart[i];
    double s[3] = {0, 0, 0};
    for (int step = 1; step <= 6; ++step) update(p, p - kTarget[i], s, step);
    out.push_back(p);
  }
  return out;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
}

}  // namespace

TEST(OptimMore, RMSpropFollowsItsUpdateRule) {
  const double lr = 0.01, alpha = 0.9, eps = 1e-8, wd = 0.1, momentum = 0.5;
  expect_near(run([&](Tensor& p) {
                return std::make_unique<optim::RMSprop>(
                    std::vector<Tensor>{p},
                    optim::RMSpropOptions(lr).alpha(alpha).weight_decay(wd).momentum(momentum).centered(true));
              }),
              reference([&](double& p, double g, double* s, int) {
                g += wd * p;
                s[0] = alpha * s[0] + (1 - alpha) * g * g;  // square_avg
                s[1] = alpha * s[1] + (1 - alpha) * g;      // grad_avg
                const double avg = std::sqrt(s[0] - s[1] * s[1]) + eps;
                s[2] = momentum * s[2] + g / avg;
                p -= lr * s[2];
              }));
  // Plain: no momentum, not centered, PyTorch's defaults.
  expect_near(run([](Tensor& p) { return std::make_unique<optim::RMSprop>(std::vector<Tensor>{p}); }),
              reference([](double& p, double g, double* s, int) {
                s[0] = 0.99 * s[0] + 0.01 * g * g;
                p -= 0.01 * g / (std::sqrt(s[0]) + 1e-8);
              }));
}

TEST(OptimMore, AdagradFollowsItsUpdateRule) {
  const double lr = 0.1, decay = 0.05, wd = 0.01, init = 0.1;
  expect_near(run([&](Tensor& p) {
                return std::make_unique<optim::Adagrad>(
                    std::vector<Tensor>{p},
                    optim::AdagradOptions(lr).lr_decay(decay).weight_decay(wd).initial_accumulator_value(init));
              }),
              reference([&](double& p, double g, double* s, int step) {
                if (step == 1) s[0] = init;
                g += wd * p;
                s[0] += g * g;
                p -= lr / (1 + (step - 1) * decay) * g / (std::sqrt(s[0]) + 1e-10);
              }));
}

TEST(OptimMore, AdadeltaFollowsItsUpdateRule) {
  const double lr = 0.5, rho = 0.8, eps = 1e-6, wd = 0.05;
  expect_near(run([&](Tensor& p) {
                return std::make_unique<optim::Adadelta>(std::vector<Tensor>{p},
                                                         optim::AdadeltaOptions(lr).rho(rho).weight_decay(wd));
              }),
              reference([&](double& p, double g, double* s, int) {
                g += wd * p;
                s[0] = rho * s[0] + (1 - rho) * g * g;
                const double delta = std::sqrt(s[1] + eps) / std::sqrt(s[0] + eps) * g;
                s[1] = rho * s[1] + (1 - rho) * delta * delta;
                p -= lr * delta;
              }));
}

TEST(OptimMore, AddParamGroupTrainsTheNewParametersWithTheirOwnRate) {
  Tensor a = Tensor::from_vector<double>({1.0}).requires_grad_();
  Tensor b = Tensor::from_vector<double>({1.0}).requires_grad_();
  Tensor c = Tensor::from_vector<double>({1.0}).requires_grad_();
  optim::SGD sgd({a}, optim::SGDOptions(0.1).momentum(0.9));
  sgd.add_param_group({{b}, 0.5});
  sgd.add_param_group(optim::ParamGroup({c}));  // the optimizer's rate
  ASSERT_EQ(sgd.param_groups().size(), 3u);
  EXPECT_DOUBLE_EQ(sgd.lr(2), 0.1);
  (a + b + c).sum().backward();
  sgd.step();
  EXPECT_DOUBLE_EQ(a.item<double>(), 0.9);
  EXPECT_DOUBLE_EQ(b.item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(c.item<double>(), 0.9);
  expect_error([&] { sgd.add_param_group({{a}}); }, {"more than one parameter group"});
  optim::Adam adam({a});
  adam.add_param_group({{b}, 0.01});
  (a * b).sum().backward();
  adam.step();  // the new group has state
  EXPECT_EQ(adam.state_dict().count("state.1.exp_avg"), 1u);
}

TEST(OptimMore, AdamTakesLibtorchsBetasTuple) {
  Tensor p = zeros({2}).requires_grad_();
  optim::Adam adam({p}, optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.5)));
  EXPECT_EQ(adam.options().betas().first, 0.5);
  EXPECT_EQ(adam.options().betas().second, 0.5);
}

TEST(OptimMore, SaveAndLoadModulesOptimizersAndTensors) {
  const auto dir = std::filesystem::temp_directory_path() / "minidl_optim_more";
  std::filesystem::create_directories(dir);
  manual_seed(1);
  nn::Linear fc(3, 2);
  optim::RMSprop opt(fc->parameters(), optim::RMSpropOptions(0.01).momentum(0.9));
  fc(ones({4, 3})).sum().backward();
  opt.step();
  save(fc, (dir / "fc.safetensors").string());
  save(opt, (dir / "opt.safetensors").string());
  nn::Linear other(3, 2);
  optim::RMSprop other_opt(other->parameters(), optim::RMSpropOptions(0.01).momentum(0.9));
  load(other, (dir / "fc.safetensors").string());
  load(other_opt, (dir / "opt.safetensors").string());
  EXPECT_EQ(other->weight.to_vector<float>(), fc->weight.to_vector<float>());
  // Both optimizers take the same next step from the same state.
  fc->zero_grad();
  other->zero_grad();
  fc(ones({4, 3})).sum().backward();
  other(ones({4, 3})).sum().backward();
  opt.step();
  other_opt.step();
  EXPECT_EQ(other->weight.to_vector<float>(), fc->weight.to_vector<float>());

  Tensor x = arange(0.0, 6.0).reshape({2, 3});
  save(x, (dir / "x.safetensors").string());
  Tensor y;
  load(y, (dir / "x.safetensors").string());
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  save(std::vector<Tensor>{x, ones({1})}, str((dir / "list").string(), ".safetensors"));
  std::vector<Tensor> list;
  load(list, (dir / "list.safetensors").string());
  ASSERT_EQ(list.size(), 2u);
  expect_error([&] { load(y, (dir / "opt.safetensors").string()); }, {"holds a saved optimizer", "a tensor"});
  std::filesystem::remove_all(dir);
}

}  // namespace minidl::optim_more_test
