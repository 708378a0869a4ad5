// GradScaler and its device passes: the fused inf/NaN check and unscale, the scale update, a step
// skipped on an injected inf (parameters and momentum unchanged, scale halved) and the recovery
// (growth after growth_interval good steps), unscale_ giving the true gradients, the state_dict
// round trip, the disabled pass-through; on the CPU, and on CUDA where a GPU is usable (there also
// inside a captured cuda::GraphedStep, against the same steps run eagerly).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "minidl.h"
#include "ops/amp.h"
#include "optim/grad_scaler.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::grad_scaler_test {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> values(const Tensor& t) { return t.detach().to(Device::cpu()).to(kFloat32).contiguous().to_vector<float>(); }

float scalar(const Tensor& t) { return values(t).at(0); }

// The graphed and the eager step run the same kernels; the tolerance of tests/test_cuda_graph.cpp.
void expect_near(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<float> x = values(a), y = values(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5 + 1e-4 * std::fabs(y[i])) << what << " [" << i << "]";
}

Tensor on(Device device, std::vector<float> v, Shape shape = {}) { return Tensor::from_vector<float>(v, shape).to(device); }

void check_unscale(Device device) {
  const Tensor inv = on(device, {0.25f}, {});
  // Several dtypes in one list, one of them strided (a transposed view).
  std::vector<Tensor> grads = {on(device, {4, 8, -12}), on(device, {2, 6}).to(kFloat64),
                               on(device, {1, 2, 3, 4}, {2, 2}).t(), on(device, {8, 16}).to(kBFloat16)};
  Tensor found = zeros({}, TensorOptions().dtype(kFloat32).device(device));
  amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
  EXPECT_EQ(scalar(found), 0.0f);
  EXPECT_EQ(values(grads[0]), (std::vector<float>{1, 2, -3}));
  EXPECT_EQ(values(grads[1]), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(values(grads[2]), (std::vector<float>{0.25f, 0.75f, 0.5f, 1.0f}));  // the view's order
  EXPECT_EQ(grads[3].dtype(), kBFloat16);
  EXPECT_EQ(values(grads[3]), (std::vector<float>{2, 4}));
  // An inf in one tensor, a NaN in another: found_inf is set; a later clean pass never clears it.
  std::vector<Tensor> bad = {on(device, {1, kInf}), on(device, {std::nanf(""), 1}).to(kFloat16)};
  amp_foreach_non_finite_check_and_unscale_(bad, found, inv);
  EXPECT_EQ(scalar(found), 1.0f);
  std::vector<Tensor> clean = {on(device, {1, 2})};
  amp_foreach_non_finite_check_and_unscale_(clean, found, inv);
  EXPECT_EQ(scalar(found), 1.0f);
  // A large list (more tensors than one launch takes) with the inf in the last one.
  std::vector<Tensor> many;
  for (int i = 0; i < 100; ++i) many.push_back(full({300}, 2.0, kFloat32, device));
  many.back() = on(device, {1, 2, kInf});
  Tensor found2 = zeros({}, TensorOptions().dtype(kFloat32).device(device));
  amp_foreach_non_finite_check_and_unscale_(many, found2, inv);
  EXPECT_EQ(scalar(found2), 1.0f);
  EXPECT_EQ(values(many[50])[299], 0.5f);
  minidl::testing::expect_error(
      [&] { amp_foreach_non_finite_check_and_unscale_(grads, found, on(device, {1, 1})); }, {"inv_scale", "one-element"});
}

void check_update_scale(Device device) {
  Tensor scale = full({}, 8.0, kFloat32, device);
  Tensor tracker = full({}, 0, kInt32, device);
  const Tensor no = zeros({}, TensorOptions().dtype(kFloat32).device(device));
  const Tensor yes = full({}, 1.0, kFloat32, device);
  amp_update_scale_(scale, tracker, no, 2.0, 0.5, 3);
  amp_update_scale_(scale, tracker, no, 2.0, 0.5, 3);
  EXPECT_EQ(scalar(scale), 8.0f);
  EXPECT_EQ(tracker.to(Device::cpu()).item<int32_t>(), 2);
  amp_update_scale_(scale, tracker, no, 2.0, 0.5, 3);  // the third good step in a row: growth
  EXPECT_EQ(scalar(scale), 16.0f);
  EXPECT_EQ(tracker.to(Device::cpu()).item<int32_t>(), 0);
  amp_update_scale_(scale, tracker, no, 2.0, 0.5, 3);
  amp_update_scale_(scale, tracker, yes, 2.0, 0.5, 3);  // an overflow: backoff, count reset
  EXPECT_EQ(scalar(scale), 8.0f);
  EXPECT_EQ(tracker.to(Device::cpu()).item<int32_t>(), 0);
}

// A linear model whose loss the test controls; SGD with momentum, so that a skipped step must leave
// the momentum buffers alone too.
struct LinearModel {
  Tensor w, b;
  Tensor x, y;
  explicit LinearModel(Device device) {
    manual_seed(41);
    w = mul(randn({3, 4}), 0.5).to(device).requires_grad_(true);
    b = zeros({3}).to(device).requires_grad_(true);
    x = randn({5, 4}).to(device);
    y = randn({5, 3}).to(device);
  }
  Tensor loss() const { return mse_loss(linear(x, w, b), y); }
};

std::vector<std::vector<float>> snapshot(optim::Optimizer& opt, const LinearModel& s) {
  std::vector<std::vector<float>> out = {values(s.w), values(s.b)};
  for (auto& [name, t] : opt.state_dict())
    if (name.find("momentum_buffer") != std::string::npos) out.push_back(values(t));
  return out;
}

void check_skip_and_recover(Device device) {
  LinearModel s(device);
  optim::SGD opt({s.w, s.b}, optim::SGDOptions(0.05).momentum(0.9));
  optim::GradScaler scaler(optim::GradScalerOptions().init_scale(1024.0).growth_interval(2));
  // A good step first, so that the momentum buffers exist.
  opt.zero_grad();
  scaler.scale(s.loss()).backward();
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
  const auto before = snapshot(opt, s);
  ASSERT_EQ(before.size(), 4u);
  // An inf injected into one gradient: the step changes nothing and the scale halves.
  opt.zero_grad();
  scaler.scale(s.loss()).backward();
  {
    NoGradGuard no_grad;
    Tensor g = s.b.grad();
    fill_(g, kInf);
  }
  scaler.step(opt);
  EXPECT_EQ(scalar(scaler.found_inf(opt)), 1.0f);
  scaler.update();
  EXPECT_EQ(snapshot(opt, s), before);
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
  // Recovery: good steps move the parameters again, and after growth_interval of them the scale grows.
  opt.zero_grad();
  scaler.scale(s.loss()).backward();
  scaler.step(opt);
  scaler.update();
  EXPECT_NE(snapshot(opt, s), before);
  EXPECT_EQ(scaler.get_scale(), 512.0);
  opt.zero_grad();
  scaler.scale(s.loss()).backward();
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
}

// The scaled-and-unscaled gradients equal the plain ones (a power-of-two scale is exact), and a
// scaled SGD step equals a plain one.
void check_unscale_gives_true_gradients(Device device) {
  LinearModel a(device), b(device);
  optim::SGD opt_a({a.w, a.b}, optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD opt_b({b.w, b.b}, optim::SGDOptions(0.05).momentum(0.9));
  optim::GradScaler scaler;
  for (int step = 0; step < 3; ++step) {
    opt_a.zero_grad();
    opt_b.zero_grad();
    scaler.scale(a.loss()).backward();
    EXPECT_NE(values(a.w.grad()), values(mul(a.w.grad(), 1.0 / 65536)));  // scaled before unscale_
    scaler.unscale_(opt_a);
    b.loss().backward();
    EXPECT_EQ(values(a.w.grad()), values(b.w.grad()));
    EXPECT_EQ(values(a.b.grad()), values(b.b.grad()));
    scaler.step(opt_a);  // no second unscale
    scaler.update();
    opt_b.step();
    EXPECT_EQ(values(a.w), values(b.w));
  }
  minidl::testing::expect_error([&] { scaler.update(); }, {"GradScaler", "no inf checks"});
  opt_a.zero_grad();
  scaler.scale(a.loss()).backward();
  scaler.step(opt_a);
  minidl::testing::expect_error([&] { scaler.step(opt_a); }, {"GradScaler", "step() has already been called"});
  minidl::testing::expect_error([&] { scaler.unscale_(opt_a); }, {"GradScaler", "after step()"});
  scaler.update();
}

void check_state_dict_round_trip(Device device) {
  auto run = [&](optim::GradScaler& scaler, LinearModel& s, optim::SGD& opt, bool inject) {
    opt.zero_grad();
    scaler.scale(s.loss()).backward();
    if (inject) {
      NoGradGuard no_grad;
      Tensor g = s.w.grad();
      fill_(g, std::nanf(""));
    }
    scaler.step(opt);
    scaler.update();
  };
  LinearModel s1(device), s2(device);
  optim::SGD opt1({s1.w, s1.b}, optim::SGDOptions(0.05));
  optim::SGD opt2({s2.w, s2.b}, optim::SGDOptions(0.05));
  optim::GradScaler a(optim::GradScalerOptions().init_scale(256.0).growth_interval(3).growth_factor(4.0).backoff_factor(0.25));
  run(a, s1, opt1, false);
  run(a, s1, opt1, true);
  run(a, s1, opt1, false);
  const auto state = a.state_dict();
  EXPECT_EQ(scalar(state.at("scale")), 64.0f);
  EXPECT_EQ(state.at("_growth_tracker").item<int32_t>(), 1);
  EXPECT_EQ(state.at("growth_interval").item<int64_t>(), 3);
  EXPECT_EQ(state.at("growth_factor").item<double>(), 4.0);
  EXPECT_EQ(state.at("backoff_factor").item<double>(), 0.25);
  // A fresh scaler of default options resumes where `a` stands: same scale after the same steps.
  optim::GradScaler b;
  b.load_state_dict(state);
  EXPECT_EQ(b.get_scale(), 64.0);
  EXPECT_EQ(b.get_growth_tracker(), 1);
  {
    NoGradGuard no_grad;
    Tensor w2 = s2.w, b2 = s2.b;
    copy_(w2, s1.w);
    copy_(b2, s1.b);
  }
  for (bool inject : {false, false, true, false}) {
    run(a, s1, opt1, inject);
    run(b, s2, opt2, inject);
    EXPECT_EQ(a.get_scale(), b.get_scale());
    EXPECT_EQ(a.get_growth_tracker(), b.get_growth_tracker());
  }
  EXPECT_EQ(values(s1.w), values(s2.w));
  auto missing = state;
  missing.erase("growth_factor");
  minidl::testing::expect_error([&] { optim::GradScaler().load_state_dict(missing); }, {"GradScaler", "growth_factor"});
}

}  // namespace

TEST(GradScaler, UnscaleChecksEveryGradientInOnePass) { check_unscale(Device::cpu()); }
TEST(GradScaler, UpdateScaleBacksOffAndGrows) { check_update_scale(Device::cpu()); }
TEST(GradScaler, SkipsTheStepOnInfAndRecovers) { check_skip_and_recover(Device::cpu()); }
TEST(GradScaler, UnscaleGivesTheTrueGradients) { check_unscale_gives_true_gradients(Device::cpu()); }
TEST(GradScaler, StateDictRoundTripResumesIdentically) { check_state_dict_round_trip(Device::cpu()); }

TEST(GradScaler, DisabledIsAPassThrough) {
  LinearModel a(Device::cpu()), b(Device::cpu());
  optim::SGD opt_a({a.w, a.b}, optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD opt_b({b.w, b.b}, optim::SGDOptions(0.05).momentum(0.9));
  optim::GradScaler scaler(optim::GradScalerOptions().enabled(false));
  EXPECT_FALSE(scaler.is_enabled());
  for (int i = 0; i < 2; ++i) {
    opt_a.zero_grad();
    opt_b.zero_grad();
    const Tensor loss = a.loss();
    const Tensor scaled = scaler.scale(loss);
    EXPECT_TRUE(scaled.is_same(loss));
    scaled.backward();
    scaler.unscale_(opt_a);
    scaler.step(opt_a);
    scaler.update();
    b.loss().backward();
    opt_b.step();
  }
  EXPECT_EQ(values(a.w), values(b.w));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_TRUE(scaler.state_dict().empty());
  minidl::testing::expect_error([&] { scaler.load_state_dict(optim::GradScaler().state_dict()); }, {"disabled"});
}

// An optimizer whose kernels do not take found_inf reads it on the host and skips the step there.
TEST(GradScaler, AdamSkipsThroughTheHostFallback) {
  LinearModel s(Device::cpu());
  optim::Adam opt({s.w, s.b}, optim::AdamOptions(0.01));
  optim::GradScaler scaler(optim::GradScalerOptions().init_scale(8.0));
  opt.zero_grad();
  scaler.scale(s.loss()).backward();
  {
    NoGradGuard no_grad;
    Tensor g = s.w.grad();
    fill_(g, kInf);
  }
  const auto w = values(s.w);
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(values(s.w), w);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  opt.zero_grad();
  scaler.scale(s.loss()).backward();
  scaler.step(opt);
  scaler.update();
  EXPECT_NE(values(s.w), w);
}

TEST(GradScaler, BadOptionsAreRefused) {
  minidl::testing::expect_error([] { optim::GradScaler(optim::GradScalerOptions().growth_factor(1.0)); },
                                {"growth_factor > 1", "1"});
  minidl::testing::expect_error([] { optim::GradScaler(optim::GradScalerOptions().backoff_factor(1.5)); },
                                {"backoff_factor", "1.5"});
  minidl::testing::expect_error([] { optim::GradScaler(optim::GradScalerOptions().growth_interval(0)); },
                                {"growth_interval", "0"});
}

// ---- CUDA ----

TEST(GradScalerCuda, UnscaleChecksEveryGradientInOnePass) {
  MINIDL_REQUIRE_CUDA();
  check_unscale(Device::cuda());
}
TEST(GradScalerCuda, UpdateScaleBacksOffAndGrows) {
  MINIDL_REQUIRE_CUDA();
  check_update_scale(Device::cuda());
}
TEST(GradScalerCuda, SkipsTheStepOnInfAndRecovers) {
  MINIDL_REQUIRE_CUDA();
  check_skip_and_recover(Device::cuda());
}
TEST(GradScalerCuda, UnscaleGivesTheTrueGradients) {
  MINIDL_REQUIRE_CUDA();
  check_unscale_gives_true_gradients(Device::cuda());
}
TEST(GradScalerCuda, StateDictRoundTripResumesIdentically) {
  MINIDL_REQUIRE_CUDA();
  check_state_dict_round_trip(Device::cuda());
}

// scale(loss), backward, the unscale, the skipped-or-not step and the update, all captured in one
// graph with float16 autocast: replays equal the same steps run eagerly, including a step whose
// batch overflows (skipped in the graph, with no host sync) and the scale's growth.
TEST(GradScalerCuda, InsideGraphedStepEqualsEager) {
  MINIDL_REQUIRE_CUDA();
  struct Run {
    Tensor w1, b1, w2, b2;
    optim::SGD opt;
    optim::GradScaler scaler;
    cuda::GraphedStep step;
    static std::vector<Tensor> params() {
      manual_seed(51);
      std::vector<Tensor> p;
      for (auto shape : std::vector<Shape>{{32, 20}, {32}, {10, 32}, {10}})
        p.push_back(mul(randn(shape), 0.2).cuda().requires_grad_(true));
      return p;
    }
    explicit Run(bool graphed)
        : Run(params(), graphed) {}
    Run(std::vector<Tensor> p, bool graphed)
        : w1(p[0]), b1(p[1]), w2(p[2]), b2(p[3]),
          opt(p, optim::SGDOptions(0.05).momentum(0.9)),
          scaler(optim::GradScalerOptions().init_scale(1024.0).growth_interval(3)),
          step(
              [this](const std::vector<Tensor>& in) {
                AutocastGuard guard(Device::cuda(), kFloat16);
                return cross_entropy(linear(linear_relu(in[0], w1, b1), w2, b2), in[1]);
              },
              opt, cuda::GraphedStepOptions().warmup(2).enabled(graphed).grad_scaler(&scaler)) {}
  };
  Run graphed(true), eager(false);
  manual_seed(52);
  for (int i = 0; i < 10; ++i) {
    std::vector<float> xs = randn({8, 20}).to_vector<float>();
    if (i == 6) xs[0] = kInf;  // overflows: this step is skipped
    const Tensor x = Tensor::from_vector<float>(xs, {8, 20}).cuda();
    const Tensor y = randint(0, 10, {8}, TensorOptions().dtype(kInt64)).cuda();
    graphed.step(x, y);
    eager.step(x, y);
    EXPECT_EQ(graphed.scaler.get_scale(), eager.scaler.get_scale()) << "step " << i;
    expect_near(graphed.w1, eager.w1, "w1 after step " + std::to_string(i));
  }
  EXPECT_TRUE(graphed.step.graphed()) << graphed.step.eager_reason();
  EXPECT_GT(graphed.step.replays(), 0);
  // From 1024, growth_interval 3: doubled after steps 0-2 and 3-5, halved by step 6, doubled after 7-9.
  EXPECT_EQ(eager.scaler.get_scale(), 4096.0);
  expect_near(graphed.w2, eager.w2, "w2");
}

}  // namespace minidl::grad_scaler_test
