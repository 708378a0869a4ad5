// leaky_relu, gelu (exact and tanh) and silu with their modules: values against the formulas and
// PyTorch's printed results, gradients against central differences and at the kink, the strided
// and parallel kernel paths, and the errors for bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "minidl.h"
#include "test_util.h"
#include "nn/nn.h"

namespace minidl::activations_test {

using minidl::testing::error_of;

namespace {

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double silu_ref(double x) { return x / (1 + std::exp(-x)); }
double leaky_ref(double x, double slope) { return x > 0 ? x : slope * x; }

// Random values kept at least 0.05 away from 0, so central differences never straddle leaky_relu's kink.
Tensor away_from_zero(const Shape& shape) {
  Tensor x = randn(shape, kFloat64);
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = e >= 0 ? e + 0.05 : e - 0.05;
  return Tensor::from_vector(v, shape);
}

using Activation = std::function<Tensor(const Tensor&)>;
using Reference = std::function<double(double)>;

struct Case {
  const char* name;
  Activation op;
  Reference ref;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, [](double x) { return leaky_ref(x, 0.01); }},
      {"leaky_relu 0.2", [](const Tensor& x) { return leaky_relu(x, 0.2); },
       [](double x) { return leaky_ref(x, 0.2); }},
      {"leaky_relu -0.5", [](const Tensor& x) { return leaky_relu(x, -0.5); },
       [](double x) { return leaky_ref(x, -0.5); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }, gelu_ref},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref},
      {"silu", [](const Tensor& x) { return silu(x); }, silu_ref},
  };
  return all;
}

void expect_matches(const Case& c, const Tensor& x, double tol) {
  std::vector<double> in = x.to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> out = c.op(x).to(kFloat64).to_vector<double>();
  ASSERT_EQ(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_NEAR(out[i], c.ref(in[i]), tol) << c.name << " at x = " << in[i];
}

}  // namespace

TEST(Activations, GeluAtKnownPoints) {
  // torch.nn.functional.gelu(torch.tensor([-3., -1., -0.5, 0., 0.5, 1., 3.], dtype=torch.float64))
  Tensor x = Tensor::from_vector<double>({-3, -1, -0.5, 0, 0.5, 1, 3});
  const std::vector<double> exact = {-0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0.0,
                                     0.34573123063700656, 0.8413447460685429,   2.99595030590511};
  std::vector<double> got = gelu(x).to_vector<double>();
  for (size_t i = 0; i < exact.size(); ++i) EXPECT_NEAR(got[i], exact[i], 1e-12) << "x = " << x.to_vector<double>()[i];
  // approximate="tanh": gelu(1) = 0.8411919906082768, gelu(-1) = -0.15880800939172324.
  std::vector<double> approx = gelu(Tensor::from_vector<double>({1, -1}), "tanh").to_vector<double>();
  EXPECT_NEAR(approx[0], 0.8411919906082768, 1e-12);
  EXPECT_NEAR(approx[1], -0.15880800939172324, 1e-12);
  for (double v : {-3.0, -1.0, 0.25, 2.0}) {
    EXPECT_NEAR(gelu(Tensor::from_vector<double>({v})).item<double>(), gelu_ref(v), 1e-15);
    EXPECT_NEAR(gelu(Tensor::from_vector<float>({static_cast<float>(v)})).item<float>(), gelu_ref(v), 1e-6);
  }
}

TEST(Activations, LeakyReluAndSiluAtKnownPoints) {
  Tensor x = Tensor::from_vector<double>({-2, -0.5, 0, 1.5});
  EXPECT_EQ(leaky_relu(x, 0.1).to_vector<double>(), (std::vector<double>{-0.2, -0.05, 0, 1.5}));
  EXPECT_EQ(leaky_relu(x).to_vector<double>(), (std::vector<double>{-0.02, -0.005, 0, 1.5}));
  // silu(1) = sigmoid(1) = 0.7310585786300049; silu(-1) = -0.2689414213699951.
  std::vector<double> s = silu(Tensor::from_vector<double>({1, -1, 0})).to_vector<double>();
  EXPECT_NEAR(s[0], 0.7310585786300049, 1e-15);
  EXPECT_NEAR(s[1], -0.2689414213699951, 1e-15);
  EXPECT_EQ(s[2], 0.0);
}

TEST(Activations, ValuesOnEveryKernelPath) {
  manual_seed(21);
  for (const Case& c : cases()) {
    Tensor x = randn({3, 5}, kFloat64) * 3.0;
    expect_matches(c, x, 1e-14);
    expect_matches(c, x.to(kFloat32), 2e-6);
    expect_matches(c, x.t(), 1e-14);                 // strided input
    expect_matches(c, x.to(kFloat32).t(), 2e-6);
    Tensor big = randn({70000}, kFloat32) * 4.0;   // past the threshold for splitting across threads
    expect_matches(c, big, 4e-6);
  }
}

TEST(Activations, Gradcheck) {
  manual_seed(22);
  for (const Case& c : cases()) {
    Tensor x = away_from_zero({4, 5}).requires_grad_();
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return c.op(in[0]); }, {x});
    EXPECT_TRUE(r) << c.name << ": " << r.message;
    Tensor y = away_from_zero({3, 4}).requires_grad_();
    auto t = gradcheck([&](const std::vector<Tensor>& in) { return c.op(in[0].t()) * 2.0; }, {y});
    EXPECT_TRUE(t) << c.name << " (strided): " << t.message;
  }
}

TEST(Activations, GradientsAtPoints) {
  // leaky_relu: 1 above 0, the slope at and below 0 (PyTorch takes the slope at 0).
  Tensor x = Tensor::from_vector<double>({-1, 0, 2}).requires_grad_();
  leaky_relu(x, 0.3).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.3, 0.3, 1}));
  // gelu'(0) = 0.5, silu'(0) = 0.5; gelu'(1) = Phi(1) + phi(1) = 0.8413447460685429 + 0.24197072451914337.
  Tensor z = Tensor::from_vector<double>({0, 1}).requires_grad_();
  gelu(z).sum().backward();
  EXPECT_NEAR(z.grad().to_vector<double>()[0], 0.5, 1e-15);
  EXPECT_NEAR(z.grad().to_vector<double>()[1], 0.8413447460685429 + 0.24197072451914337, 1e-14);
  Tensor s = Tensor::from_vector<double>({0}).requires_grad_();
  silu(s).sum().backward();
  EXPECT_NEAR(s.grad().item<double>(), 0.5, 1e-15);
}

TEST(Activations, ModulesAndPrinting) {
  auto printed = [](const nn::Module& m) {
    std::ostringstream os;
    os << m;
    return os.str();
  };
  nn::LeakyReLU leaky(nn::LeakyReLUOptions().negative_slope(0.2));
  EXPECT_EQ(printed(*leaky), "LeakyReLU(negative_slope=0.2)");
  EXPECT_EQ(printed(*nn::LeakyReLU()), "LeakyReLU(negative_slope=0.01)");
  nn::GELU g(nn::GELUOptions().approximate("tanh"));
  EXPECT_EQ(printed(*g), "GELU(approximate='tanh')");
  EXPECT_EQ(printed(*nn::GELU()), "GELU(approximate='none')");
  EXPECT_EQ(printed(*nn::SiLU()), "SiLU()");
  Tensor x = Tensor::from_vector<double>({-1, 1});
  EXPECT_EQ(leaky(x).to_vector<double>(), (std::vector<double>{-0.2, 1}));
  EXPECT_NEAR(g(x).to_vector<double>()[0], gelu_tanh_ref(-1), 1e-15);
  EXPECT_NEAR(nn::SiLU()(x).to_vector<double>()[1], silu_ref(1), 1e-15);
  nn::Sequential seq(nn::Linear(3, 4), nn::GELU(), nn::Linear(4, 2), nn::SiLU(), nn::LeakyReLU());
  EXPECT_EQ(seq->forward(zeros({2, 3})).shape(), (Shape{2, 2}));
  EXPECT_EQ(nn::functional::gelu(x).shape(), x.shape());
}

TEST(Activations, Errors) {
  std::string approx = error_of([] { gelu(zeros({2}), "fast"); });
  EXPECT_NE(approx.find("gelu: expected approximate to be \"none\" or \"tanh\", got \"fast\""), std::string::npos)
      << approx;
  EXPECT_NE(error_of([] { nn::GELU(nn::GELUOptions().approximate("erf")); }).find("got \"erf\""), std::string::npos);
  std::string dtype = error_of([] { silu(zeros({2}, kInt64)); });
  EXPECT_NE(dtype.find("silu: expected a floating tensor, got"), std::string::npos) << dtype;
  EXPECT_NE(error_of([] { leaky_relu(zeros({2}, kInt64)); }).find("leaky_relu: expected a floating tensor"),
            std::string::npos);
}

}  // namespace minidl::activations_test
