// cumsum, cumprod, sort, argsort and topk on the CPU: values worked out by hand, stable order of
// ties, NaN placement, gradients (float64 gradchecks, cumprod's with zeros), and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "minidl.h"
#include "test_util.h"

namespace minidl::scan_sort_test {

using minidl::testing::expect_error;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor t64(const std::vector<double>& v, Shape shape = {}) { return Tensor::from_vector(v, std::move(shape)); }
Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }
std::vector<int64_t> ints(const Tensor& t) {
  EXPECT_EQ(t.dtype(), kInt64);
  return t.contiguous().to_vector<int64_t>();
}

// Exact comparison that lets NaN equal NaN.
void expect_same(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else EXPECT_EQ(got[i], want[i]) << "element " << i;
  }
}

void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs) {
  GradcheckResult r = gradcheck(f, std::move(inputs));
  EXPECT_TRUE(r) << r.message;
}

std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& f, const Tensor& x_in, const Tensor& w) {
  Tensor x = x_in.detach().clone().requires_grad_();
  (f(x) * w).sum().backward();
  return values(x.grad());
}

}  // namespace

TEST(Cumsum, Values) {
  Tensor x = t64({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_same(values(cumsum(x, 1)), {1, 3, 6, 4, 9, 15});
  expect_same(values(cumsum(x, -1)), {1, 3, 6, 4, 9, 15});
  expect_same(values(cumsum(x, 0)), {1, 2, 3, 5, 7, 9});
  EXPECT_EQ(cumsum(x, 0).shape(), x.shape());
  // A middle dim of a 3-d tensor.
  Tensor y = t64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  expect_same(values(cumsum(y, 1)), {1, 2, 4, 6, 5, 6, 12, 14});
  // A strided input (a transposed view).
  expect_same(values(cumsum(x.t(), 1)), {1, 5, 2, 7, 3, 9});
  expect_same(values(cumsum(t64({2}).reshape({}), 0)), {2});
  EXPECT_EQ(cumsum(zeros({0, 3}), 0).shape(), (Shape{0, 3}));
  expect_same(values(cumsum(t64({1, kInf, -kInf, 1}), 0)), {1, kInf, kNaN, kNaN});
}

TEST(Cumsum, IntegralAndBoolGiveInt64) {
  Tensor i = Tensor::from_vector<int64_t>({3, -1, 4});
  EXPECT_EQ(ints(cumsum(i, 0)), (std::vector<int64_t>{3, 2, 6}));
  Tensor b = Tensor::from_vector<bool>({true, false, true, true});
  EXPECT_EQ(ints(cumsum(b, 0)), (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_EQ(ints(cumprod(Tensor::from_vector<int64_t>({2, 3, -4}), 0)), (std::vector<int64_t>{2, 6, -24}));
  // float32 adds in double: 1e8 + 1 + ... keeps the ones.
  Tensor f = Tensor::from_vector<float>({1e8f, 1, 1, 1, 1, -1e8f});
  EXPECT_EQ(cumsum(f, 0).to_vector<float>().back(), 4.0f);
}

TEST(Cumsum, Gradient) {
  // d/dx_i sum_j w_j cumsum_j = sum_{j >= i} w_j.
  Tensor w = t64({1, 10, 100});
  EXPECT_EQ(grad_of([](const Tensor& x) { return cumsum(x, 0); }, t64({5, 6, 7}), w),
            (std::vector<double>{111, 110, 100}));
  manual_seed(11);
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    expect_gradcheck([dim](auto& in) { return cumsum(in[0], dim); }, {leaf({3, 4, 5})});
  }
  // Twice differentiable: the gradient of the gradient.
  Tensor x = leaf({4});
  Tensor g = cumsum(x, 0);
  EXPECT_TRUE(g.requires_grad());
}

TEST(Cumprod, Values) {
  expect_same(values(cumprod(t64({1, 2, 3, 4}), 0)), {1, 2, 6, 24});
  Tensor x = t64({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_same(values(cumprod(x, 0)), {1, 2, 3, 4, 10, 18});
  expect_same(values(cumprod(x, 1)), {1, 2, 6, 4, 20, 120});
  expect_same(values(cumprod(t64({2, 0, 3}), 0)), {2, 0, 0});
}

TEST(Cumprod, GradientWithZerosIsExact) {
  Tensor w = t64({1, 1, 1});
  // x = [a, b, c]: outputs a, ab, abc. With b = 0: d/da = 1 + b + bc = 1, d/db = a + ac, d/dc = ab = 0.
  EXPECT_EQ(grad_of([](const Tensor& x) { return cumprod(x, 0); }, t64({2, 0, 3}), w),
            (std::vector<double>{1, 8, 0}));
  // Two zeros: d/da = 1, d/db = a + a c = 2, d/dc = a b = 0.
  EXPECT_EQ(grad_of([](const Tensor& x) { return cumprod(x, 0); }, t64({2, 0, 0}), w),
            (std::vector<double>{1, 2, 0}));
  // A zero first: d/da = 1 + b + bc = 1 + 3 + 12 = 16, the rest 0.
  EXPECT_EQ(grad_of([](const Tensor& x) { return cumprod(x, 0); }, t64({0, 3, 4}), w),
            (std::vector<double>{16, 0, 0}));
  manual_seed(12);
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    expect_gradcheck([dim](auto& in) { return cumprod(in[0], dim); }, {leaf({3, 4, 5})});
    // cumprod is linear in each element, so differences are exact at zeros: one and two per row.
    Tensor z = randn({3, 4, 5}, kFloat64);
    for (int64_t i : {0, 7, 13, 14, 40, 59}) z.data<double>()[i] = 0;
    expect_gradcheck([dim](auto& in) { return cumprod(in[0], dim); }, {z.requires_grad_()});
  }
}

TEST(Cumprod, BackwardHelperChecks) {
  expect_error([] { cumprod_backward(zeros({2}), zeros({3}), 0); }, {"cumprod_backward", "[2]", "[3]"});
  expect_error([] { cumprod_backward(zeros({2}, kInt64), zeros({2}, kInt64), 0); }, {"cumprod_backward", "floating"});
}

TEST(Scan, Errors) {
  expect_error([] { cumsum(zeros({2, 3}), 2); }, {"cumsum", "dimension out of range", "got 2"});
  expect_error([] { cumprod(zeros({2, 3}), -3); }, {"cumprod", "dimension out of range"});
  expect_error([] { cumsum(zeros({}), 1); }, {"cumsum", "dimension out of range"});
}

TEST(Sort, ValuesIndicesAndStableTies) {
  Tensor x = t64({3, 1, 3, 1, 2});
  auto [v, i] = sort(x);
  expect_same(values(v), {1, 1, 2, 3, 3});
  EXPECT_EQ(ints(i), (std::vector<int64_t>{1, 3, 4, 0, 2}));  // ties in their original order
  Tensor dv, di;
  std::tie(dv, di) = sort(x, 0, /*descending=*/true);
  expect_same(values(dv), {3, 3, 2, 1, 1});
  EXPECT_EQ(ints(di), (std::vector<int64_t>{0, 2, 4, 1, 3}));
  EXPECT_EQ(ints(argsort(x)), (std::vector<int64_t>{1, 3, 4, 0, 2}));
  EXPECT_EQ(ints(argsort(x, 0, true)), (std::vector<int64_t>{0, 2, 4, 1, 3}));
  EXPECT_EQ(ints(argsort(x, /*stable=*/true, 0, true)), (std::vector<int64_t>{0, 2, 4, 1, 3}));
  auto [sv, si] = sort(x, /*stable=*/std::optional<bool>(true), 0);
  EXPECT_EQ(ints(si), (std::vector<int64_t>{1, 3, 4, 0, 2}));
  // -0.0 and 0.0 tie: kept in order, each keeping its sign.
  auto [zv, zi] = sort(t64({0.0, -0.0, -1}));
  EXPECT_EQ(ints(zi), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_TRUE(std::signbit(values(zv)[2]));
}

TEST(Sort, NaNIsLargest) {
  Tensor x = t64({kNaN, 1, -kInf, kInf, 0, kNaN});
  auto [v, i] = sort(x);
  expect_same(values(v), {-kInf, 0, 1, kInf, kNaN, kNaN});
  EXPECT_EQ(ints(i), (std::vector<int64_t>{2, 4, 1, 3, 0, 5}));
  auto [dv, di] = sort(x, -1, true);
  expect_same(values(dv), {kNaN, kNaN, kInf, 1, 0, -kInf});
  EXPECT_EQ(ints(di), (std::vector<int64_t>{0, 5, 3, 1, 4, 2}));
}

TEST(Sort, AlongEachDimAndDtypes) {
  Tensor x = t64({5, 1, 4, 2, 6, 0}, {2, 3});
  auto [v1, i1] = sort(x, 1);
  expect_same(values(v1), {1, 4, 5, 0, 2, 6});
  EXPECT_EQ(ints(i1), (std::vector<int64_t>{1, 2, 0, 2, 0, 1}));
  auto [v0, i0] = sort(x, 0, true);
  expect_same(values(v0), {5, 6, 4, 2, 1, 0});
  EXPECT_EQ(ints(i0), (std::vector<int64_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(v0.shape(), x.shape());
  // A middle dim of a 3-d tensor.
  Tensor y = t64({3, 9, 1, 8, 2, 7, 0, 0}, {2, 2, 2});
  auto [v, i] = sort(y, 1);
  expect_same(values(v), {1, 8, 3, 9, 0, 0, 2, 7});
  EXPECT_EQ(ints(i), (std::vector<int64_t>{1, 1, 0, 0, 1, 1, 0, 0}));
  auto [iv, ii] = sort(Tensor::from_vector<int64_t>({4, -2, 9}), 0, true);
  EXPECT_EQ(ints(iv), (std::vector<int64_t>{9, 4, -2}));
  auto [bv, bi] = sort(Tensor::from_vector<bool>({true, false, true}));
  EXPECT_EQ(bv.dtype(), kBool);
  EXPECT_EQ(bv.to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(ints(bi), (std::vector<int64_t>{1, 0, 2}));
  auto [fv, fi] = sort(Tensor::from_vector<float>({2.5f, -1.f}));
  EXPECT_EQ(fv.dtype(), kFloat32);
  auto [s0, i00] = sort(t64({7}).reshape({}));
  EXPECT_EQ(s0.dim(), 0);
  EXPECT_EQ(i00.item<int64_t>(), 0);
  auto [ev, ei] = sort(zeros({3, 0}), 1);
  EXPECT_EQ(ev.shape(), (Shape{3, 0}));
}

TEST(Sort, GradientGoesBackToEachPosition) {
  Tensor w = t64({1, 10, 100});
  // Sorted order of [3, 1, 2] is positions 1, 2, 0: x[1] gets w[0], x[2] w[1], x[0] w[2].
  EXPECT_EQ(grad_of([](const Tensor& x) { return std::get<0>(sort(x)); }, t64({3, 1, 2}), w),
            (std::vector<double>{100, 1, 10}));
  manual_seed(13);
  for (int64_t dim : {0, 1, 2}) {
    for (bool descending : {false, true}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + (descending ? " descending" : ""));
      expect_gradcheck([dim, descending](auto& in) { return std::get<0>(sort(in[0], dim, descending)); },
                       {leaf({3, 4, 5})});
    }
  }
}

TEST(Sort, Errors) {
  expect_error([] { sort(zeros({2, 3}), 2); }, {"sort", "dimension out of range", "got 2"});
  expect_error([] { argsort(zeros({2}), -2); }, {"sort", "dimension out of range"});
}

TEST(Topk, Values) {
  Tensor x = t64({1, 5, 2, 4, 3});
  auto [v, i] = topk(x, 2);
  expect_same(values(v), {5, 4});
  EXPECT_EQ(ints(i), (std::vector<int64_t>{1, 3}));
  auto [sv, si] = topk(x, 2, 0, /*largest=*/false);
  expect_same(values(sv), {1, 2});
  EXPECT_EQ(ints(si), (std::vector<int64_t>{0, 2}));
  Tensor m = t64({1, 9, 3, 7, 2, 8}, {3, 2});
  auto [mv, mi] = topk(m, 1, 0);
  EXPECT_EQ(mv.shape(), (Shape{1, 2}));
  expect_same(values(mv), {3, 9});
  EXPECT_EQ(ints(mi), (std::vector<int64_t>{1, 0}));
  auto [zv, zi] = topk(m, 0, 1);
  EXPECT_EQ(zv.shape(), (Shape{3, 0}));
  auto [nv, ni] = topk(t64({1, kNaN, 3}), 1);  // NaN is the largest
  EXPECT_TRUE(std::isnan(values(nv)[0]));
  auto [tv, ti] = topk(t64({2, 7, 7, 1}), 2);  // ties in their original order
  EXPECT_EQ(ints(ti), (std::vector<int64_t>{1, 2}));
}

TEST(Topk, Gradient) {
  Tensor w = t64({1, 10});
  EXPECT_EQ(grad_of([](const Tensor& x) { return std::get<0>(topk(x, 2)); }, t64({1, 5, 2, 4}), w),
            (std::vector<double>{0, 1, 0, 10}));
  manual_seed(14);
  expect_gradcheck([](auto& in) { return std::get<0>(topk(in[0], 3, 1)); }, {leaf({4, 6})});
  expect_gradcheck([](auto& in) { return std::get<0>(topk(in[0], 2, 0, false)); }, {leaf({5, 3})});
}

TEST(Topk, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { topk(x, 4); }, {"topk", "k (4)", "out of range", "size 3"});
  expect_error([&] { topk(x, -1); }, {"topk", "k (-1)"});
  expect_error([&] { topk(x, 3, 0); }, {"topk", "k (3)", "size 2"});
  expect_error([&] { topk(x, 1, 2); }, {"topk", "dimension out of range"});
}

}  // namespace minidl::scan_sort_test
