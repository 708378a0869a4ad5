// conv2d_relu and conv2d_relu_max_pool2d: the same values and gradients as conv2d, relu and
// max_pool2d one after the other; float64 gradchecks; ties inside a pool window; NaN passing through;
// nn::Sequential running the fused ops for the layers they replace; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "conv2d_relu_cases.h"
#include "minidl.h"
#include "nn/nn.h"
#include "test_util.h"

namespace minidl::conv2d_relu_test {

using minidl::testing::ConvReluCase;

namespace {

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  std::vector<double> av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i)
    ASSERT_NEAR(av[i], bv[i], tol * (1 + std::abs(bv[i]))) << what << " at " << i;
}

}  // namespace

TEST(Conv2dRelu, MatchesTheComposition) {
  for (const ConvReluCase& c : minidl::testing::conv_relu_cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(7);
    std::vector<Tensor> fused_in = minidl::testing::conv_relu_inputs(c, kFloat32, Device::cpu());
    std::vector<Tensor> plain_in;
    for (const Tensor& t : fused_in) plain_in.push_back(t.detach().clone().requires_grad_());
    Tensor fused = minidl::testing::run_conv_relu(c, fused_in, true);
    Tensor plain = minidl::testing::run_conv_relu(c, plain_in, false);
    expect_close(fused, plain, 1e-6, "output");
    // A random upstream gradient, so that every output position carries its own weight.
    Tensor up = randn(plain.shape());
    (fused * up).sum().backward();
    (plain * up).sum().backward();
    for (size_t i = 0; i < fused_in.size(); ++i) expect_close(fused_in[i].grad(), plain_in[i].grad(), 1e-5, "grad " + std::to_string(i));
  }
}

TEST(Conv2dRelu, Gradcheck) {
  for (const ConvReluCase& c : minidl::testing::conv_relu_cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(11);
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return minidl::testing::run_conv_relu(c, in, true); },
                       minidl::testing::conv_relu_inputs(c, kFloat64, Device::cpu()));
    EXPECT_TRUE(r) << r.message;
  }
}

// Equal maxima in a window: the gradient goes to the first one, as max_pool2d sends it; a window
// that ReLU zeroes passes nothing.
TEST(Conv2dRelu, PoolTiesAndZeroedWindows) {
  // A 1x1 convolution with weight 1 and bias 0.5 copies x + 0.5 through.
  Tensor x = Tensor::from_vector(std::vector<double>{2, 2, -3, -4,  //
                                                     1, 2, -5, -6},
                                 {1, 1, 2, 4})
                 .requires_grad_();
  Tensor w = ones({1, 1, 1, 1}, kFloat64).requires_grad_();
  Tensor b = full({1}, 0.5, kFloat64).requires_grad_();
  Tensor y = conv2d_relu_max_pool2d(x, w, b, 1, 0, 1, 2);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{2.5, 0}));
  (y * Tensor::from_vector(std::vector<double>{10, 20}, {1, 1, 1, 2})).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{10, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{10}));
}

// NaN passes through ReLU and wins the pool, as in PyTorch, and passes no gradient.
TEST(Conv2dRelu, NaNPassesThrough) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::from_vector(std::vector<double>{1, nan, 3, 4}, {1, 1, 2, 2}).requires_grad_();
  Tensor w = ones({1, 1, 1, 1}, kFloat64);
  Tensor pooled = conv2d_relu_max_pool2d(x, w, Tensor(), 1, 0, 1, 2);
  EXPECT_TRUE(std::isnan(pooled.item<double>()));
  Tensor y = conv2d_relu(x, w);
  EXPECT_TRUE(std::isnan(y.to_vector<double>()[1]));
  EXPECT_TRUE(std::isnan(relu(x).to_vector<double>()[1]));  // the unfused ReLU agrees
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>()[1], 0.0);
}

// Conv2d, ReLU, MaxPool2d(2) in a Sequential run fused; the result is the layers' own.
TEST(Conv2dRelu, SequentialFusesConvReluPool) {
  manual_seed(3);
  nn::Sequential net(nn::Conv2d(2, 4, 3), nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(4, 3, 2), nn::ReLU(),
                     nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(1)));  // the last pool overlaps: not fused
  Tensor x = randn({2, 2, 11, 10});
  Tensor fused = net(x);
  Tensor plain = x;
  for (const auto& m : net->children()) plain = m->forward(plain);
  expect_close(fused, plain, 1e-6, "Sequential");
  fused.sum().backward();
  std::vector<Tensor> fused_grads;
  for (const Tensor& p : net->parameters()) fused_grads.push_back(p.grad().clone());
  net->zero_grad();
  plain.sum().backward();
  const auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) expect_close(fused_grads[i], params[i].grad(), 1e-5, "parameter grad");
}

TEST(Conv2dRelu, Errors) {
  Tensor x = randn({1, 2, 5, 5}), w = randn({3, 2, 3, 3});
  minidl::testing::expect_error([&] { conv2d_relu_max_pool2d(x, w, Tensor(), 1, 0, 1, 4); },
                                {"conv2d_relu_max_pool2d", "4x4 pool does not fit the 3x3 output"});
  minidl::testing::expect_error([&] { conv2d_relu(x, randn({3, 1, 3, 3})); },
                                {"conv2d_relu", "expects 1 input channels", "has 2 channels"});
  minidl::testing::expect_error([&] { conv2d_relu_max_pool2d(x, w, randn({2}), 1, 0, 1, 2); },
                                {"conv2d_relu_max_pool2d", "expected bias of shape [3]"});
}

}  // namespace minidl::conv2d_relu_test
