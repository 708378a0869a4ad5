// The libtorch autograd API: autograd::grad, Tensor::backward's arguments, grad_fn() names,
// retain_grad and gradient hooks.
#include <gtest/gtest.h>

#include "minidl.h"
#include "test_util.h"

namespace minidl::autograd_api_test {

namespace {

using testing::expect_error;

Tensor vec(std::vector<double> v) { return Tensor::from_vector<double>(v).requires_grad_(); }

// pytorch/examples' first autograd program: out = mean(3 (x + 2)^2) with x = ones(2, 2) gives
// d out / dx = 6 (x + 2) / 4 = 4.5 everywhere (PyTorch prints 4.5000).
TEST(AutogradApi, BasicExampleGradients) {
  Tensor x = ones({2, 2}, kFloat32).requires_grad_();
  Tensor y = x + 2;
  EXPECT_EQ(y.grad_fn()->name(), "AddBackward1");
  Tensor z = y * y * 3;
  EXPECT_EQ(z.grad_fn()->name(), "MulBackward1");
  Tensor out = mean(z);
  EXPECT_EQ(out.grad_fn()->name(), "MeanBackward0");
  EXPECT_FLOAT_EQ(out.item<float>(), 27.0f);
  out.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4.5f, 4.5f, 4.5f, 4.5f}));
}

TEST(AutogradApi, GradFnNames) {
  Tensor a = vec({1, 2}), b = vec({3, 4});
  EXPECT_EQ(a.grad_fn(), nullptr) << "a leaf has no grad_fn";
  EXPECT_EQ((a + b).grad_fn()->name(), "AddBackward0");
  EXPECT_EQ((a - b).grad_fn()->name(), "SubBackward0");
  EXPECT_EQ((a * b).grad_fn()->name(), "MulBackward0");
  EXPECT_EQ((a / b).grad_fn()->name(), "DivBackward0");
  EXPECT_EQ(sum(a * a).grad_fn()->name(), "SumBackward0");
  EXPECT_EQ(sum(mul(a, a).reshape({1, 2}), {0}).grad_fn()->name(), "SumBackward1");
  EXPECT_EQ(pow(a, 2).grad_fn()->name(), "PowBackward0");
  EXPECT_EQ(pow(a, b).grad_fn()->name(), "PowBackward1");
  EXPECT_EQ(exp(a).grad_fn()->name(), "ExpBackward0");
  EXPECT_EQ(tanh(a).grad_fn()->name(), "TanhBackward0");
  EXPECT_EQ(neg(a).grad_fn()->name(), "NegBackward0");
  Tensor m = randn({2, 3}, kFloat64).requires_grad_(), w = randn({4, 3}, kFloat64).requires_grad_();
  EXPECT_EQ(matmul(m, w.t()).grad_fn()->name(), "MmBackward0");
  EXPECT_EQ(linear(m, w, randn({4}, kFloat64)).grad_fn()->name(), "AddmmBackward0");
  EXPECT_EQ(linear(m, w).grad_fn()->name(), "MmBackward0");
  EXPECT_EQ(leaky_relu(m, 0.1).grad_fn()->name(), "LeakyReluBackward0");
  EXPECT_EQ(autograd::node_name("NormBackward1", false, true, false), "NormBackward1");
}

TEST(AutogradApi, GradReturnsWithoutTouchingDotGrad) {
  Tensor x = vec({1, 2, 3});
  Tensor h = x * x;  // a non-leaf input
  Tensor y = sum(h * 3);
  std::vector<Tensor> g = autograd::grad({y}, {x, h}, {}, /*retain_graph=*/true);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{6, 12, 18}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{3, 3, 3}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(h.grad().defined());
  // The same input twice, and a weighted non-scalar output.
  Tensor v = Tensor::from_vector<double>({1, 0, 2});
  std::vector<Tensor> g2 = autograd::grad({h}, {x, x}, {v});
  EXPECT_EQ(g2[0].to_vector<double>(), (std::vector<double>{2, 0, 12}));
  EXPECT_EQ(g2[1].to_vector<double>(), g2[0].to_vector<double>());
}

TEST(AutogradApi, GradOfSeveralOutputsSums) {
  Tensor x = vec({1, 2});
  std::vector<Tensor> g = autograd::grad({sum(x * x), sum(x * 3)}, {x});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{5, 7}));
  // A leaf output is its own gradient.
  EXPECT_EQ(autograd::grad({x}, {x}, {Tensor::from_vector<double>({2, 5})})[0].to_vector<double>(),
            (std::vector<double>{2, 5}));
}

TEST(AutogradApi, GradErrors) {
  Tensor x = vec({1, 2}), unused = vec({3});
  expect_error([&] { autograd::grad({sum(x * x)}, {x, unused}); },
               {"input 1", "appears to not have been used in the graph", "allow_unused"});
  std::vector<Tensor> g = autograd::grad({sum(x * x)}, {x, unused}, {}, std::nullopt, false, /*allow_unused=*/true);
  EXPECT_TRUE(g[0].defined());
  EXPECT_FALSE(g[1].defined());
  expect_error([&] { autograd::grad({x * x}, {x}); }, {"implied only for a one-element output"});
  expect_error([&] { autograd::grad({sum(x * x)}, {ones({2}, kFloat64)}); }, {"does not require grad"});
  expect_error([&] { autograd::grad({ones({1}, kFloat64)}, {x}); }, {"does not require grad"});
  expect_error([&] { autograd::grad({sum(x)}, {x}, {ones({2}, kFloat64)}); }, {"does not match the output"});
  Tensor y = sum(exp(x));
  autograd::grad({y}, {x});
  expect_error([&] { autograd::grad({y}, {x}); }, {"already freed", "retain_graph=true"});
}

TEST(AutogradApi, BackwardArguments) {
  Tensor x = vec({1, 2});
  Tensor y = sum(x * x);
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 8}));
  expect_error([&] { y.backward(); }, {"already freed"});
  // create_graph retains the graph by default.
  x.set_grad(Tensor());
  Tensor z = sum(x * x * x);
  z.backward(Tensor(), std::nullopt, /*create_graph=*/true);
  z.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 24}));
  // The libtorch free function, with several roots.
  x.set_grad(Tensor());
  autograd::backward({sum(x), sum(x * 2)});
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(AutogradApi, VectorJacobianProduct) {
  Tensor x = vec({0.5, -1, 2});
  Tensor y = x * 2;
  for (int i = 0; i < 3; ++i) y = y * 2;
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward1");
  y.backward(Tensor::from_vector<double>({0.1, 1.0, 0.0001}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1.6, 16, 0.0016}));
}

TEST(AutogradApi, RetainGrad) {
  Tensor x = vec({1, 2});
  Tensor h = x * 3;
  EXPECT_FALSE(h.retains_grad());
  h.retain_grad();
  EXPECT_TRUE(h.retains_grad());
  EXPECT_FALSE(x.retains_grad()) << "a leaf keeps its gradient without retain_grad";
  Tensor other = x * 4;  // not retained
  sum(h * h + other).backward();
  EXPECT_EQ(h.grad().to_vector<double>(), (std::vector<double>{6, 12}));
  EXPECT_FALSE(other.grad().defined());
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{22, 40}));
  expect_error([&] { ones({2}).retain_grad(); }, {"doesn't require grad"});
}

TEST(AutogradApi, HooksOnLeaves) {
  Tensor x = vec({1, 2});
  std::vector<double> seen;
  unsigned look = x.register_hook([&](Tensor g) { seen = g.to_vector<double>(); });
  unsigned twice = x.register_hook([](Tensor g) { return g * 2; });
  Tensor y = sum(x * x) + sum(x);  // two contributions: the hooks see their sum once
  y.backward();
  EXPECT_EQ(seen, (std::vector<double>{3, 5}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 10}));
  x.remove_hook(twice);
  x.remove_hook(look);
  x.set_grad(Tensor());
  seen.clear();
  sum(x * x).backward();
  EXPECT_TRUE(seen.empty());
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 4}));
  // grad() runs the hooks of its inputs too, and leaves .grad alone.
  x.register_hook([](Tensor g) { return g * 10; });
  x.set_grad(Tensor());
  EXPECT_EQ(autograd::grad({sum(x)}, {x})[0].to_vector<double>(), (std::vector<double>{10, 10}));
  EXPECT_FALSE(x.grad().defined());
  expect_error([&] { ones({2}).register_hook([](Tensor g) { return g; }); }, {"doesn't require gradient"});
}

TEST(AutogradApi, HooksOnNonLeaves) {
  Tensor x = vec({1, 2});
  Tensor h = x * x;
  int calls = 0;
  h.register_hook([&](Tensor g) {
    ++calls;
    EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 1}));
  });
  unsigned zero = h.register_hook([](Tensor g) { return g * 0; });
  h.remove_hook(zero);
  h.register_hook([](Tensor g) { return g * 3; });
  sum(h).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 12}));  // 3 * 2x
}

TEST(AutogradApi, NoGradAndDetach) {
  Tensor x = vec({1, 2});
  EXPECT_TRUE(pow(x, 2).requires_grad());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(pow(x, 2).requires_grad());
    AutoGradMode enable(true);
    EXPECT_TRUE(pow(x, 2).requires_grad());
  }
  EXPECT_FALSE(x.detach().requires_grad());
}

}  // namespace

}  // namespace minidl::autograd_api_test
