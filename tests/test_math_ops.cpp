// The elementwise math ops: special values (halves, signed zeros, infinities, NaN) against
// PyTorch's results, integer inputs, float64 gradient checks on random inputs, broadcasting, and
// the errors for bad input.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "minidl.h"
#include "float64_util.h"
#include "test_util.h"

namespace minidl::math_ops_test {

using minidl::testing::expect_error;
using minidl::testing::f64;
using minidl::testing::expect_gradcheck;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();
using U = Tensor (*)(const Tensor&);

// Elementwise equality that tells -0.0 from 0.0 and lets NaN match NaN.
void expect_same(const Tensor& t, const std::vector<double>& expected, const char* what) {
  std::vector<double> got = t.to(kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]: " << got[i];
    } else {
      EXPECT_EQ(got[i], expected[i]) << what << " [" << i << "]";
      EXPECT_EQ(std::signbit(got[i]), std::signbit(expected[i])) << what << " [" << i << "]: sign of " << got[i];
    }
  }
}

void expect_near(const Tensor& t, const std::vector<double>& expected, double tol, const char* what) {
  std::vector<double> got = t.to(kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << what << " [" << i << "]";
}

// A float64 leaf of random values in [low, high).
Tensor uniform_leaf(const Shape& shape, double low, double high) {
  return (rand(shape, kFloat64) * (high - low) + low).detach().requires_grad_();
}

}  // namespace

TEST(MathOps, RoundHalvesToEven) {
  // torch.round(torch.tensor([2.5, 0.5, 1.5, -0.5, -2.5, 3.7, -3.2, -0.0]))
  expect_same(round(f64({2.5, 0.5, 1.5, -0.5, -2.5, 3.7, -3.2, -0.0})), {2, 0, 2, -0.0, -2, 4, -3, -0.0}, "round");
  expect_same(round(Tensor::from_vector<float>({2.5f, -1.5f, kInfF, kNaNF})), {2, -2, kInf, kNaN}, "round float32");
  // torch.round(x, decimals=2) and decimals=-1, -2.
  expect_near(round(f64({1.2345, 123.456, -0.125}), 2), {1.23, 123.46, -0.12}, 1e-12, "round 2 decimals");
  expect_same(round(f64({25, 35, -15, 1234.5678}), -1), {20, 40, -20, 1230}, "round -1 decimals");
  expect_same(round(f64({1250, 1350.1}), -2), {1200, 1400}, "round -2 decimals");
}

TEST(MathOps, FloorCeilTruncSign) {
  Tensor x = f64({-1.5, -0.5, -0.0, 0.0, 0.5, 1.5, kInf, -kInf, kNaN});
  expect_same(floor(x), {-2, -1, -0.0, 0, 0, 1, kInf, -kInf, kNaN}, "floor");
  expect_same(ceil(x), {-1, -0.0, -0.0, 0, 1, 2, kInf, -kInf, kNaN}, "ceil");
  expect_same(trunc(x), {-1, -0.0, -0.0, 0, 0, 1, kInf, -kInf, kNaN}, "trunc");
  // torch.sign: 0 for both zeros and for NaN.
  expect_same(sign(x), {-1, -1, 0, 0, 1, 1, 1, -1, 0}, "sign");
}

TEST(MathOps, IntegerInputs) {
  Tensor i = Tensor::from_vector<int64_t>({-5, 0, 7});
  const U rounding[] = {floor, ceil, trunc};
  for (U op : rounding) {
    Tensor y = op(i);
    EXPECT_EQ(y.dtype(), kInt64);
    EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{-5, 0, 7}));
  }
  EXPECT_EQ(round(i).to_vector<int64_t>(), (std::vector<int64_t>{-5, 0, 7}));
  EXPECT_EQ(sign(i).dtype(), kInt64);
  EXPECT_EQ(sign(i).to_vector<int64_t>(), (std::vector<int64_t>{-1, 0, 1}));
  Tensor b = Tensor::from_vector<int64_t>({1, 0, 1}).to(kBool);
  EXPECT_EQ(sign(b).dtype(), kBool);
  // Transcendental functions of integers compute in float32, as PyTorch's.
  Tensor s = sin(i);
  EXPECT_EQ(s.dtype(), kFloat32);
  expect_near(s, {std::sin(-5.0), 0, std::sin(7.0)}, 1e-6, "sin of int64");
  EXPECT_EQ(sqrt(i.to(kBool)).dtype(), kFloat32);
  EXPECT_EQ(log2(Tensor::from_vector<int64_t>({8})).item<float>(), 3.0f);
}

TEST(MathOps, TranscendentalSpecialValues) {
  expect_same(rsqrt(f64({4, 0, -0.0, -1, kInf})), {0.5, kInf, -kInf, kNaN, 0}, "rsqrt");
  expect_same(sqrt(f64({4, kInf, kInf, kInf, kInf, kInf, kInf, kInf, kInf, -0.0})),
              {2, kInf, kInf, kInf, kInf, kInf, kInf, kInf, kInf, -0.0}, "sqrt (vectorized)");
  expect_same(reciprocal(f64({4, 0, -0.0, kInf, -kInf})), {0.25, kInf, -kInf, 0, -0.0}, "reciprocal");
  expect_same(log1p(f64({0, -1, -2, kInf})), {0, -kInf, kNaN, kInf}, "log1p");
  EXPECT_DOUBLE_EQ(log1p(f64({1e-12})).item<double>(), 9.999999999995e-13);  // 1e-12 - 1e-24/2
  expect_same(expm1(f64({0, -0.0, -kInf, kInf})), {0, -0.0, -1, kInf}, "expm1");
  EXPECT_DOUBLE_EQ(expm1(f64({1e-12})).item<double>(), 1.0000000000005e-12);
  expect_same(log2(f64({8, 0.5, 0, -1})), {3, -1, -kInf, kNaN}, "log2");
  expect_same(log10(f64({1000, 0.01, 0})), {3, -2, -kInf}, "log10");
  // torch.erf(torch.tensor([0.5, -1.0], dtype=torch.float64))
  expect_near(erf(f64({0.5, -1, kInf, -kInf})), {0.5204998778130465, -0.8427007929497149, 1, -1}, 1e-15, "erf");
  expect_near(sin(f64({M_PI / 6, -M_PI / 2})), {0.5, -1}, 1e-15, "sin");
  expect_near(cos(f64({M_PI / 3, M_PI})), {0.5, -1}, 1e-15, "cos");
  expect_near(tan(f64({M_PI / 4})), {1}, 1e-15, "tan");
  expect_same(asin(f64({1, -0.0, 2})), {M_PI / 2, -0.0, kNaN}, "asin");
  expect_same(acos(f64({1, -1.5})), {0, kNaN}, "acos");
  expect_near(atan(f64({1, kInf})), {M_PI / 4, M_PI / 2}, 1e-15, "atan");
  expect_near(sinh(f64({1})), {1.1752011936438014}, 1e-15, "sinh");
  expect_near(cosh(f64({1})), {1.5430806348152437}, 1e-15, "cosh");
}

TEST(MathOps, Atan2) {
  // torch.atan2 of (y, x): the quadrant from both signs, signed zeros included.
  expect_same(atan2(f64({1, -0.0, 0.0, 0.0, -1}), f64({-1, -1, -0.0, 0.0, 0})),
              {3 * M_PI / 4, -M_PI, M_PI, 0, -M_PI / 2}, "atan2");
  // Broadcast, and integers computed in float32.
  Tensor y = atan2(Tensor::from_vector<int64_t>({1, -1}).reshape({2, 1}), Tensor::from_vector<int64_t>({1, 0, -1}));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  expect_near(y, {M_PI / 4, M_PI / 2, 3 * M_PI / 4, -M_PI / 4, -M_PI / 2, -3 * M_PI / 4}, 1e-6, "atan2 int");
}

TEST(MathOps, MaximumMinimum) {
  Tensor a = f64({1, 5, kNaN, -0.0, 2});
  Tensor b = f64({3, 2, 1, 4, kNaN});
  expect_same(maximum(a, b), {3, 5, kNaN, 4, kNaN}, "maximum");
  expect_same(minimum(a, b), {1, 2, kNaN, -0.0, kNaN}, "minimum");
  Tensor i = maximum(Tensor::from_vector<int64_t>({1, 9}), Tensor::from_vector<int64_t>({4, 2}));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{4, 9}));
  // Mixed dtypes promote; a 0-d operand broadcasts.
  Tensor m = minimum(Tensor::from_vector<int64_t>({1, 9}), full({}, 2.5, kFloat32));
  EXPECT_EQ(m.dtype(), kFloat32);
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, 2.5f}));
  // Bool: maximum is or, minimum is and.
  Tensor t = Tensor::from_vector<int64_t>({1, 1, 0, 0}).to(kBool), f = Tensor::from_vector<int64_t>({1, 0, 1, 0}).to(kBool);
  EXPECT_EQ(maximum(t, f).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(minimum(t, f).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0}));
}

TEST(MathOps, MaximumGradientSplitsTies) {
  // PyTorch: the larger gets the gradient, equal operands get half each.
  Tensor a = f64({1, 2, 3}).requires_grad_();
  Tensor b = f64({3, 2, 1}).requires_grad_();
  maximum(a, b).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 0.5, 0}));
  Tensor c = f64({1, 2, 3}).requires_grad_();
  Tensor d = f64({3, 2, 1}).requires_grad_();
  minimum(c, d).sum().backward();
  EXPECT_EQ(c.grad().to_vector<double>(), (std::vector<double>{1, 0.5, 0}));
  EXPECT_EQ(d.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 1}));
  // A broadcast operand sums its gradient: max(x, 0) over a 0-d zero.
  Tensor x = f64({-1, 2, 0}).requires_grad_();
  Tensor zero = f64({0}).reshape({}).requires_grad_();
  maximum(x, zero).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0.5}));
  EXPECT_DOUBLE_EQ(zero.grad().item<double>(), 1.5);
}

TEST(MathOps, Fmod) {
  // C's fmod keeps the dividend's sign; remainder takes the divisor's.
  expect_same(fmod(f64({-7, 7, -7, 5.5, -0.0, 1}), f64({2, -2, -2, 2, 3, 0})), {-1, 1, -1, 1.5, -0.0, kNaN}, "fmod");
  expect_same(fmod(f64({-7, 7}), 2), {-1, 1}, "fmod scalar");
  expect_same(remainder(f64({-7, 7}), f64({2, -2})), {1, -1}, "remainder");
  Tensor i = fmod(Tensor::from_vector<int64_t>({-7, 7, 6}), 4);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{-3, 3, 2}));
  EXPECT_EQ(fmod(Tensor::from_vector<int64_t>({7}), 2.5).dtype(), kFloat32);
  expect_error([] { fmod(Tensor::from_vector<int64_t>({1, 2}), Tensor::from_vector<int64_t>({1, 0})); },
               {"fmod", "division by zero"});
}

TEST(MathOps, FloatingClasses) {
  Tensor x = Tensor::from_vector<float>({1, kNaNF, kInfF, -kInfF, -0.0f});
  EXPECT_EQ(isnan(x).dtype(), kBool);
  EXPECT_EQ(isnan(x).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(isinf(x).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 1, 0}));
  EXPECT_EQ(isfinite(x).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 1}));
  Tensor i = Tensor::from_vector<int64_t>({1, 2});
  EXPECT_EQ(isnan(i).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(isinf(i).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(isfinite(i).to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
}

TEST(MathOps, NanToNum) {
  // torch.nan_to_num(torch.tensor([nan, inf, -inf, 1.5])): the dtype's largest and lowest values.
  expect_same(nan_to_num(Tensor::from_vector<float>({kNaNF, kInfF, -kInfF, 1.5f})), {0, FLT_MAX, -FLT_MAX, 1.5},
              "float32 defaults");
  expect_same(nan_to_num(f64({kNaN, kInf, -kInf, -2})), {0, DBL_MAX, -DBL_MAX, -2}, "float64 defaults");
  expect_same(nan_to_num(f64({kNaN, kInf, -kInf, 3}), 1.0, 2.0, -2.0), {1, 2, -2, 3}, "given values");
  expect_same(nan_to_num(f64({kNaN, kInf}), std::nullopt, 9.0), {0, 9}, "posinf only");
  EXPECT_EQ(nan_to_num(Tensor::from_vector<int64_t>({3})).to_vector<int64_t>(), (std::vector<int64_t>{3}));
  // The gradient passes where x was finite.
  Tensor x = f64({kNaN, kInf, -kInf, 1.5}).requires_grad_();
  (nan_to_num(x) * 2).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 2}));
}

TEST(MathOps, GradcheckUnary) {
  manual_seed(11);
  struct Case {
    const char* name;
    U op;
    double low, high;
  };
  const Case cases[] = {
      {"sin", sin, -3, 3},        {"cos", cos, -3, 3},          {"tan", tan, -1.2, 1.2},
      {"asin", asin, -0.9, 0.9},  {"acos", acos, -0.9, 0.9},    {"atan", atan, -3, 3},
      {"sinh", sinh, -2, 2},      {"cosh", cosh, -2, 2},        {"rsqrt", rsqrt, 0.2, 3},
      {"reciprocal", reciprocal, 0.3, 3}, {"log1p", log1p, -0.8, 3}, {"expm1", expm1, -2, 2},
      {"log2", log2, 0.2, 4},     {"log10", log10, 0.2, 4},     {"erf", erf, -2, 2},
  };
  for (const Case& c : cases) {
    expect_gradcheck(c.name, [op = c.op](const std::vector<Tensor>& in) { return op(in[0]); },
                     {uniform_leaf({3, 4}, c.low, c.high)});
  }
  // The gradients are ops themselves, so they differentiate again: d2 sin = -sin, d2 atan = -2x / (1 + x^2)^2.
  Tensor x = uniform_leaf({5}, -3, 3);
  Tensor g = autograd::grad({sin(x).sum()}, {x}, {}, true, true)[0];
  Tensor g2 = autograd::grad({g.sum()}, {x})[0];
  std::vector<double> xv = x.to_vector<double>(), g2v = g2.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(g2v[i], -std::sin(xv[i]), 1e-12);
  Tensor h = autograd::grad({atan(x).sum()}, {x}, {}, true, true)[0];
  std::vector<double> h2 = autograd::grad({h.sum()}, {x})[0].to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i)
    EXPECT_NEAR(h2[i], -2 * xv[i] / ((1 + xv[i] * xv[i]) * (1 + xv[i] * xv[i])), 1e-12);
}

TEST(MathOps, RoundingGradientIsZero) {
  const U ops[] = {floor, ceil, trunc, round, sign};
  for (U op : ops) {
    Tensor x = f64({-1.3, 0.4, 2.6}).requires_grad_();
    Tensor y = op(x) + x;
    y.sum().backward();
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1, 1}));
  }
  Tensor x = f64({1.26}).requires_grad_();
  round(x, 1).sum().backward();
  EXPECT_EQ(x.grad().item<double>(), 0.0);
}

TEST(MathOps, GradcheckBinary) {
  manual_seed(12);
  expect_gradcheck("atan2", [](const std::vector<Tensor>& in) { return atan2(in[0], in[1]); },
                   {uniform_leaf({2, 3}, -2, 2), uniform_leaf({2, 3}, 0.5, 2)});
  expect_gradcheck("atan2 broadcast", [](const std::vector<Tensor>& in) { return atan2(in[0], in[1]); },
                   {uniform_leaf({2, 3}, 0.5, 2), uniform_leaf({3}, -2, -0.5)});
  // maximum / minimum away from ties: a in [0, 1), b in [2, 3) half the time.
  Tensor a = uniform_leaf({2, 4}, 0, 1);
  Tensor b = (uniform_leaf({2, 4}, 0, 1) + f64({2, -2, 2, -2}).reshape({1, 4})).detach().requires_grad_();
  expect_gradcheck("maximum", [](const std::vector<Tensor>& in) { return maximum(in[0], in[1]); }, {a, b});
  expect_gradcheck("minimum", [](const std::vector<Tensor>& in) { return minimum(in[0], in[1]); }, {a, b});
  // fmod away from its jumps (a / b far from integers).
  expect_gradcheck("fmod", [](const std::vector<Tensor>& in) { return fmod(in[0], in[1]); },
                   {f64({5.3, -4.1, 2.2, 0.4}).requires_grad_(), f64({2.0, 1.5, -0.7, 3}).requires_grad_()});
}

TEST(MathOps, BadInput) {
  Tensor b = Tensor::from_vector<int64_t>({1, 0}).to(kBool);
  expect_error([&] { floor(b); }, {"floor", "bool"});
  expect_error([&] { round(b, 2); }, {"round", "bool"});
  expect_error([&] { fmod(b, b); }, {"fmod", "bool"});
  expect_error([] { maximum(zeros({2, 3}), zeros({4})); }, {"maximum", "[2, 3]", "[4]"});
  expect_error([] { atan2(zeros({3}), zeros({2})); }, {"atan2"});
  expect_error([] { sin(Tensor()); }, {"sin", "defined"});
}

}  // namespace minidl::math_ops_test
