// The in-place family of ops/inplace.h and the compositions optimizers use (addcmul, addcdiv,
// lerp): each in-place op equals its out-of-place op, writes through views, bumps the version,
// keeps the destination's dtype, and refuses what autograd would need to record.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "minidl.h"
#include "ops/gradcheck.h"
#include "test_util.h"

namespace minidl::inplace_ops_test {

using minidl::testing::expect_error;

namespace {

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

}  // namespace

TEST(InplaceOps, EachEqualsItsOutOfPlaceOp) {
  manual_seed(1);
  struct Case {
    const char* name;
    std::function<void(const Tensor&)> in_place;
    std::function<Tensor(const Tensor&)> out_of_place;
  };
  const Tensor mask = gt(rand({3, 4}), 0.5), t1 = randn({3, 4}), t2 = add(rand({3, 4}), 0.5), end = randn({3, 4});
  const std::vector<Case> cases = {
      {"relu_", [](const Tensor& x) { x.relu_(); }, [](const Tensor& x) { return relu(x); }},
      {"sigmoid_", [](const Tensor& x) { x.sigmoid_(); }, [](const Tensor& x) { return sigmoid(x); }},
      {"tanh_", [](const Tensor& x) { x.tanh_(); }, [](const Tensor& x) { return tanh(x); }},
      {"exp_", [](const Tensor& x) { x.exp_(); }, [](const Tensor& x) { return exp(x); }},
      {"neg_", [](const Tensor& x) { x.neg_(); }, [](const Tensor& x) { return neg(x); }},
      {"abs_", [](const Tensor& x) { x.abs_(); }, [](const Tensor& x) { return abs(x); }},
      {"pow_", [](const Tensor& x) { x.pow_(2); }, [](const Tensor& x) { return pow(x, 2); }},
      {"clamp_", [](const Tensor& x) { x.clamp_(-0.5, 0.5); }, [](const Tensor& x) { return clamp(x, -0.5, 0.5); }},
      {"clamp_min_", [](const Tensor& x) { x.clamp_min_(0.1); }, [](const Tensor& x) { return clamp(x, 0.1); }},
      {"clamp_max_", [](const Tensor& x) { x.clamp_max_(0.1); },
       [](const Tensor& x) { return clamp(x, std::nullopt, 0.1); }},
      {"masked_fill_", [&](const Tensor& x) { x.masked_fill_(mask, -1e9); },
       [&](const Tensor& x) { return masked_fill(x, mask, -1e9); }},
      {"addcmul_", [&](const Tensor& x) { x.addcmul_(t1, t2, 0.5); },
       [&](const Tensor& x) { return add(x, mul(mul(t1, t2), 0.5)); }},
      {"addcdiv_", [&](const Tensor& x) { x.addcdiv_(t1, t2, -2); },
       [&](const Tensor& x) { return add(x, mul(div(t1, t2), -2.0)); }},
      {"lerp_", [&](const Tensor& x) { x.lerp_(end, 0.25); },
       [&](const Tensor& x) { return add(x, mul(sub(end, x), 0.25)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = randn({3, 4});
    const Tensor want = c.out_of_place(x);
    const uint64_t version = x._version();
    c.in_place(x);
    EXPECT_GT(x._version(), version);
    const std::vector<double> got = values(x), expected = values(want);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6 * (1 + std::abs(expected[i])));
  }
  // sqrt_ and log_ on positive values.
  Tensor p = add(rand({5}), 0.5);
  const std::vector<double> before = values(p);
  p.sqrt_().log_();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(values(p)[i], std::log(std::sqrt(before[i])), 1e-6);
}

TEST(InplaceOps, WriteThroughViewsAndKeepTheDtype) {
  Tensor x = zeros({2, 3}, kFloat64);
  x.select(1, 1).fill_(-4).abs_().sqrt_();  // column 1 of the base
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0, 2, 0, 0, 2, 0}));
  x.t().masked_fill_(Tensor::from_vector<bool>({true, false, false}, {3, 1}), 7.0);  // row 0 of x^T
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{7, 2, 0, 7, 2, 0}));
  Tensor i = Tensor::from_vector<int64_t>({-3, 4}, {2});
  i.clamp_(-1, 2);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(i.dtype(), kInt64);
  expect_error([&] { i.sqrt_(); }, {"sqrt_", "can't be cast", "int64"});
  expect_error([&] { i.clamp_(0.5); }, {"clamp_", "can't be cast"});
  // An operand that broadcasts beyond the destination is refused, as PyTorch refuses it.
  expect_error([] { zeros({3}).addcmul_(ones({2, 3}), ones({3})); }, {"addcmul_", "[2, 3]", "[3]"});
}

TEST(InplaceOps, RefusedWhereAutogradWouldNeedThem) {
  Tensor w = randn({3}).requires_grad_();
  expect_error([&] { w.relu_(); }, {"relu_", "leaf Variable that requires grad"});
  Tensor h = mul(w, 2.0);
  expect_error([&] { h.clamp_(0.0); }, {"clamp_", "not recorded by autograd"});
  {
    NoGradGuard no_grad;  // an optimizer's step or an initialization
    w.clamp_(-0.1, 0.1);
  }
  EXPECT_LE(abs(w).max().item<float>(), 0.1f);
}

// lerp steps from the nearer end, as PyTorch's kernels: weight 1 gives end exactly, where
// input + 1 * (end - input) loses end's low bits beside a larger input.
TEST(InplaceOps, LerpFromTheNearerEnd) {
  manual_seed(11);
  const Tensor x = randn({500}) * 1000.0, end = randn({500}) * 1e-3;
  EXPECT_TRUE(equal(lerp(x, end, 1.0), end));
  EXPECT_TRUE(equal(lerp(x, end, 0.0), x));
  EXPECT_TRUE(equal(lerp(x, end, ones({500})), end));
  EXPECT_TRUE(equal(lerp(x, end, 0.75), end - (end - x) * 0.25));
  EXPECT_TRUE(equal(lerp(x, end, -0.75), end - (end - x) * 1.75));
  EXPECT_TRUE(equal(lerp(x, end, 0.25), x + (end - x) * 0.25));
  Tensor y = x.clone();
  y.lerp_(end, 1.0);
  EXPECT_TRUE(equal(y, end));
}

TEST(InplaceOps, AddcmulAddcdivLerp) {
  const Tensor x = Tensor::from_vector<double>({1, 2}, {2}), a = Tensor::from_vector<double>({3, 4}, {2});
  const Tensor b = Tensor::from_vector<double>({2, 8}, {2});
  EXPECT_EQ(addcmul(x, a, b, 0.5).to_vector<double>(), (std::vector<double>{4, 18}));
  EXPECT_EQ(x.addcdiv(a, b, 2).to_vector<double>(), (std::vector<double>{4, 3}));
  EXPECT_EQ(lerp(x, a, 0.5).to_vector<double>(), (std::vector<double>{2, 3}));
  EXPECT_EQ(x.lerp(a, Tensor::from_vector<double>({0, 1}, {2})).to_vector<double>(), (std::vector<double>{1, 4}));
  // Promotion as PyTorch's: an int64 input with float32 factors gives float32.
  EXPECT_EQ(addcmul(Tensor::from_vector<int64_t>({1}, {1}), ones({1}), ones({1})).dtype(), kFloat32);
  expect_error([] { addcdiv(zeros({2}), zeros({2}, kInt64), ones({2}, kInt64)); }, {"addcdiv", "integer division"});
  expect_error([] { lerp(zeros({2}), zeros({2}, kFloat64), 0.5); }, {"lerp", "one dtype"});
  expect_error([] { lerp(zeros({2}), zeros({2}), ones({2}, kFloat64)); }, {"lerp", "weight", "float32", "float64"});
  expect_error([] { addcmul(zeros({2}, kInt64), ones({2}, kInt64), ones({2}, kInt64), 0.5); },
               {"addcmul", "integral", "0.5"});
  manual_seed(4);
  auto leaf = [](const Shape& s) { return randn(s, kFloat64).requires_grad_(); };
  GradcheckResult r = gradcheck([](auto& in) { return addcmul(in[0], in[1], in[2], -0.5); },
                                {leaf({2, 3}), leaf({3}), leaf({2, 1})});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return addcdiv(in[0], in[1], add(abs(in[2]), 1.0), 2); },
                {leaf({2, 3}), leaf({2, 3}), leaf({2, 3})});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return lerp(in[0], in[1], in[2]); }, {leaf({2, 3}), leaf({2, 3}), leaf({3})});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace minidl::inplace_ops_test
