// linear_relu, the fused ReLU(linear) that nn::Sequential runs for a Linear followed by a ReLU, and
// linear_relu_linear, which it runs for a Linear, a ReLU and a last Linear: their values and
// gradients against the composition, float64 gradient checks, and Sequential's fusion leaving a
// model's outputs and gradients as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "minidl.h"
#include "nn/nn.h"

namespace minidl::linear_relu_test {

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

namespace {

// x, w1, b1, w2, b2 for linear_relu_linear, the first layer's pre-activations clear of the kink.
std::vector<Tensor> two_layers_off_the_kink(int64_t rows, int64_t in, int64_t hidden, int64_t out) {
  std::vector<Tensor> first = inputs_off_the_kink(rows, in, hidden);
  return {first[0], first[1], first[2], randn({out, hidden}, kFloat64).requires_grad_(),
          randn({out}, kFloat64).requires_grad_()};
}

}  // namespace

TEST(LinearReluLinear, EqualsCompositionWithGradients) {
  manual_seed(14);
  std::vector<Tensor> in = two_layers_off_the_kink(6, 5, 7, 3);
  Tensor fused = linear_relu_linear(in[0], in[1], in[2], in[3], in[4]);
  Tensor g = randn(fused.shape(), kFloat64);
  (fused * g).sum().backward();
  std::vector<Tensor> fused_grads;
  for (Tensor& t : in) fused_grads.push_back(t.grad()), t.set_grad(Tensor());
  Tensor composed = linear(relu(linear(in[0], in[1], in[2])), in[3], in[4]);
  (composed * g).sum().backward();
  expect_near(fused, composed, 1e-12);
  for (size_t i = 0; i < in.size(); ++i) expect_near(fused_grads[i], in[i].grad(), 1e-12);
  std::vector<double> hidden = values(relu(linear(in[0], in[1], in[2])));
  EXPECT_GT(std::count(hidden.begin(), hidden.end(), 0.0), 0);  // the mask is tested
}

// Each input alone wanting a gradient (the backward skips the rest), a 3-D input, and no biases.
TEST(LinearReluLinear, GradientsOfSomeInputsOnly) {
  manual_seed(15);
  std::vector<Tensor> in = two_layers_off_the_kink(4, 3, 5, 2);
  for (size_t wanted = 0; wanted < in.size(); ++wanted) {
    SCOPED_TRACE("input " + std::to_string(wanted));
    std::vector<Tensor> copies;
    for (size_t i = 0; i < in.size(); ++i) {
      copies.push_back(in[i].detach().clone());
      if (i == wanted) copies.back().requires_grad_();
    }
    linear_relu_linear(copies[0], copies[1], copies[2], copies[3], copies[4]).sum().backward();
    for (Tensor& t : in) t.set_grad(Tensor());
    linear(relu(linear(in[0], in[1], in[2])), in[3], in[4]).sum().backward();
    expect_near(copies[wanted].grad(), in[wanted].grad(), 1e-12);
  }
  Tensor x3 = randn({2, 3, 3}, kFloat64).requires_grad_();
  Tensor fused = linear_relu_linear(x3, in[1], Tensor(), in[3]);
  EXPECT_EQ(fused.shape(), (Shape{2, 3, 2}));
  fused.sum().backward();
  Tensor fused_grad = x3.grad();
  x3.set_grad(Tensor());
  Tensor composed = linear(relu(linear(x3, in[1])), in[3]);
  composed.sum().backward();
  expect_near(fused, composed, 1e-12);
  expect_near(fused_grad, x3.grad(), 1e-12);
}

TEST(LinearReluLinear, Gradcheck) {
  manual_seed(16);
  GradcheckResult r = gradcheck([](auto& t) { return linear_relu_linear(t[0], t[1], t[2], t[3], t[4]); },
                                two_layers_off_the_kink(5, 4, 6, 3));
  EXPECT_TRUE(r) << r.message;
}

TEST(LinearReluLinear, ChecksBothLayersShapes) {
  Tensor x = randn({2, 5}), w1 = randn({4, 5}), b1 = randn({4});
  EXPECT_NO_THROW(linear_relu_linear(x, w1, b1, randn({3, 4}), randn({3})));
  EXPECT_THROW(linear_relu_linear(randn({2, 3}), w1, b1, randn({3, 4})), Error);
  EXPECT_THROW(linear_relu_linear(x, w1, b1, randn({3, 5})), Error);              // second's in != first's out
  EXPECT_THROW(linear_relu_linear(x, w1, b1, randn({3, 4}), randn({4})), Error);  // second bias
  EXPECT_THROW(linear_relu_linear(x, w1, b1, randn({3, 4}, kFloat64)), Error);
}

}  // namespace minidl::linear_relu_test
