// linear_relu, the fused ReLU(linear) that nn::Sequential runs for a Linear followed by a ReLU: its
// values and gradients against the composition, a float64 gradient check, and Sequential's fusion
// leaving a model's outputs and gradients as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "minidl.h"
#include "nn/nn.h"

using namespace minidl;

namespace {

std::vector<double> values(const Tensor& t) { return t.detach().to(kFloat64).to_vector<double>(); }

void expect_near(const Tensor& got, const Tensor& expected, double tol) {
  ASSERT_EQ(got.shape(), expected.shape());
  std::vector<double> g = values(got), e = values(expected);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], e[i], tol * (1 + std::abs(e[i]))) << "element " << i;
}

// Random inputs whose pre-activations keep clear of ReLU's kink, where central differences are wrong.
std::vector<Tensor> inputs_off_the_kink(int64_t rows, int64_t in, int64_t out) {
  for (;;) {
    Tensor x = randn({rows, in}, kFloat64), w = randn({out, in}, kFloat64), b = randn({out}, kFloat64);
    std::vector<double> pre = values(linear(x, w, b));
    bool clear = true;
    for (double v : pre) clear = clear && std::abs(v) > 1e-3;
    if (clear) return {x.requires_grad_(), w.requires_grad_(), b.requires_grad_()};
  }
}

}  // namespace

TEST(LinearRelu, EqualsReluOfLinearWithGradients) {
  manual_seed(11);
  std::vector<Tensor> in = inputs_off_the_kink(6, 5, 4);
  Tensor fused = linear_relu(in[0], in[1], in[2]);
  Tensor g = randn(fused.shape(), kFloat64);
  (fused * g).sum().backward();
  std::vector<Tensor> fused_grads{in[0].grad(), in[1].grad(), in[2].grad()};
  for (Tensor& t : in) t.set_grad(Tensor());
  Tensor composed = relu(linear(in[0], in[1], in[2]));
  (composed * g).sum().backward();
  expect_near(fused, composed, 1e-12);
  for (size_t i = 0; i < in.size(); ++i) expect_near(fused_grads[i], in[i].grad(), 1e-12);
  // Some outputs are clamped, or the test would not test the mask.
  std::vector<double> v = values(fused);
  EXPECT_GT(std::count(v.begin(), v.end(), 0.0), 0);
}

TEST(LinearRelu, Gradcheck) {
  manual_seed(12);
  GradcheckResult r = gradcheck([](auto& t) { return linear_relu(t[0], t[1], t[2]); }, inputs_off_the_kink(5, 4, 3));
  EXPECT_TRUE(r) << r.message;
  std::vector<Tensor> no_bias = inputs_off_the_kink(3, 4, 2);
  no_bias.pop_back();
  r = gradcheck([](auto& t) { return linear_relu(t[0], t[1]); }, no_bias);
  EXPECT_TRUE(r) << r.message;
}

TEST(LinearRelu, ChecksShapesLikeLinear) {
  EXPECT_THROW(linear_relu(randn({2, 3}), randn({4, 5}), randn({4})), Error);
  EXPECT_THROW(linear_relu(randn({2, 5}), randn({4, 5}), randn({3})), Error);
}

TEST(LinearRelu, SequentialFusionKeepsOutputsAndGradients) {
  manual_seed(13);
  nn::Sequential net(nn::Linear(7, 6), nn::ReLU(), nn::Linear(6, 5), nn::ReLU(), nn::Linear(5, 3));
  net->to(kFloat64);
  Tensor x = randn({4, 7}, kFloat64);
  Tensor fused = net(x);
  fused.sum().backward();
  std::vector<Tensor> fused_grads;
  for (auto& [name, p] : net->named_parameters()) fused_grads.push_back(p.grad().clone());
  net->zero_grad();
  // The same modules run one by one, each through its own forward.
  Tensor y = x;
  for (const auto& m : *net) y = m->forward(y);
  y.sum().backward();
  expect_near(fused, y, 1e-12);
  size_t i = 0;
  for (auto& [name, p] : net->named_parameters()) expect_near(fused_grads[i++], p.grad(), 1e-12);
}
