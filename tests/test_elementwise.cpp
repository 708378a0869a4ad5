// Elementwise ops: values against std:: on every broadcasting pattern, gradients against central
// differences, and a check that gradcheck itself catches a wrong backward.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "minidl.h"

namespace minidl::elementwise_test {

namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using UnaryFn = Tensor (*)(const Tensor&);

struct BinaryCase {
  const char* name;
  BinaryFn op;
  double (*ref)(double, double);
};

const BinaryCase kBinary[] = {
    {"add", add, [](double a, double b) { return a + b; }},
    {"sub", sub, [](double a, double b) { return a - b; }},
    {"mul", mul, [](double a, double b) { return a * b; }},
    {"div", div, [](double a, double b) { return a / b; }},
    {"pow", pow, [](double a, double b) { return std::pow(a, b); }},
};

struct UnaryCase {
  const char* name;
  UnaryFn op;
  double (*ref)(double);
  bool positive;  // the op (or its gradient) is defined only for positive inputs
};

const UnaryCase kUnary[] = {
    {"neg", neg, [](double x) { return -x; }, false},
    {"exp", exp, [](double x) { return std::exp(x); }, false},
    {"log", log, [](double x) { return std::log(x); }, true},
    {"sqrt", sqrt, [](double x) { return std::sqrt(x); }, true},
    {"relu", relu, [](double x) { return x > 0 ? x : 0.0; }, false},
    {"sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, false},
    {"tanh", tanh, [](double x) { return std::tanh(x); }, false},
};

struct ShapePair {
  Shape a, b;
};

// Broadcasting on every axis, a scalar side, a missing leading dim, batch 1, odd sizes.
const ShapePair kShapes[] = {
    {{3, 1, 5}, {1, 4, 1}}, {{4, 5}, {5}}, {{5}, {4, 5}},      {{2, 3, 4}, {}},
    {{}, {2, 3}},           {{3, 4}, {2, 3, 4}}, {{1, 5}, {1, 5}}, {{3, 7}, {3, 1}},
};

// Random values kept in [0.5, 2): positive for log/sqrt/pow, away from the singularities of div.
Tensor positive(const Shape& shape, DType dtype = kFloat64) { return uniform(shape, 0.5, 2.0, dtype); }

// Random values at least 0.1 away from 0, where relu has its kink.
Tensor away_from_zero(const Shape& shape) {
  std::vector<double> v = randn(shape, kFloat64).to_vector<double>();
  for (double& x : v) x += x >= 0 ? 0.1 : -0.1;
  return Tensor::from_vector(v).view(shape);
}

// Row-major index of `out_index` into a tensor of `shape` broadcast to `out_shape`.
int64_t broadcast_index(const Shape& shape, const Shape& out_shape, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out_shape.size()) - 1; d >= 0; --d) {
    int64_t coord = flat % out_shape[d];
    flat /= out_shape[d];
    int64_t sd = d - static_cast<int64_t>(out_shape.size() - shape.size());
    if (sd >= 0) {
      if (shape[sd] != 1) index += coord * stride;
      stride *= shape[sd];
    }
  }
  return index;
}

}  // namespace

TEST(Elementwise, BinaryForwardBroadcastsLikeNumpy) {
  manual_seed(21);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const ShapePair& s : kShapes) {
      Tensor a = positive(s.a, dtype), b = positive(s.b, dtype);
      std::vector<double> av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
      for (const BinaryCase& c : kBinary) {
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype));
        Tensor out = c.op(a, b);
        Shape expected = broadcast_shapes(s.a, s.b, "test");
        ASSERT_EQ(out.shape(), expected);
        std::vector<double> got = out.to(kFloat64).to_vector<double>();
        for (int64_t i = 0; i < out.numel(); ++i) {
          double ref = c.ref(av[broadcast_index(s.a, expected, i)], bv[broadcast_index(s.b, expected, i)]);
          EXPECT_NEAR(got[i], ref, (dtype == kFloat32 ? 1e-6 : 1e-15) * (1 + std::abs(ref))) << "element " << i;
        }
      }
    }
  }
}

TEST(Elementwise, UnaryForwardMatchesStd) {
  manual_seed(22);
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const UnaryCase& c : kUnary) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype));
      // Contiguous (vectorized path), transposed (strided path), and large enough to be split
      // across threads.
      Tensor base = c.positive ? positive({3, 5}, dtype) : mul(randn({3, 5}, dtype), full({}, 2.0, dtype));
      for (Tensor x : {base, base.t(), c.positive ? positive({40000}, dtype) : randn({40000}, dtype)}) {
        std::vector<double> xv = x.to(kFloat64).to_vector<double>();
        std::vector<double> got = c.op(x).to(kFloat64).to_vector<double>();
        ASSERT_EQ(got.size(), xv.size());
        for (size_t i = 0; i < got.size(); ++i) {
          double ref = c.ref(xv[i]);
          ASSERT_NEAR(got[i], ref, (dtype == kFloat32 ? 2e-6 : 1e-14) * (1 + std::abs(ref))) << "element " << i;
        }
      }
    }
  }
}

TEST(Elementwise, ScalarOperatorsAndPowScalar) {
  Tensor x = Tensor::from_vector<double>({1, 2, 4});
  EXPECT_EQ((x + 1.0).to_vector<double>(), (std::vector<double>{2, 3, 5}));
  EXPECT_EQ((2.0 - x).to_vector<double>(), (std::vector<double>{1, 0, -2}));
  EXPECT_EQ((x * 3.0).to_vector<double>(), (std::vector<double>{3, 6, 12}));
  EXPECT_EQ((8.0 / x).to_vector<double>(), (std::vector<double>{8, 4, 2}));
  EXPECT_EQ(pow(x, 2.0).to_vector<double>(), (std::vector<double>{1, 4, 16}));
  EXPECT_EQ(pow(x, 0.5).to_vector<double>(), (std::vector<double>{1, std::sqrt(2.0), 2}));
  EXPECT_EQ(eq(x, Tensor::from_vector<double>({1, 0, 4})).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(neg(Tensor::from_vector<int64_t>({3, -1})).to_vector<int64_t>(), (std::vector<int64_t>{-3, 1}));
}

TEST(Elementwise, BinaryGradcheckOnEveryBroadcast) {
  manual_seed(23);
  for (const ShapePair& s : kShapes) {
    for (const BinaryCase& c : kBinary) {
      SCOPED_TRACE(std::string(c.name) + " " + ::testing::PrintToString(s.a) + " with " + ::testing::PrintToString(s.b));
      BinaryFn op = c.op;
      auto r = gradcheck([op](const std::vector<Tensor>& in) { return op(in[0], in[1]); },
                         {positive(s.a).requires_grad_(), positive(s.b).requires_grad_()});
      EXPECT_TRUE(r) << r.message;
    }
  }
}

TEST(Elementwise, GradcheckOneSideOnly) {
  manual_seed(24);
  // The other operand is a constant: its gradient must not be computed, the wanted one still right.
  Tensor constant = positive({4, 1});
  for (const BinaryCase& c : kBinary) {
    SCOPED_TRACE(c.name);
    BinaryFn op = c.op;
    auto left = gradcheck([&](const std::vector<Tensor>& in) { return op(in[0], constant); },
                          {positive({4, 3}).requires_grad_()});
    EXPECT_TRUE(left) << left.message;
    auto right = gradcheck([&](const std::vector<Tensor>& in) { return op(constant, in[0]); },
                           {positive({3}).requires_grad_()});
    EXPECT_TRUE(right) << right.message;
    EXPECT_FALSE(constant.grad().defined());
  }
}

TEST(Elementwise, PowScalarExponentGradcheck) {
  manual_seed(25);
  for (double e : {2.0, 3.0, 0.5, -1.5}) {
    SCOPED_TRACE(e);
    auto r = gradcheck([e](const std::vector<Tensor>& in) { return pow(in[0], e); }, {positive({2, 3}).requires_grad_()});
    EXPECT_TRUE(r) << r.message;
  }
}

TEST(Elementwise, UnaryGradcheck) {
  manual_seed(26);
  for (const UnaryCase& c : kUnary) {
    for (const Shape& shape : {Shape{2, 3}, Shape{1, 7}, Shape{}}) {
      SCOPED_TRACE(std::string(c.name) + " " + ::testing::PrintToString(shape));
      UnaryFn op = c.op;
      Tensor x = c.positive ? positive(shape) : away_from_zero(shape);
      auto r = gradcheck([op](const std::vector<Tensor>& in) { return op(in[0]); }, {x.requires_grad_()});
      EXPECT_TRUE(r) << r.message;
    }
  }
  // A chain that reuses its input: the tape must add both paths.
  auto r = gradcheck([](const std::vector<Tensor>& in) { return mul(tanh(in[0]), sigmoid(in[0])); },
                     {randn({3, 2}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(Elementwise, GradcheckCatchesAWrongBackward) {
  manual_seed(27);
  // x^3 with the derivative written as 2x instead of 3x^2.
  auto bad_cube = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Tensor out;
    {
      NoGradGuard no_grad;
      out = mul(mul(x, x), x);
    }
    if (autograd::needs_recording({x})) {
      autograd::record("bad_cube", out, {x}, [xs = x.detach()](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{mul(g, mul(xs, scalar_like(2, xs)))};
      });
    }
    return out;
  };
  // Inputs away from where 2x and 3x^2 agree (0 and 2/3).
  Tensor x = uniform({2, 3}, 1.0, 2.0, kFloat64).requires_grad_();
  GradcheckResult result = gradcheck(bad_cube, {x});
  EXPECT_FALSE(result);
  EXPECT_NE(result.message.find("input 0"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("element"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("[2, 3]"), std::string::npos) << result.message;
  EXPECT_GT(result.worst_error, 0);
  // The same op with the right derivative passes: the failure above is the wrong gradient's.
  auto good = gradcheck([](const std::vector<Tensor>& in) { return mul(mul(in[0], in[0]), in[0]); }, {x});
  EXPECT_TRUE(good) << good.message;
}

TEST(Elementwise, ShapeAndDtypeErrors) {
  try {
    mul(ones({3, 2}), ones({4, 2}));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4, 2]"), std::string::npos) << msg;
  }
  EXPECT_THROW(gelu(ones({2}, kInt64)), Error);  // exp, log, ... promote integers; gelu does not
  EXPECT_THROW(add(ones({2}, kBool), ones({2}, kBool)), Error);
}

}  // namespace minidl::elementwise_test
