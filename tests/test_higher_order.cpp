// Higher-order gradients: create_graph in grad() and backward(), second derivatives of every
// twice-differentiable op against finite differences of first derivatives, and a gradient penalty
// that trains.
#include <gtest/gtest.h>

#include <cmath>

#include "higher_order_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::higher_order_test {

namespace {

using testing::expect_error;
using testing::gradgradcheck;

Tensor r64(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }
// Values in [0.5, 1.5]: inside the domain of log and sqrt, away from the kinks of relu and abs.
Tensor pos64(const Shape& shape) { return add(rand(shape, kFloat64), scalar_tensor(0.5, kFloat64)).detach().requires_grad_(); }

#define EXPECT_GRADGRAD(f, ...)                          \
  do {                                                   \
    auto r = gradgradcheck(f, {__VA_ARGS__});            \
    EXPECT_TRUE(r) << r.message;                         \
  } while (0)

TEST(HigherOrder, CubeByHand) {
  Tensor x = Tensor::from_vector<double>({1.0, -2.0, 0.5}).requires_grad_();
  Tensor y = sum(pow(x, 3));
  Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_TRUE(g.requires_grad());
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{3.0, 12.0, 0.75}));  // 3 x^2
  Tensor g2 = autograd::grad({sum(g)}, {x})[0];
  EXPECT_EQ(g2.to_vector<double>(), (std::vector<double>{6.0, -12.0, 3.0}));  // 6 x
  EXPECT_FALSE(x.grad().defined()) << "grad() must not touch .grad";
}

TEST(HigherOrder, BackwardWithCreateGraph) {
  Tensor x = Tensor::from_vector<double>({2.0, 3.0}).requires_grad_();
  sum(mul(mul(x, x), x)).backward({}, std::nullopt, /*create_graph=*/true);
  Tensor gx = x.grad();
  EXPECT_TRUE(gx.requires_grad());
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{12.0, 27.0}));
  Tensor gg = autograd::grad({sum(gx)}, {x})[0];
  EXPECT_EQ(gg.to_vector<double>(), (std::vector<double>{12.0, 18.0}));
}

TEST(HigherOrder, RetainGraphTrueIsNotCreateGraph) {
  // The argument after grad_outputs is retain_graph: the gradient has no history then.
  Tensor x = r64({3, 4});
  Tensor w = r64({2, 4});
  Tensor out = linear(x, w);
  Tensor g = autograd::grad({out}, {x}, {ones_like(out)}, /*retain_graph=*/true)[0];
  EXPECT_FALSE(g.requires_grad());
  out.sum().backward();  // the graph was retained
  EXPECT_TRUE(x.grad().defined());
}

TEST(HigherOrder, Arithmetic) {
  EXPECT_GRADGRAD([](auto& in) { return add(mul(in[0], in[1]), in[0]); }, r64({2, 3}), r64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return sub(mul(in[0], in[0]), mul(in[1], in[0])); }, r64({3}), r64({3}));
  EXPECT_GRADGRAD([](auto& in) { return div(in[0], in[1]); }, r64({2, 3}), pos64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return neg(mul(in[0], in[0])); }, r64({4}));
  EXPECT_GRADGRAD([](auto& in) { return mul(in[0], in[1]); }, r64({2, 3}), r64({3}));  // broadcast: sum_to_shape
}

TEST(HigherOrder, Powers) {
  EXPECT_GRADGRAD([](auto& in) { return pow(in[0], 3); }, r64({5}));
  EXPECT_GRADGRAD([](auto& in) { return pow(in[0], 2.5); }, pos64({5}));
  EXPECT_GRADGRAD([](auto& in) { return pow(in[0], in[1]); }, pos64({4}), r64({4}));
}

TEST(HigherOrder, UnaryFunctions) {
  EXPECT_GRADGRAD([](auto& in) { return exp(in[0]); }, r64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return log(in[0]); }, pos64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return sqrt(in[0]); }, pos64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return tanh(in[0]); }, r64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return sigmoid(in[0]); }, r64({2, 3}));
  // relu and abs: piecewise linear, so their second derivative is 0 away from the kink; through a
  // square it is not.
  EXPECT_GRADGRAD([](auto& in) { return mul(relu(in[0]), in[0]); }, pos64({4}));
  EXPECT_GRADGRAD([](auto& in) { return mul(abs(in[0]), in[0]); }, neg(pos64({4})).detach().requires_grad_());
}

TEST(HigherOrder, ReductionsAndViews) {
  EXPECT_GRADGRAD([](auto& in) { return sum(mul(in[0], in[0]), {1}); }, r64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return mean(mul(in[0], in[0])); }, r64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return mean(mul(in[0], in[0]), {0}, true); }, r64({2, 3}));
  EXPECT_GRADGRAD([](auto& in) { return norm(in[0], 2, {1}); }, r64({3, 4}));
  EXPECT_GRADGRAD([](auto& in) {
    Tensor x = in[0];
    Tensor v = mul(view(x, {3, 2}), reshape(x, {3, 2}));
    return mul(transpose(v, 0, 1), permute(expand(unsqueeze(in[1], 0), {3, 2}), {1, 0}));
  }, r64({2, 3}), r64({2}));
  EXPECT_GRADGRAD([](auto& in) { return mul(squeeze(in[0], 1), in[0].t().squeeze(0)); }, r64({3, 1}));
  EXPECT_GRADGRAD([](auto& in) { return cat({mul(in[0], in[0]), mul(in[0], in[1])}, 0); }, r64({2, 2}), r64({2, 2}));
}

TEST(HigherOrder, MatrixProducts) {
  EXPECT_GRADGRAD([](auto& in) { return mul(matmul(in[0], in[1]), matmul(in[0], in[1])); }, r64({2, 3}), r64({3, 2}));
  EXPECT_GRADGRAD([](auto& in) { return tanh(matmul(in[0], in[1])); }, r64({2, 2, 3}), r64({3, 2}));
  EXPECT_GRADGRAD([](auto& in) { return tanh(matmul(in[0], in[1])); }, r64({2, 3}), r64({2, 3, 2}));
  EXPECT_GRADGRAD([](auto& in) { return tanh(linear(in[0], in[1], in[2])); }, r64({3, 4}), r64({2, 4}), r64({2}));
  EXPECT_GRADGRAD([](auto& in) { return tanh(linear(in[0], in[1])); }, r64({2, 3, 4}), r64({2, 4}));
  EXPECT_GRADGRAD([](auto& in) { return mul(linear_relu(in[0], in[1], in[2]), in[0].sum()); }, r64({3, 4}),
                  r64({2, 4}), r64({2}));
}

TEST(HigherOrder, LossesAndSoftmax) {
  EXPECT_GRADGRAD([](auto& in) { return mse_loss(tanh(in[0]), in[1]); }, r64({3, 4}), r64({3, 4}));
  EXPECT_GRADGRAD([](auto& in) { return softmax(in[0], 1); }, r64({2, 4}));
  EXPECT_GRADGRAD([](auto& in) { return log_softmax(in[0], 0); }, r64({3, 2}));
}

// Without a mask or dropout, attention runs the fused kernels (the CPU's too, in float64), whose
// create_graph backward recomputes the gradients with recorded ops.
TEST(HigherOrder, FusedAttention) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    auto attend = [causal](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, causal); };
    EXPECT_GRADGRAD(attend, r64({2, 3, 4}), r64({2, 5, 4}), r64({2, 5, 3}));
    EXPECT_GRADGRAD(attend, r64({1, 2, 3, 8}), r64({1, 2, 3, 8}), r64({1, 2, 3, 8}));
    // The first derivatives of the recorded backward are the kernels' own.
    Tensor q = r64({2, 3, 4}), k = r64({2, 5, 4}), v = r64({2, 5, 3}), w = randn({2, 3, 3}, kFloat64);
    auto grads = [&](bool create_graph) {
      Tensor y = sum(mul(scaled_dot_product_attention(q, k, v, {}, 0.0, causal), w));
      return autograd::grad({y}, {q, k, v}, {}, std::nullopt, create_graph);
    };
    const std::vector<Tensor> recorded = grads(true), fused = grads(false);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(recorded[i].requires_grad()) << i;
      EXPECT_TRUE(allclose(recorded[i].detach(), fused[i], 1e-12, 1e-12)) << i;
    }
  }
}

TEST(HigherOrder, NotTwiceDifferentiableOpIsAnError) {
  Tensor x = r64({2, 3});
  Tensor y = sum(leaky_relu(x, 0.1));
  expect_error([&] { autograd::grad({y}, {x}, {}, std::nullopt, true); },
               {"the backward of 'leaky_relu' is not differentiable twice"});
  // Without create_graph it is an ordinary backward.
  Tensor g = autograd::grad({y}, {x})[0];
  EXPECT_EQ(g.shape(), x.shape());
}

// A WGAN-GP style critic: the penalty (||d critic / d x|| - 1)^2 trains the critic's weights
// through the second derivatives of Linear and tanh.
TEST(HigherOrder, GradientPenaltyTrains) {
  manual_seed(3);
  Tensor w1 = mul(randn({8, 4}, kFloat64), 0.5).detach().requires_grad_();
  Tensor b1 = zeros({8}, kFloat64).requires_grad_();
  Tensor w2 = mul(randn({1, 8}, kFloat64), 0.1).detach().requires_grad_();
  Tensor x = randn({16, 4}, kFloat64).requires_grad_();
  auto penalty = [&] {
    Tensor critic = linear(tanh(linear(x, w1, b1)), w2);
    Tensor g = autograd::grad({critic}, {x}, {ones_like(critic)}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    return mean(pow(sub(norm(g, 2, {1}), 1.0), 2));
  };
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    for (Tensor* p : {&w1, &b1, &w2}) p->set_grad(Tensor());
    Tensor loss = penalty();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    loss.backward();
    ASSERT_TRUE(w1.grad().defined() && w2.grad().defined());
    NoGradGuard no_grad;
    for (Tensor* p : {&w1, &b1, &w2})
      if (p->grad().defined()) sub_(*p, mul(p->grad(), 0.1));
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
  EXPECT_EQ(autograd::tape_size(), 0u) << "the graphs of the penalty must be freed";
}

TEST(HigherOrder, PenaltyGradientMatchesFiniteDifferences) {
  manual_seed(4);
  Tensor x = r64({3, 4});
  auto f = [&](const std::vector<Tensor>& in) {
    Tensor critic = linear(tanh(linear(x, in[0], in[1])), in[2]);
    Tensor g = autograd::grad({critic}, {x}, {ones_like(critic)}, true, true)[0];
    return mean(pow(sub(norm(g, 2, {1}), 1.0), 2));
  };
  // gradcheck evaluates f under NoGradGuard too: the inner grad() needs grad mode.
  auto f_grad_on = [&](const std::vector<Tensor>& in) {
    AutoGradMode on(true);
    return f(in);
  };
  auto r = gradcheck(f_grad_on, {r64({5, 4}), r64({5}), r64({1, 5})});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace

}  // namespace minidl::higher_order_test
