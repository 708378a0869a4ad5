// Reductions (sum, mean, max, argmax, sum_to_shape) against a direct loop, and gradients of the
// reductions and of every view op.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "minidl.h"

namespace minidl::reduce_view_test {

namespace {

// Sum of a row-major `shape` array over `dims` (sorted, non-negative), keepdim layout.
std::vector<double> reference_sum(const std::vector<double>& x, const Shape& shape, const std::vector<int64_t>& dims) {
  Shape out_shape = shape;
  for (int64_t d : dims) out_shape[d] = 1;
  std::vector<double> out(static_cast<size_t>(shape_numel(out_shape)), 0.0);
  Strides out_strides = contiguous_strides(out_shape);
  for (int64_t flat = 0; flat < shape_numel(shape); ++flat) {
    int64_t rem = flat, at = 0;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      int64_t coord = rem % shape[d];
      rem /= shape[d];
      if (out_shape[d] != 1) at += coord * out_strides[d];
    }
    out[at] += x[flat];
  }
  return out;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
}

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }

}  // namespace

TEST(Reduce, SumAndMeanOverDims) {
  manual_seed(31);
  const Shape shape{2, 3, 4, 5};
  Tensor x = randn(shape, kFloat64);
  std::vector<double> xv = x.to_vector<double>();
  struct Case {
    std::vector<int64_t> dims, sorted;
  };
  const Case cases[] = {{{1}, {1}},       {{0}, {0}},          {{3}, {3}},          {{-1}, {3}},
                        {{1, 2}, {1, 2}}, {{0, 2}, {0, 2}},    {{3, 0}, {0, 3}},    {{-3, -1}, {1, 3}},
                        {{0, 1, 2, 3}, {0, 1, 2, 3}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.dims));
    std::vector<double> ref = reference_sum(xv, shape, c.sorted);
    int64_t count = 1;
    for (int64_t d : c.sorted) count *= shape[d];
    Shape keep = shape, drop;
    for (int64_t d : c.sorted) keep[d] = 1;
    for (int64_t d = 0; d < 4; ++d)
      if (!std::binary_search(c.sorted.begin(), c.sorted.end(), d)) drop.push_back(shape[d]);
    Tensor s = sum(x, c.dims), sk = sum(x, c.dims, true), m = mean(x, c.dims, true);
    EXPECT_EQ(s.shape(), drop);
    EXPECT_EQ(sk.shape(), keep);
    expect_near_all(s.to_vector<double>(), ref, 1e-13);
    expect_near_all(sk.to_vector<double>(), ref, 1e-13);
    std::vector<double> mref = ref;
    for (double& v : mref) v /= static_cast<double>(count);
    expect_near_all(m.to_vector<double>(), mref, 1e-13);
  }
  double total = 0;
  for (double v : xv) total += v;
  EXPECT_EQ(x.sum().dim(), 0);
  EXPECT_NEAR(x.sum().item<double>(), total, 1e-12);
  EXPECT_NEAR(x.mean().item<double>(), total / 120, 1e-14);
  EXPECT_NEAR(x.t().sum().item<double>(), total, 1e-12);
}

TEST(Reduce, SumOfStridedAndWideInputs) {
  manual_seed(32);
  // Over dim 0 with more inner columns than one kernel task holds (256), in float32 and float64,
  // and large enough to be split across threads.
  for (DType dtype : {kFloat32, kFloat64}) {
    for (Shape shape : {Shape{3, 300}, Shape{70, 600}, Shape{4, 1}, Shape{1, 513}}) {
      SCOPED_TRACE(::testing::PrintToString(shape) + dtype_name(dtype));
      Tensor x = randn(shape, dtype);
      std::vector<double> xv = x.to(kFloat64).to_vector<double>();
      expect_near_all(sum(x, {0}).to(kFloat64).to_vector<double>(), reference_sum(xv, shape, {0}),
                      dtype == kFloat32 ? 1e-5 : 1e-13);
      expect_near_all(sum(x, {1}).to(kFloat64).to_vector<double>(), reference_sum(xv, shape, {1}),
                      dtype == kFloat32 ? 1e-5 : 1e-13);
    }
  }
  // A transposed input sums like its contiguous copy.
  Tensor y = randn({5, 6}, kFloat64);
  expect_near_all(sum(y.t(), {1}).to_vector<double>(), sum(y, {0}).to_vector<double>(), 1e-14);
  // int64 sums exactly.
  EXPECT_EQ(sum(arange(10, kInt64)).item<int64_t>(), 45);
}

TEST(Reduce, MaxAndArgmax) {
  Tensor x = Tensor::from_vector<double>({1, 5, 3, 5, 2, 0, 7, 7, 4, -1, -2, -3}, {2, 2, 3});
  MaxResult last = max(x, -1);
  EXPECT_EQ(last.values.shape(), (Shape{2, 2}));
  EXPECT_EQ(last.values.to_vector<double>(), (std::vector<double>{5, 5, 7, -1}));
  EXPECT_EQ(last.indices.dtype(), kInt64);
  EXPECT_EQ(last.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0}));  // first of ties
  MaxResult mid = max(x, 1, true);
  EXPECT_EQ(mid.values.shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(mid.values.to_vector<double>(), (std::vector<double>{5, 5, 3, 7, 7, 4}));
  EXPECT_EQ(mid.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 0, 0, 0}));
  EXPECT_THROW(max(x, 3), Error);
}

TEST(Reduce, MaxGradientGoesToTheArgmax) {
  Tensor x = Tensor::from_vector<double>({1, 9, 3, 8, 2, 6}, {2, 3}).requires_grad_();
  max(x, 1).values.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 1, 0, 0}));
  Tensor y = Tensor::from_vector<double>({1, 9, 3, 8, 2, 6}, {2, 3}).requires_grad_();
  mul(max(y, 0).values, Tensor::from_vector<double>({1, 2, 3})).sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{0, 2, 0, 1, 0, 3}));
}

TEST(Reduce, Gradcheck) {
  manual_seed(33);
  auto check = [](const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& f, const Shape& shape) {
    SCOPED_TRACE(what);
    auto r = gradcheck(f, {leaf(shape)});
    EXPECT_TRUE(r) << r.message;
  };
  check("sum all", [](auto& in) { return sum(in[0]); }, {2, 3, 4});
  check("sum dim", [](auto& in) { return sum(in[0], {1}); }, {2, 3, 4});
  check("sum dims keepdim", [](auto& in) { return sum(in[0], {0, 2}, true); }, {2, 3, 4});
  check("sum negative", [](auto& in) { return sum(in[0], {-1}); }, {3, 5});
  check("mean all", [](auto& in) { return mean(in[0]); }, {3, 5});
  check("mean dims", [](auto& in) { return mean(in[0], {0, 2}); }, {2, 3, 4});
  check("max dim", [](auto& in) { return max(in[0], 1).values; }, {3, 4});
  check("max keepdim", [](auto& in) { return max(in[0], 0, true).values; }, {3, 1, 5});
  check("sum of transposed", [](auto& in) { return sum(in[0].t(), {1}); }, {4, 3});
}

TEST(View, ShapesAndErrors) {
  Tensor x = arange(24, kFloat64).reshape({2, 3, 4});
  EXPECT_EQ(x.flatten().shape(), (Shape{24}));
  EXPECT_EQ(x.flatten(0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.squeeze(0).shape(), (Shape{2, 3, 4}));  // not of size 1: unchanged
  EXPECT_EQ(x.unsqueeze(3).squeeze(-1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(expand(ones({3, 1}), {2, 3, 4}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.permute({1, 2, 0}).contiguous().to_vector<double>()[1], 12.0);  // [0][0][1] = x[1][0][0]
  EXPECT_THROW(x.view({5, 5}), Error);
  EXPECT_THROW(expand(ones({3, 2}), {3, 4}), Error);
  EXPECT_THROW(x.permute({0, 0, 1}), Error);
  EXPECT_THROW(x.transpose(0, 3), Error);
}

TEST(View, Gradcheck) {
  manual_seed(34);
  auto check = [](const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& f, const Shape& shape) {
    SCOPED_TRACE(what);
    auto r = gradcheck(f, {leaf(shape)});
    EXPECT_TRUE(r) << r.message;
  };
  // Each view is followed by a product with fixed weights, so that a gradient landing on the wrong
  // element changes the result.
  Tensor w = randn({24}, kFloat64);
  auto weigh = [w](const Tensor& t) { return mul(t.reshape({-1}), w); };
  check("view", [&](auto& in) { return weigh(in[0].view({4, 6})); }, {2, 3, 4});
  check("reshape", [&](auto& in) { return weigh(in[0].reshape({6, -1})); }, {2, 3, 4});
  check("reshape of transposed (copies)", [&](auto& in) { return weigh(in[0].transpose(0, 2).reshape({24})); }, {2, 3, 4});
  check("view of transposed (no copy)", [&](auto& in) { return weigh(in[0].transpose(0, 1).view({3, 2, 2, 2})); }, {2, 3, 4});
  check("flatten", [&](auto& in) { return weigh(in[0].flatten(1)); }, {2, 3, 4});
  check("squeeze", [&](auto& in) { return weigh(in[0].squeeze(1)); }, {2, 1, 12});
  check("unsqueeze", [&](auto& in) { return weigh(in[0].unsqueeze(-1)); }, {2, 3, 4});
  check("transpose", [&](auto& in) { return weigh(in[0].transpose(-1, 0)); }, {2, 3, 4});
  check("permute", [&](auto& in) { return weigh(in[0].permute({2, 0, 1})); }, {2, 3, 4});
  check("contiguous of transposed", [&](auto& in) { return weigh(in[0].transpose(1, 2).contiguous()); }, {2, 3, 4});
  check("expand", [](auto& in) { return expand(in[0], {2, 3, 4}); }, {3, 1});
  check("expand leading", [](auto& in) { return expand(in[0], {2, 3, 4}); }, {4});
}

TEST(Reduce, SumToShape) {
  manual_seed(35);
  Tensor g = randn({2, 3, 4}, kFloat64);
  std::vector<double> gv = g.to_vector<double>();
  EXPECT_TRUE(sum_to_shape(g, {2, 3, 4}).is_same(g));  // nothing to reduce: no copy
  expect_near_all(sum_to_shape(g, {3, 4}).to_vector<double>(), reference_sum(gv, {2, 3, 4}, {0}), 1e-14);
  expect_near_all(sum_to_shape(g, {3, 1}).to_vector<double>(), reference_sum(gv, {2, 3, 4}, {0, 2}), 1e-14);
  expect_near_all(sum_to_shape(g, {2, 1, 4}).to_vector<double>(), reference_sum(gv, {2, 3, 4}, {1}), 1e-14);
  expect_near_all(sum_to_shape(g, {}).to_vector<double>(), reference_sum(gv, {2, 3, 4}, {0, 1, 2}), 1e-14);
  EXPECT_EQ(sum_to_shape(g, {1, 4}).shape(), (Shape{1, 4}));
  EXPECT_EQ(sum_to_shape(g, {}).shape(), Shape{});
  EXPECT_THROW(sum_to_shape(g, {5, 2, 3, 4}), Error);
}

TEST(Reduce, MinArgminVarAndAbs) {
  Tensor x = Tensor::from_vector<double>({3, -1, 2, -1, 5, 0}, {2, 3});
  MaxResult m = min(x, 1);
  EXPECT_EQ(m.values.to_vector<double>(), (std::vector<double>{-1, -1}));
  EXPECT_EQ(m.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));  // the first on ties
  EXPECT_EQ(argmin(x, 0, true).shape(), (Shape{1, 3}));
  // Row 0: mean 4/3, squares (25 + 49 + 4) / 9 = 78 / 9; unbiased divides by 2.
  std::vector<double> v = var(x, {1}).to_vector<double>();
  EXPECT_NEAR(v[0], 78.0 / 9 / 2, 1e-12);
  // E[x^2] - E[x]^2 = 40 / 6 - (8 / 6)^2.
  EXPECT_NEAR(var(x, {0, 1}, false).item<double>(), 40.0 / 6 - (8.0 / 6) * (8.0 / 6), 1e-12);
  EXPECT_EQ(var(x, {1}, true, true).shape(), (Shape{2, 1}));
  EXPECT_THROW(var(Tensor::from_vector<double>({1}), {0}), Error);  // n - 1 = 0
  EXPECT_EQ(abs(x).to_vector<double>(), (std::vector<double>{3, 1, 2, 1, 5, 0}));
  manual_seed(41);
  for (auto [what, f] : std::vector<std::pair<const char*, std::function<Tensor(const std::vector<Tensor>&)>>>{
           {"min", [](auto& in) { return min(in[0], 1).values; }},
           {"var", [](auto& in) { return var(in[0], {0, 2}); }},
           {"var biased keepdim", [](auto& in) { return var(in[0], {1}, false, true); }},
           {"abs", [](auto& in) { return abs(in[0]); }}}) {
    GradcheckResult r = gradcheck(f, {randn({3, 4, 2}, kFloat64).requires_grad_()});
    EXPECT_TRUE(r) << what << ": " << r.message;
  }
}

}  // namespace minidl::reduce_view_test
