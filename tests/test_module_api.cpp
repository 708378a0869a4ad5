// Module API of libtorch and PyTorch: named_parameters()["name"], apply, as<>, forward hooks;
// nn::init's trunc_normal_ and orthogonal_; nn::utils' p-norm clipping and parameter vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "minidl.h"
#include "nn/nn.h"
#include "test_util.h"

namespace minidl::module_api_test {

using minidl::testing::expect_error;

namespace {
struct Net : nn::Module {
  Net() {
    fc1 = register_module("fc1", nn::Linear(4, 3));
    fc2 = register_module("fc2", nn::Linear(3, 2));
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
}  // namespace

TEST(ModuleApi, NamedParametersIsAnOrderedDict) {
  Net net;
  auto params = net.named_parameters();
  EXPECT_TRUE(params["fc1.weight"].is_same(net.fc1->weight));
  EXPECT_EQ(params[size_t{2}].key(), "fc2.weight");
  EXPECT_EQ(params[size_t{2}].value().shape(), (Shape{2, 3}));
  EXPECT_TRUE(params.contains("fc2.bias"));
  EXPECT_EQ(params.find("fc3.bias"), nullptr);
  EXPECT_EQ(params.keys(), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  int n = 0;
  for (auto& [name, p] : params) n += name.empty() ? 0 : 1;  // binds as a pair
  EXPECT_EQ(n, 4);
  expect_error([&] { (void)params["fc3.weight"]; }, {"key 'fc3.weight' is not defined"});
  EXPECT_EQ(net.named_modules()["fc2"]->name(), "Linear");
}

TEST(ModuleApi, ApplyVisitsEveryModuleOnceSelfFirst) {
  Net net;
  std::vector<std::string> seen;
  net.apply([&](const std::string& name, nn::Module& m) { seen.push_back(name + ":" + m.name()); });
  EXPECT_EQ(seen, (std::vector<std::string>{":Net", "fc1:Linear", "fc2:Linear"}));
  net.apply([](nn::Module& m) {
    if (auto* fc = m.as<nn::Linear>()) nn::init::zeros_(fc->bias);
  });
  EXPECT_EQ(net.fc1->bias.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(net.as<nn::Linear>(), nullptr);
}

TEST(ModuleApi, ForwardHooksSeeAndReplaceInputsAndOutputs) {
  nn::Linear fc(2, 2);
  Tensor seen_in, seen_out;
  auto pre = fc->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& in) { seen_in = in[0]; });
  auto post = fc->register_forward_hook(
      [&](nn::Module&, const std::vector<Tensor>&, const Tensor& out) { seen_out = out; });
  Tensor x = ones({1, 2});
  Tensor y = fc(x);
  EXPECT_TRUE(seen_in.is_same(x));
  EXPECT_TRUE(seen_out.is_same(y));
  // A hook's result replaces: double the input, then negate the output.
  auto doubler = fc->register_forward_pre_hook([](nn::Module&, const std::vector<Tensor>& in) { return in[0] * 2; });
  auto negate = fc->register_forward_hook(
      [](nn::Module&, const std::vector<Tensor>&, const Tensor& out) { return -out; });
  Tensor z = fc(x);
  EXPECT_EQ(z.to_vector<float>(), neg(fc->forward(x * 2)).to_vector<float>());
  doubler.remove();
  negate.remove();
  negate.remove();  // twice is harmless
  EXPECT_EQ(fc(x).to_vector<float>(), fc->forward(x).to_vector<float>());
  // nn::Sequential calls its layers with their hooks (and does not fuse a hooked Linear + ReLU).
  nn::Sequential seq(nn::Linear(2, 3), nn::ReLU());
  int calls = 0;
  seq[0]->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, const Tensor& out) {
    ++calls;
    EXPECT_EQ(out.shape(), (Shape{1, 3}));
  });
  seq->forward(x);
  EXPECT_EQ(calls, 1);
  pre.remove();
  post.remove();
}

TEST(ModuleApi, TruncNormalStaysInItsBoundsWithTheRightMoments) {
  manual_seed(0);
  Tensor w = Tensor::empty({20000}, kFloat64);
  nn::init::trunc_normal_(w, 1.0, 2.0, -1.0, 3.0);  // [mean - std, mean + std]
  std::vector<double> v = w.to_vector<double>();
  double m = 0, sq = 0;
  for (double x : v) {
    ASSERT_GE(x, -1.0);
    ASSERT_LE(x, 3.0);
    m += x;
    sq += x * x;
  }
  m /= v.size();
  // A normal cut at one std on both sides: mean 1, variance std^2 * (1 - 2 phi(1) / (2 Phi(1) - 1)) = 4 * 0.2911.
  EXPECT_NEAR(m, 1.0, 0.03);
  EXPECT_NEAR(sq / v.size() - m * m, 4 * 0.29112, 0.05);
  expect_error([&] { nn::init::trunc_normal_(w, 0, 1, 2, 1); }, {"a < b"});
}

TEST(ModuleApi, OrthogonalGivesOrthonormalRowsOrColumns) {
  manual_seed(0);
  for (Shape shape : {Shape{3, 5}, Shape{5, 3}, Shape{4, 2, 2}}) {
    Tensor w = Tensor::empty(shape, kFloat64);
    nn::init::orthogonal_(w, 2.0);
    Tensor m = w.reshape({shape[0], -1});
    const bool wide = m.size(0) < m.size(1);
    Tensor gram = wide ? matmul(m, m.t()) : matmul(m.t(), m);
    std::vector<double> g = gram.contiguous().to_vector<double>();
    const int64_t k = gram.size(0);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) EXPECT_NEAR(g[i * k + j], i == j ? 4.0 : 0.0, 1e-12);
  }
  Tensor v = zeros({3});
  expect_error([&] { nn::init::orthogonal_(v); }, {"at least 2 dimensions"});
}

TEST(ModuleApi, ClipGradNormWithAnyP) {
  auto grads_after = [](double p, double max_norm, double* total) {
    Tensor a = zeros({2}, kFloat64).requires_grad_();
    Tensor b = zeros({1}, kFloat64).requires_grad_();
    a.set_grad(Tensor::from_vector<double>({3, -4}));
    b.set_grad(Tensor::from_vector<double>({12}));
    *total = nn::utils::clip_grad_norm_({a, b}, max_norm, p).item<double>();
    std::vector<double> g = a.grad().to_vector<double>();
    g.push_back(b.grad().item<double>());
    return g;
  };
  double total;
  auto g = grads_after(2, 6.5, &total);
  EXPECT_NEAR(total, 13, 1e-12);
  EXPECT_NEAR(g[2], 12 * 6.5 / (13 + 1e-6), 1e-9);
  g = grads_after(1, 100, &total);
  EXPECT_NEAR(total, 19, 1e-12);
  EXPECT_EQ(g[2], 12);  // under the limit: unchanged
  g = grads_after(std::numeric_limits<double>::infinity(), 6, &total);
  EXPECT_NEAR(total, 12, 1e-12);
  EXPECT_NEAR(g[1], -4 * 6 / (12 + 1e-6), 1e-9);
  g = grads_after(3, 1, &total);
  EXPECT_NEAR(total, std::cbrt(27 + 64 + 1728), 1e-9);
  Tensor w = zeros({1}, kFloat64).requires_grad_();
  w.set_grad(full({1}, std::nan(""), kFloat64));
  expect_error([&] { nn::utils::clip_grad_norm_(w, 1.0, 2, /*error_if_nonfinite=*/true); }, {"non-finite"});
}

TEST(ModuleApi, ParametersToVectorAndBack) {
  Net net;
  std::vector<Tensor> params = net.parameters();
  Tensor v = nn::utils::parameters_to_vector(params);
  EXPECT_EQ(v.numel(), net.num_parameters());
  Tensor doubled = v * 2;
  nn::utils::vector_to_parameters(doubled, params);
  EXPECT_EQ(nn::utils::parameters_to_vector(net.parameters()).to_vector<float>(), doubled.to_vector<float>());
  EXPECT_TRUE(net.fc1->weight.requires_grad());
  expect_error([&] { nn::utils::vector_to_parameters(zeros({3}), params); }, {"the vector has 3 elements"});
}

namespace {
struct Tower : nn::Cloneable<Tower> {
  Tower() { reset(); }
  void reset() override {
    body = register_module("body", nn::Sequential(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::Linear(4, 2)));
    scale = register_parameter("scale", ones({2}));
  }
  Tensor forward(const Tensor& x) override { return body(x) * scale; }
  nn::Sequential body{nullptr};
  Tensor scale;
};
}  // namespace

TEST(ModuleApi, CloneIsADeepCopy) {
  manual_seed(0);
  auto tower = std::make_shared<Tower>();
  tower->body[2]->as<nn::Linear>()->bias.requires_grad_(false);
  tower->eval();
  auto copy = std::dynamic_pointer_cast<Tower>(tower->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_FALSE(copy->is_training());
  Tensor x = randn({5, 3});
  EXPECT_EQ(copy->forward(x).to_vector<float>(), tower->forward(x).to_vector<float>());
  // Separate tensors: changing the copy leaves the original, and the copy's members are its registered ones.
  EXPECT_FALSE(copy->scale.is_same(tower->scale));
  EXPECT_TRUE(copy->named_parameters()["scale"].is_same(copy->scale));
  {
    NoGradGuard no_grad;
    copy->scale.fill_(2);
  }
  EXPECT_EQ(tower->scale.to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_FALSE(copy->named_parameters(true, false)["body.2.bias"].requires_grad());
  EXPECT_TRUE(copy->named_parameters()["body.0.weight"].requires_grad());
  EXPECT_EQ(copy->named_buffers()["body.1.running_mean"].to_vector<float>(),
            tower->named_buffers()["body.1.running_mean"].to_vector<float>());
  // A plain Module subclass says how to become cloneable.
  expect_error([] { Net().clone(); }, {"Net cannot be cloned", "nn::Cloneable<Net>"});
}

}  // namespace minidl::module_api_test
