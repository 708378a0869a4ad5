// prod, any/all, var/std over everything and with a correction, p-norms, logsumexp, max()/min(),
// amax/amin, and isclose/allclose/equal: values worked out by hand (or PyTorch's), float64
// gradchecks on random inputs, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "minidl.h"
#include "test_util.h"

namespace minidl::reductions_more_test {

using minidl::testing::expect_error;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor t64(const std::vector<double>& v, Shape shape = {}) { return Tensor::from_vector(v, std::move(shape)); }
Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
    else if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "element " << i;
    else EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

std::vector<bool> bools(const Tensor& t) {
  EXPECT_EQ(t.dtype(), kBool);
  return t.contiguous().to_vector<bool>();
}

void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs) {
  GradcheckResult r = gradcheck(f, std::move(inputs));
  EXPECT_TRUE(r) << r.message;
}

// The gradient of sum(f(x)) at x.
std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x_in) {
  Tensor x = x_in.detach().clone().requires_grad_();
  f(x).sum().backward();
  return values(x.grad());
}

}  // namespace

TEST(Prod, Values) {
  Tensor x = t64({1, 2, 3, 4}, {2, 2});
  expect_values(prod(x), {24});
  EXPECT_EQ(prod(x).dim(), 0);
  expect_values(prod(x, 0), {3, 8});
  Tensor k = prod(x, 1, true);
  EXPECT_EQ(k.shape(), (Shape{2, 1}));
  expect_values(k, {2, 12});
  expect_values(prod(x, -1), {2, 12});
  expect_values(prod(zeros({0}, kFloat64)), {1});  // the empty product
  expect_values(prod(zeros({2, 0}, kFloat64), 1), {1, 1});
  expect_values(prod(t64({5}).reshape({})), {5});
}

TEST(Prod, IntegralAndBoolGiveInt64) {
  Tensor i = Tensor::from_vector<int64_t>({2, -3, 7});
  Tensor p = prod(i);
  EXPECT_EQ(p.dtype(), kInt64);
  EXPECT_EQ(p.item<int64_t>(), -42);
  Tensor b = Tensor::from_vector<bool>({true, false, true});
  EXPECT_EQ(prod(b).dtype(), kInt64);  // as torch.prod of a bool tensor
  EXPECT_EQ(prod(b).item<int64_t>(), 0);
  EXPECT_EQ(prod(Tensor::from_vector<bool>({true, true})).item<int64_t>(), 1);
}

TEST(Prod, GradientWithZerosIsExact) {
  // One zero: the product of the others there, 0 elsewhere. Two zeros: 0 everywhere.
  EXPECT_EQ(grad_of([](const Tensor& x) { return prod(x); }, t64({2, 0, 3})), (std::vector<double>{0, 6, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return prod(x); }, t64({0, 2, 0})), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return prod(x); }, t64({2, 5, 3})), (std::vector<double>{15, 6, 10}));
  // Along a dim: row 0 has one zero, row 1 none, row 2 two.
  Tensor x = t64({1, 0, 4, 2, 3, 5, 0, 7, 0}, {3, 3});
  EXPECT_EQ(grad_of([](const Tensor& t) { return prod(t, 1); }, x),
            (std::vector<double>{0, 4, 0, 15, 10, 6, 0, 0, 0}));
}

TEST(Prod, Gradcheck) {
  manual_seed(1);
  expect_gradcheck([](auto& in) { return prod(in[0]); }, {leaf({2, 3})});
  expect_gradcheck([](auto& in) { return prod(in[0], 1); }, {leaf({3, 5})});
  expect_gradcheck([](auto& in) { return prod(in[0], 0, true); }, {leaf({4, 3, 2})});
  expect_gradcheck([](auto& in) { return prod(in[0], -2); }, {leaf({2, 3, 5})});
  // prod is linear in each element, so central differences are exact at zeros too.
  Tensor z = randn({3, 4}, kFloat64);
  z.data<double>()[1] = 0;
  z.data<double>()[5] = 0;
  z.data<double>()[9] = 0;
  expect_gradcheck([](auto& in) { return prod(in[0], 1); }, {z.requires_grad_()});
  Tensor z2 = randn({5}, kFloat64);
  z2.data<double>()[2] = 0;
  expect_gradcheck([](auto& in) { return prod(in[0]); }, {z2.requires_grad_()});
}

TEST(Prod, Errors) {
  Tensor x = zeros({2, 3}, kFloat64);
  expect_error([&] { prod(x, 2); }, {"prod", "dimension out of range", "[-2, 1]", "got 2"});
  expect_error([&] { prod(x, -3); }, {"prod", "dimension out of range"});
}

TEST(AnyAll, Values) {
  Tensor x = t64({0, 1, 0, 0, 0, 0, 2, 3, 4}, {3, 3});
  EXPECT_TRUE(any(x).item<bool>());
  EXPECT_FALSE(all(x).item<bool>());
  EXPECT_EQ(bools(any(x, 1)), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(bools(all(x, 1)), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(bools(any(x, 0)), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(bools(all(x, 0)), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(any(x, 1, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(all(x, -1).shape(), (Shape{3}));
  EXPECT_EQ(any(x).dim(), 0);
  // NaN is nonzero; nothing: any false, all true.
  EXPECT_TRUE(all(t64({kNaN, 1})).item<bool>());
  EXPECT_TRUE(any(t64({kNaN, 0})).item<bool>());
  EXPECT_FALSE(any(zeros({0}, kFloat64)).item<bool>());
  EXPECT_TRUE(all(zeros({0}, kFloat64)).item<bool>());
  EXPECT_EQ(bools(all(zeros({2, 0}), 1)), (std::vector<bool>{true, true}));
}

TEST(AnyAll, Dtypes) {
  Tensor b = Tensor::from_vector<bool>({true, false, true, true}, {2, 2});
  EXPECT_EQ(bools(all(b, 0)), (std::vector<bool>{true, false}));
  EXPECT_EQ(bools(any(b, 1)), (std::vector<bool>{true, true}));
  Tensor i = Tensor::from_vector<int64_t>({0, -5});
  EXPECT_TRUE(any(i).item<bool>());
  EXPECT_FALSE(all(i).item<bool>());
  EXPECT_EQ(any(i).dtype(), kBool);
  Tensor f = Tensor::from_vector<float>({0.5f, 0.25f});
  EXPECT_TRUE(all(f).item<bool>());
  // A 0-d input with dim 0 or -1.
  EXPECT_TRUE(any(t64({3}).reshape({}), 0).item<bool>());
  EXPECT_FALSE(all(t64({0}).reshape({}), -1).item<bool>());
}

TEST(AnyAll, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { any(x, 2); }, {"any", "dimension out of range"});
  expect_error([&] { all(x, -3); }, {"all", "dimension out of range"});
}

TEST(VarStd, OverAllElementsAndCorrection) {
  Tensor x = t64({1, 2, 3, 4}, {2, 2});
  // Mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5.
  expect_values(var(x), {5.0 / 3});
  expect_values(var(x, false), {1.25});
  expect_values(minidl::std(x), {std::sqrt(5.0 / 3)});
  expect_values(minidl::std(x, false), {std::sqrt(1.25)});
  // A braced dims list picks the dims form, never the bool one.
  EXPECT_EQ(var(x, {0}).shape(), (Shape{2}));
  expect_values(var(x, {0}), {2, 2});
  expect_values(minidl::std(x, {1}, false), {0.5, 0.5});
  expect_values(var(x, {}), {5.0 / 3});
  // libtorch's correction form: divided by n - correction.
  expect_values(var(x, {0, 1}, Scalar(0)), {1.25});
  expect_values(var(x, {0, 1}, Scalar(2)), {2.5});
  expect_values(var(x, {1}, std::nullopt, true), {0.5, 0.5});
  expect_values(minidl::std(x, {0, 1}, Scalar(1.5)), {std::sqrt(5 / 2.5)});
  EXPECT_EQ(minidl::std(x, {1}, Scalar(0), true).shape(), (Shape{2, 1}));
}

TEST(VarStd, Gradcheck) {
  manual_seed(2);
  expect_gradcheck([](auto& in) { return minidl::std(in[0]); }, {leaf({3, 4})});
  expect_gradcheck([](auto& in) { return minidl::std(in[0], {1}); }, {leaf({3, 5})});
  expect_gradcheck([](auto& in) { return minidl::std(in[0], {0, 2}, false, true); }, {leaf({3, 2, 4})});
  expect_gradcheck([](auto& in) { return var(in[0]); }, {leaf({5})});
  expect_gradcheck([](auto& in) { return var(in[0], {1}, Scalar(0)); }, {leaf({2, 3})});
}

TEST(VarStd, Errors) {
  expect_error([] { minidl::std(Tensor::from_vector<int64_t>({1, 2})); }, {"var", "floating", "int64"});
  expect_error([] { minidl::std(zeros({2, 3}), {2}); }, {"var", "dimension out of range"});
}

TEST(Norm, ValuesForEachP) {
  Tensor x = t64({3, -4});
  expect_values(norm(x), {5});
  expect_values(norm(x, 1), {7});
  expect_values(norm(x, 0), {2});
  expect_values(norm(x, INFINITY), {4});
  expect_values(norm(x, -INFINITY), {3});
  expect_values(norm(x, 3), {std::cbrt(91.0)});
  expect_values(norm(x, 0.5), {std::pow(std::sqrt(3.0) + 2, 2)});
  // Frobenius over a matrix, and per row / column.
  Tensor m = t64({1, 2, 3, 4}, {2, 2});
  expect_values(norm(m), {std::sqrt(30.0)});
  expect_values(norm(m, 2, {1}), {std::sqrt(5.0), 5});
  expect_values(norm(m, 1, {0}, true), {4, 6});
  EXPECT_EQ(norm(m, 1, {0}, true).shape(), (Shape{1, 2}));
  expect_values(linalg_vector_norm(m, 2, std::vector<int64_t>{0}), {std::sqrt(10.0), std::sqrt(20.0)});
  expect_values(linalg_vector_norm(m), {std::sqrt(30.0)});
  expect_values(norm(t64({0, 0, 5, 0}), 0), {1});
  EXPECT_EQ(norm(Tensor::from_vector<float>({3, 4})).dtype(), kFloat32);
}

TEST(Norm, GradientsAtSpecialPoints) {
  // p = 2: x / ||x||, and 0 at the origin (as PyTorch), not NaN.
  expect_values(t64(grad_of([](const Tensor& x) { return norm(x); }, t64({3, -4}))), {0.6, -0.8});
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x); }, zeros({3}, kFloat64)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, 3); }, zeros({2}, kFloat64)), (std::vector<double>{0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, 0.5); }, t64({0, 4})), (std::vector<double>{0, 1}));
  // p = 0 has a zero gradient; p = 1 the sign (0 at 0); inf splits among the ties of |x|.
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, 0); }, t64({1, -2})), (std::vector<double>{0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, 1); }, t64({1, 0, -2})), (std::vector<double>{1, 0, -1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, INFINITY); }, t64({1, -3, 3})),
            (std::vector<double>{0, -0.5, 0.5}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return norm(x, -INFINITY); }, t64({1, -3, 2})),
            (std::vector<double>{1, 0, 0}));
  // A row of zeros beside a nonzero row.
  expect_values(t64(grad_of([](const Tensor& x) { return norm(x, 2, {1}); }, t64({0, 0, 3, 4}, {2, 2}))),
                {0, 0, 0.6, 0.8});
}

TEST(Norm, Gradcheck) {
  manual_seed(3);
  for (double p : {2.0, 1.0, 3.0, 1.5, 0.5, -1.0, kInf, -kInf}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    expect_gradcheck([p](auto& in) { return norm(in[0], p); }, {leaf({3, 4})});
    expect_gradcheck([p](auto& in) { return norm(in[0], p, {1}); }, {leaf({3, 5})});
    expect_gradcheck([p](auto& in) { return norm(in[0], p, {0, 2}, true); }, {leaf({2, 3, 4})});
  }
}

TEST(Norm, Errors) {
  expect_error([] { norm(Tensor::from_vector<int64_t>({3, 4})); }, {"norm", "floating", "int64"});
  expect_error([] { norm(zeros({2, 3}), 2, {2}); }, {"norm", "dimension out of range"});
  expect_error([] { norm(zeros({2, 3}), 2, {1, 1}); }, {"norm", "repeats"});
  expect_error([] { norm(zeros({0, 3}), INFINITY, {0}); }, {"norm", "empty"});
}

TEST(Logsumexp, ValuesAndStability) {
  expect_values(logsumexp(t64({1, 2, 3}), {0}), {3 + std::log(1 + std::exp(-1.0) + std::exp(-2.0))});
  expect_values(logsumexp(t64({1000, 1000}), {0}), {1000 + std::log(2.0)});       // no overflow
  expect_values(logsumexp(t64({-1000, -1000}), {0}), {-1000 + std::log(2.0)});     // no underflow
  expect_values(logsumexp(t64({-kInf, -kInf}), {0}), {-kInf});
  expect_values(logsumexp(t64({kInf, 1}), {0}), {kInf});
  expect_values(logsumexp(t64({kNaN, 1}), {0}), {kNaN});
  Tensor m = t64({0, 0, 1, 1, 2, 2}, {3, 2});
  expect_values(logsumexp(m, {1}), {std::log(2.0), 1 + std::log(2.0), 2 + std::log(2.0)});
  EXPECT_EQ(logsumexp(m, {1}, true).shape(), (Shape{3, 1}));
  expect_values(logsumexp(m, {}), {std::log(2 * (1 + std::exp(1.0) + std::exp(2.0)))});
  expect_values(logsumexp(zeros({0}, kFloat64), {0}), {-kInf});
  Tensor i = logsumexp(Tensor::from_vector<int64_t>({0, 0}), {0});
  EXPECT_EQ(i.dtype(), kFloat32);
  EXPECT_NEAR(i.item<float>(), std::log(2.0f), 1e-6);
}

TEST(Logsumexp, GradientIsSoftmax) {
  manual_seed(4);
  Tensor x = randn({3, 5}, kFloat64);
  std::vector<double> g = grad_of([](const Tensor& t) { return logsumexp(t, {1}); }, x);
  std::vector<double> s = values(softmax(x, 1));
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], s[i], 1e-12);
  expect_gradcheck([](auto& in) { return logsumexp(in[0], {1}); }, {leaf({3, 4})});
  expect_gradcheck([](auto& in) { return logsumexp(in[0], {0, 2}, true); }, {leaf({2, 3, 4})});
  expect_gradcheck([](auto& in) { return logsumexp(in[0] * 300.0, {0}); }, {leaf({5})});
}

TEST(Logsumexp, Errors) {
  expect_error([] { logsumexp(zeros({2, 3}), {2}); }, {"logsumexp", "dimension out of range"});
}

TEST(Extrema, Values) {
  Tensor x = t64({1, 7, -2, 7, 0, 3}, {2, 3});
  expect_values(max(x), {7});
  expect_values(min(x), {-2});
  EXPECT_EQ(max(x).dim(), 0);
  expect_values(amax(x, {0}), {7, 7, 3});
  expect_values(amin(x, {1}), {-2, 0});
  EXPECT_EQ(amax(x, {1}, true).shape(), (Shape{2, 1}));
  expect_values(amax(x), {7});
  expect_values(amin(x, {0, 1}), {-2});
  expect_values(max(t64({1, kNaN, 3})), {kNaN});
  Tensor i = Tensor::from_vector<int64_t>({4, -9, 2});
  EXPECT_EQ(min(i).item<int64_t>(), -9);
  EXPECT_EQ(amax(i).dtype(), kInt64);
  Tensor b = Tensor::from_vector<bool>({false, true});
  EXPECT_EQ(max(b).dtype(), kBool);
  EXPECT_TRUE(max(b).item<bool>());
  EXPECT_FALSE(min(b).item<bool>());
  expect_values(amax(t64({2.5}).reshape({})), {2.5});
}

TEST(Extrema, GradientSplitAmongTies) {
  EXPECT_EQ(grad_of([](const Tensor& x) { return max(x); }, t64({1, 3, 3})), (std::vector<double>{0, 0.5, 0.5}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return min(x); }, t64({1, 1, 1, 5})),
            (std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return amax(x, {1}); }, t64({2, 2, 0, 1, 5, 5}, {2, 3})),
            (std::vector<double>{0.5, 0.5, 0, 0, 0.5, 0.5}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return amin(x, {0}); }, t64({2, 2, 0, 1, 5, 0}, {2, 3})),
            (std::vector<double>{0, 1, 0.5, 1, 0, 0.5}));
  // max() sends a NaN result's gradient to the NaN.
  EXPECT_EQ(grad_of([](const Tensor& x) { return max(x); }, t64({1, kNaN, 3})), (std::vector<double>{0, 1, 0}));
}

TEST(Extrema, Gradcheck) {
  manual_seed(5);
  expect_gradcheck([](auto& in) { return max(in[0]); }, {leaf({3, 4})});
  expect_gradcheck([](auto& in) { return min(in[0]); }, {leaf({3, 4})});
  expect_gradcheck([](auto& in) { return amax(in[0], {1}); }, {leaf({3, 5})});
  expect_gradcheck([](auto& in) { return amin(in[0], {0, 2}, true); }, {leaf({2, 3, 4})});
}

TEST(Extrema, Errors) {
  expect_error([] { max(zeros({0})); }, {"max", "size 0"});
  expect_error([] { amin(zeros({2, 0}), {1}); }, {"amin", "size 0"});
  expect_error([] { amax(zeros({2, 3}), {3}); }, {"amax", "dimension out of range"});
}

TEST(Isclose, PyTorchSemantics) {
  Tensor a = t64({1, 1 + 1e-6, kInf, kNaN, -kInf, 2});
  Tensor b = t64({1, 1, kInf, kNaN, kInf, 2.1});
  EXPECT_EQ(bools(isclose(a, b)), (std::vector<bool>{true, true, true, false, false, false}));
  EXPECT_EQ(bools(isclose(a, b, 1e-5, 1e-8, true)), (std::vector<bool>{true, true, true, true, false, false}));
  EXPECT_EQ(bools(isclose(a, b, 0, 0.2)), (std::vector<bool>{true, true, true, false, false, true}));
  EXPECT_EQ(bools(isclose(a, b, 0, 0)), (std::vector<bool>{true, false, true, false, false, false}));
  // rtol scales |b|: 100 vs 101 is close at rtol 0.01, 1 vs 2 is not.
  EXPECT_EQ(bools(isclose(t64({101, 2}), t64({100, 1}), 0.01, 0)), (std::vector<bool>{true, false}));
  // Broadcasting, integers.
  EXPECT_EQ(isclose(zeros({2, 3}), zeros({3})).shape(), (Shape{2, 3}));
  EXPECT_EQ(bools(isclose(Tensor::from_vector<int64_t>({1, 2}), Tensor::from_vector<int64_t>({1, 3}))),
            (std::vector<bool>{true, false}));
}

TEST(Isclose, AllcloseAndEqual) {
  Tensor a = t64({1, 2, 3});
  EXPECT_TRUE(allclose(a, a + 1e-9));
  EXPECT_FALSE(allclose(a, a + 1e-3));
  EXPECT_TRUE(allclose(a, a + 1e-3, 0, 1e-2));
  EXPECT_FALSE(allclose(t64({kNaN}), t64({kNaN})));
  EXPECT_TRUE(allclose(t64({kNaN}), t64({kNaN}), 1e-5, 1e-8, true));
  EXPECT_TRUE(equal(a, a.clone()));
  EXPECT_FALSE(equal(a, t64({1, 2, 4})));
  EXPECT_FALSE(equal(a, t64({1, 2, 3}, {3, 1})));  // same values, another shape
  EXPECT_FALSE(equal(t64({kNaN}), t64({kNaN})));
  EXPECT_TRUE(equal(zeros({0}), zeros({0})));
}

TEST(Isclose, Errors) {
  expect_error([] { isclose(zeros({2}), zeros({2}, kFloat64)); }, {"isclose", "same dtype", "float32", "float64"});
  expect_error([] { isclose(zeros({2}), zeros({2}), -1); }, {"isclose", "rtol", "-1"});
  expect_error([] { allclose(zeros({2}), zeros({2}), 1e-5, -1); }, {"isclose", "atol"});
  expect_error([] { isclose(zeros({2}), zeros({3})); }, {"3"});
}

}  // namespace minidl::reductions_more_test
