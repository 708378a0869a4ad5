// Adam's options beyond the defaults on the CPU: amsgrad and maximize against a hand-written
// reference of torch's update, a weight decay per parameter group, the skip on found_inf, the
// amsgrad state in state_dict, and cuda::GraphedStep's gradient clipping (eager here).
#include <gtest/gtest.h>

#include <cmath>

#include "minidl.h"
#include "nn/clip_grad.h"
#include "optim/optim.h"

namespace minidl::adam_variants_test {

namespace {

// torch.optim.Adam's single-tensor update, step by step, in float64.
struct Reference {
  double lr, b1, b2, eps, wd;
  bool decoupled, amsgrad, maximize;
  std::vector<double> m, v, v_max;
  int step = 0;
  void apply(std::vector<double>& p, const std::vector<double>& grad) {
    if (m.empty()) m = v = v_max = std::vector<double>(p.size(), 0.0);
    ++step;
    const double bias1 = 1 - std::pow(b1, step), bias2 = 1 - std::pow(b2, step);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = maximize ? -grad[i] : grad[i];
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      v_max[i] = std::max(v_max[i], v[i]);
      const double denom = std::sqrt(amsgrad ? v_max[i] : v[i]) / std::sqrt(bias2) + eps;
      p[i] -= lr / bias1 * m[i] / denom;
    }
  }
};

void expect_near_all(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "element " << i;
}

}  // namespace

TEST(AdamVariants, AmsgradAndMaximizeFollowTorchsUpdate) {
  for (bool decoupled : {false, true}) {
    for (bool amsgrad : {false, true}) {
      for (bool maximize : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "decoupled " << decoupled << " amsgrad " << amsgrad << " maximize " << maximize);
        manual_seed(81);
        Tensor p = randn({7}, kFloat64).requires_grad_(true);
        std::vector<double> expected = p.to_vector<double>();
        const auto options = optim::AdamOptions(0.1).betas({0.8, 0.9}).eps(1e-6).weight_decay(0.05).amsgrad(amsgrad).maximize(maximize);
        std::unique_ptr<optim::Adam> opt = decoupled ? std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, options)
                                                     : std::make_unique<optim::Adam>(std::vector<Tensor>{p}, options);
        Reference ref{0.1, 0.8, 0.9, 1e-6, 0.05, decoupled, amsgrad, maximize, {}, {}, {}};
        // Large gradients then small ones, so that amsgrad's maximum differs from exp_avg_sq.
        for (double scale : {3.0, 0.1, 0.1, 0.01}) {
          Tensor g = mul(randn({7}, kFloat64), scale);
          p.set_grad(g);
          opt->step();
          ref.apply(expected, g.to_vector<double>());
        }
        expect_near_all(p.to_vector<double>(), expected, 1e-13);
      }
    }
  }
}

TEST(AdamVariants, GroupWeightDecayOverridesTheOptions) {
  manual_seed(82);
  Tensor w = randn({3, 4}, kFloat64), b = randn({4}, kFloat64);
  Tensor w1 = w.clone().requires_grad_(true), b1 = b.clone().requires_grad_(true);
  Tensor w2 = w.clone().requires_grad_(true), b2 = b.clone().requires_grad_(true);
  const auto options = optim::AdamOptions(0.1).weight_decay(0.3);
  // One optimizer with a no-decay group at its own lr, against two optimizers with those settings.
  optim::AdamW grouped({optim::ParamGroup({w1}), optim::ParamGroup({b1}, 0.05, 0.0)}, options);
  optim::AdamW decayed(std::vector<Tensor>{w2}, options);
  optim::AdamW not_decayed(std::vector<Tensor>{b2}, optim::AdamOptions(0.05).weight_decay(0.0));
  for (int step = 0; step < 3; ++step) {
    Tensor gw = randn({3, 4}, kFloat64), gb = randn({4}, kFloat64);
    w1.set_grad(gw);
    w2.set_grad(gw.clone());
    b1.set_grad(gb);
    b2.set_grad(gb.clone());
    grouped.step();
    decayed.step();
    not_decayed.step();
  }
  EXPECT_EQ(w1.to_vector<double>(), w2.to_vector<double>());
  EXPECT_EQ(b1.to_vector<double>(), b2.to_vector<double>());
  EXPECT_NE(b1.to_vector<double>(), w1.to_vector<double>());
}

TEST(AdamVariants, OtherOptimizersRefuseAGroupWeightDecay) {
  Tensor p = zeros({2}).requires_grad_(true);
  try {
    optim::SGD sgd({optim::ParamGroup({p}, 0.1, 0.0)}, optim::SGDOptions(0.1));
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("weight_decay"), std::string::npos) << e.what();
  }
  EXPECT_THROW(optim::Adam({optim::ParamGroup({p}, 0.1, -1.0)}), std::exception);
}

// libtorch's AdamWOptions decays by 1e-2 unless told otherwise, through its builder methods too; a
// zero gradient leaves only the decay: p * (1 - lr * weight_decay).
TEST(AdamVariants, AdamWOptionsDecayByDefault) {
  EXPECT_EQ(optim::AdamWOptions().weight_decay(), 1e-2);
  EXPECT_EQ(optim::AdamWOptions(0.1).lr(), 0.1);
  EXPECT_EQ(optim::AdamOptions(0.1).weight_decay(), 0.0);
  Tensor a = ones({2}).requires_grad_(true), b = ones({2}).requires_grad_(true), c = ones({2}).requires_grad_(true);
  optim::AdamW with_defaults(std::vector<Tensor>{a}, optim::AdamWOptions(0.1).betas({0.5, 0.9}));
  optim::AdamW adam_options(std::vector<Tensor>{b}, optim::AdamOptions(0.1));
  optim::AdamW no_options(std::vector<Tensor>{c});
  for (Tensor* t : {&a, &b, &c}) t->set_grad(zeros({2}));
  with_defaults.step();
  adam_options.step();
  no_options.step();
  EXPECT_NEAR(a.to_vector<float>()[0], 1 - 0.1 * 1e-2, 1e-7);
  EXPECT_EQ(b.to_vector<float>()[0], 1.0f);
  EXPECT_NEAR(c.to_vector<float>()[0], 1 - 1e-3 * 1e-2, 1e-7);
}

TEST(AdamVariants, StepIfFiniteSkipsOnTheCpu) {
  Tensor p = ones({3}).requires_grad_(true);
  optim::Adam opt(std::vector<Tensor>{p}, optim::AdamOptions(0.1));
  p.set_grad(ones({3}));
  opt.step_if_finite(full({}, 1.0, kFloat32));
  EXPECT_EQ(p.to_vector<float>(), std::vector<float>(3, 1.0f));
  EXPECT_TRUE(opt.state_dict().count("state.0.step") == 0 || opt.state_dict().at("state.0.step").item<int64_t>() == 0);
  opt.step_if_finite(full({}, 0.0, kFloat32));
  EXPECT_NEAR(p.to_vector<float>()[0], 0.9f, 1e-6);
  EXPECT_EQ(opt.state_dict().at("state.0.step").item<int64_t>(), 1);
}

TEST(AdamVariants, AmsgradStateRoundTripsThroughStateDict) {
  manual_seed(83);
  const auto options = optim::AdamOptions(0.1).amsgrad(true);
  Tensor a = randn({5}, kFloat64).requires_grad_(true);
  optim::Adam first(std::vector<Tensor>{a}, options);
  std::vector<Tensor> grads;
  for (int i = 0; i < 4; ++i) grads.push_back(mul(randn({5}, kFloat64), i < 2 ? 2.0 : 0.1));
  for (int i = 0; i < 2; ++i) {
    a.set_grad(grads[i]);
    first.step();
  }
  auto state = first.state_dict();
  ASSERT_TRUE(state.count("state.0.max_exp_avg_sq"));
  EXPECT_EQ(state.at("state.0.step").item<int64_t>(), 2);
  Tensor b = a.detach().clone().requires_grad_(true);  // where `first` has taken it
  optim::Adam second(std::vector<Tensor>{b}, options);
  second.load_state_dict(state);
  for (int i = 2; i < 4; ++i) {
    a.set_grad(grads[i]);
    b.set_grad(grads[i]);
    first.step();
    second.step();
  }
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  // Without amsgrad the state has no max_exp_avg_sq: loading it is an error naming the key.
  optim::Adam plain(std::vector<Tensor>{randn({5}, kFloat64).requires_grad_(true)});
  EXPECT_THROW(plain.load_state_dict(state), std::exception);
}

// GraphedStep's clip_grad_norm option (eager on the CPU) equals clipping by hand before each step.
TEST(AdamVariants, GraphedStepClipsAsTheHandWrittenLoop) {
  manual_seed(84);
  Tensor w = randn({3, 5}, kFloat64);
  Tensor w1 = w.clone().requires_grad_(true), w2 = w.clone().requires_grad_(true);
  optim::AdamW opt1(std::vector<Tensor>{w1}, optim::AdamOptions(0.1)), opt2(std::vector<Tensor>{w2}, optim::AdamOptions(0.1));
  cuda::GraphedStep step([&](const std::vector<Tensor>& in) { return sum(mul(matmul(in[0], w1), in[1])); }, opt1,
                         cuda::GraphedStepOptions().clip_grad_norm(0.1));
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn({2, 3}, kFloat64), y = randn({2, 5}, kFloat64);
    step(x, y);
    opt2.zero_grad();
    sum(mul(matmul(x, w2), y)).backward();
    const Tensor norm = nn::utils::clip_grad_norm_(std::vector<Tensor>{w2}, 0.1);
    opt2.step();
    EXPECT_DOUBLE_EQ(step.grad_norm().item<double>(), norm.item<double>());
    EXPECT_GT(norm.item<double>(), 0.1);
  }
  EXPECT_EQ(w1.to_vector<double>(), w2.to_vector<double>());
}

}  // namespace minidl::adam_variants_test
