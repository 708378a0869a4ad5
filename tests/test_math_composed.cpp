// logaddexp, logaddexp2, xlogy, sinc, heaviside, deg2rad, rad2deg, frac, float_power, true_divide,
// isposinf and isneginf: values against the C library in double, the edge values PyTorch defines
// (infinities, x = 0), float64 gradient checks, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::math_composed_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

using V = const std::vector<Tensor>&;
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST(MathComposed, LogaddexpIsStableAndKeepsInfinities) {
  const std::vector<double> a{0.5, 800, -800, -kInf, kInf, kInf, 3, -kInf};
  const std::vector<double> b{-1.25, 799, -801, 2, 1, kInf, 3, -kInf};
  const std::vector<double> got = values(logaddexp(Tensor::from_vector<double>(a), Tensor::from_vector<double>(b)));
  for (size_t i = 0; i < a.size(); ++i) {
    // log(e^a + e^b) = max + log1p(e^-(|a - b|)), in long double where the exponentials fit.
    const double hi = std::max(a[i], b[i]), lo = std::min(a[i], b[i]);
    const double want = std::isinf(hi) || std::isinf(lo) ? hi : hi + std::log1p(std::exp(lo - hi));
    EXPECT_DOUBLE_EQ(got[i], want) << "element " << i;
  }
  EXPECT_NEAR(logaddexp2(scalar_tensor(3.0, kFloat64), scalar_tensor(3.0, kFloat64)).item<double>(), 4.0, 1e-15);
  expect_gradcheck("logaddexp", [](V in) { return logaddexp(in[0], in[1]); }, {leaf({3, 4}), leaf({4})});
  expect_gradcheck("logaddexp2", [](V in) { return logaddexp2(in[0], in[1]); }, {leaf({5}), leaf({5})});
}

TEST(MathComposed, XlogyIsZeroWhereXIs) {
  const Tensor x = Tensor::from_vector<double>({0, 0, 2, 0, 3});
  const Tensor y = Tensor::from_vector<double>({0, 5, 0.5, std::nan(""), 2});
  const std::vector<double> got = values(xlogy(x, y));
  EXPECT_EQ(got[0], 0.0);
  EXPECT_EQ(got[1], 0.0);
  EXPECT_DOUBLE_EQ(got[2], 2 * std::log(0.5));
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_DOUBLE_EQ(got[4], 3 * std::log(2.0));
  // The gradient at x = 0 is finite: log(y) for x, x / y = 0 for y.
  Tensor xs = Tensor::from_vector<double>({0.0, 1.5}).requires_grad_(), ys = Tensor::from_vector<double>({0.0, 2.0}).requires_grad_();
  xlogy(xs, ys).sum().backward();
  EXPECT_EQ(values(ys.grad())[0], 0.0);
  EXPECT_DOUBLE_EQ(values(ys.grad())[1], 0.75);
  EXPECT_DOUBLE_EQ(values(xs.grad())[1], std::log(2.0));
  expect_gradcheck("xlogy", [](V in) { return xlogy(in[0], in[1].abs() + 0.1); }, {leaf({6}), leaf({6})});
  EXPECT_EQ(xlogy(Tensor::from_vector<int64_t>({2}), Tensor::from_vector<int64_t>({3})).dtype(), kFloat32);
}

TEST(MathComposed, SincHeavisideAndTheSmallOnes) {
  const std::vector<double> xs{0, 0.5, -1.25, 3};
  const std::vector<double> s = values(sinc(Tensor::from_vector<double>(xs)));
  EXPECT_EQ(s[0], 1.0);
  for (size_t i = 1; i < xs.size(); ++i)
    EXPECT_NEAR(s[i], std::sin(std::numbers::pi * xs[i]) / (std::numbers::pi * xs[i]), 1e-15) << i;
  // The gradient at 0 is 0 (sinc is even), not NaN.
  Tensor z = scalar_tensor(0.0, kFloat64).requires_grad_();
  sinc(z).backward();
  EXPECT_EQ(z.grad().item<double>(), 0.0);
  expect_gradcheck("sinc", [](V in) { return sinc(in[0]); }, {leaf({7})});

  const Tensor h = heaviside(Tensor::from_vector<double>({-2, 0, 3, 0}), Tensor::from_vector<double>({0.5}));
  EXPECT_EQ(values(h), (std::vector<double>{0, 0.5, 1, 0.5}));
  EXPECT_NEAR(deg2rad(Tensor::from_vector<int64_t>({180})).item<float>(), std::numbers::pi_v<float>, 1e-6);
  EXPECT_EQ(deg2rad(Tensor::from_vector<int64_t>({180})).dtype(), kFloat32);
  EXPECT_DOUBLE_EQ(rad2deg(scalar_tensor(std::numbers::pi, kFloat64)).item<double>(), 180.0);
  EXPECT_EQ(values(frac(Tensor::from_vector<double>({2.75, -2.75, 4}))), (std::vector<double>{0.75, -0.75, 0}));
  expect_gradcheck("frac", [](V in) { return frac(in[0] * 3.0); }, {leaf({5})});
  const Tensor fp = float_power(Tensor::from_vector<float>({2}), Tensor::from_vector<int64_t>({10}));
  EXPECT_EQ(fp.dtype(), kFloat64);
  EXPECT_EQ(fp.item<double>(), 1024.0);
  EXPECT_EQ(float_power(Tensor::from_vector<int64_t>({3}), 0.5).dtype(), kFloat64);
  EXPECT_EQ(true_divide(Tensor::from_vector<int64_t>({3}), Tensor::from_vector<int64_t>({2})).item<float>(), 1.5f);
  const Tensor inf = Tensor::from_vector<double>({kInf, -kInf, 1, std::nan("")});
  EXPECT_EQ(isposinf(inf).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(isneginf(inf).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 0}));
}

TEST(MathComposed, BadInputSaysWhatWasExpected) {
  expect_error([] { logaddexp(zeros({2}, kInt64), zeros({2}, kInt64)); }, {"logaddexp", "floating", "int64"});
  expect_error([] { sinc(zeros({2}, kInt64)); }, {"sinc", "floating"});
  expect_error([] { frac(zeros({2}, kInt32)); }, {"frac", "floating"});
  expect_error([] { heaviside(zeros({2}), zeros({1}, kFloat64)); }, {"heaviside", "one dtype"});
}

}  // namespace minidl::math_composed_test
