// median, nanmedian, kthvalue, quantile and nanquantile: values against plain loops in doubles and
// hand-worked cases, ties and NaN, odd and even sizes, every interpolation, float64 gradient checks
// and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::order_stats_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::f64;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

using V = const std::vector<Tensor>&;
const double kNaN = std::nan("");

// Positions 0..n-1 of v in stable ascending order, NaN last.
std::vector<int64_t> stable_order(const std::vector<double>& v) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (std::isnan(v[b])) return !std::isnan(v[a]);
    return !std::isnan(v[a]) && v[a] < v[b];
  });
  return order;
}

// Row r of a [rows, cols] float64 matrix as seen along `dim` (0: column r, 1: row r).
std::vector<double> line(const std::vector<double>& m, int64_t rows, int64_t cols, int64_t dim, int64_t r) {
  std::vector<double> out;
  if (dim == 1)
    for (int64_t j = 0; j < cols; ++j) out.push_back(m[r * cols + j]);
  else
    for (int64_t i = 0; i < rows; ++i) out.push_back(m[i * cols + r]);
  return out;
}

// The quantile of v by the documented rule, in doubles.
double ref_quantile(std::vector<double> v, double q, const std::string& mode, bool ignore_nan) {
  const bool any_nan = std::any_of(v.begin(), v.end(), [](double a) { return std::isnan(a); });
  if (ignore_nan) v.erase(std::remove_if(v.begin(), v.end(), [](double a) { return std::isnan(a); }), v.end());
  if (v.empty() || (any_nan && !ignore_nan)) return kNaN;
  std::sort(v.begin(), v.end());
  const double rank = q * static_cast<double>(v.size() - 1);
  const double lo = v[static_cast<size_t>(std::floor(rank))], hi = v[static_cast<size_t>(std::ceil(rank))];
  if (mode == "lower") return lo;
  if (mode == "higher") return hi;
  if (mode == "nearest") return v[static_cast<size_t>(std::nearbyint(rank))];  // halves to even
  if (mode == "midpoint") return (lo + hi) / 2;
  return lo + (hi - lo) * (rank - std::floor(rank));
}

void expect_same(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": " << got[i];
    } else {
      EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
    }
  }
}

}  // namespace

TEST(OrderStats, MedianOfAllIsTheLowerMedian) {
  EXPECT_EQ(median(f64({3, 1, 2})).item<double>(), 2);        // odd: the middle
  EXPECT_EQ(median(f64({4, 1, 3, 2})).item<double>(), 2);     // even: sorted 1 2 3 4, the lower of 2 and 3
  EXPECT_EQ(median(f64({4, 1, 3, 2}, {2, 2})).dim(), 0);
  const Tensor ints = median(Tensor::from_vector<int64_t>({5, 1, 5, 3}));  // sorted 1 3 5 5
  EXPECT_EQ(ints.dtype(), kInt64);
  EXPECT_EQ(ints.item<int64_t>(), 3);
  EXPECT_TRUE(std::isnan(median(f64({1, kNaN, 2})).item<double>()));
  EXPECT_TRUE(std::isnan(median(f64({})).item<double>()));
  EXPECT_EQ(median(Tensor::from_vector<float>({2.5f})).dtype(), kFloat32);
}

TEST(OrderStats, MedianAlongADimMatchesALoop) {
  for (int64_t cols : {5, 6}) {  // odd and even
    const int64_t rows = 4;
    const Tensor x = randn({rows, cols}, kFloat64);
    const std::vector<double> m = values(x);
    for (int64_t dim : {0, 1}) {
      auto [vals, indices] = median(x, dim);
      const int64_t count = dim == 1 ? rows : cols;
      ASSERT_EQ(vals.shape(), (Shape{count}));
      EXPECT_EQ(indices.dtype(), kInt64);
      for (int64_t r = 0; r < count; ++r) {
        const std::vector<double> v = line(m, rows, cols, dim, r);
        const int64_t at = stable_order(v)[(v.size() - 1) / 2];
        EXPECT_EQ(vals[r].item<double>(), v[at]);
        EXPECT_EQ(indices[r].item<int64_t>(), at);
      }
    }
    auto [kept, kept_i] = median(x, -1, true);
    EXPECT_EQ(kept.shape(), (Shape{rows, 1}));
    EXPECT_EQ(kept_i.shape(), (Shape{rows, 1}));
  }
}

TEST(OrderStats, MedianTiesAndNaN) {
  // Row 0: 2 1 2 2, stable order 1(1) 2(0) 2(2) 2(3); rank 1: value 2 from position 0.
  // Row 1: 1 NaN 0 NaN: NaN, at the first NaN (position 1).
  // Row 2: 5 5 5 7: rank 1: value 5 from position 1.
  const Tensor x = f64({2, 1, 2, 2, 1, kNaN, 0, kNaN, 5, 5, 5, 7}, {3, 4});
  auto [v, i] = median(x, 1);
  expect_same(values(v), {2, kNaN, 5});
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
  // 0-d input: dim 0 or -1, itself at 0.
  auto [s, si] = median(scalar_tensor(3.0, kFloat64), -1);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 3);
  EXPECT_EQ(si.item<int64_t>(), 0);
}

TEST(OrderStats, NanMedianIgnoresNaN) {
  // Row 0: 1 NaN 3 2 NaN: of 1 3 2 the median 2 at position 3. Row 1: all NaN: NaN.
  // Row 2: NaN 4 8 6 0: of 4 8 6 0 (sorted 0 4 6 8) the lower median 4 at position 1.
  const Tensor x = f64({1, kNaN, 3, 2, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 4, 8, 6, 0}, {3, 5});
  auto [v, i] = nanmedian(x, 1);
  expect_same(values(v), {2, kNaN, 4});
  EXPECT_EQ(i[0].item<int64_t>(), 3);
  EXPECT_EQ(i[2].item<int64_t>(), 1);
  EXPECT_EQ(nanmedian(f64({kNaN, 5, 1, kNaN, 3, 9})).item<double>(), 3);  // of 5 1 3 9: sorted 1 3 5 9
  EXPECT_TRUE(std::isnan(nanmedian(f64({kNaN, kNaN})).item<double>()));
  // Without NaN it is median.
  const Tensor y = randn({3, 6}, kFloat64);
  EXPECT_TRUE(std::get<0>(nanmedian(y, 0)).equal(std::get<0>(median(y, 0))));
}

TEST(OrderStats, KthvalueMatchesALoop) {
  const Tensor x = randn({3, 7}, kFloat64);
  const std::vector<double> m = values(x);
  for (int64_t k : {1, 4, 7}) {
    auto [v, i] = kthvalue(x, k);
    for (int64_t r = 0; r < 3; ++r) {
      const std::vector<double> row = line(m, 3, 7, 1, r);
      const int64_t at = stable_order(row)[k - 1];
      EXPECT_EQ(v[r].item<double>(), row[at]);
      EXPECT_EQ(i[r].item<int64_t>(), at);
    }
  }
  auto [v0, i0] = kthvalue(x, 2, 0, true);
  EXPECT_EQ(v0.shape(), (Shape{1, 7}));
  // Ties keep their order; NaN is the largest: 3 NaN 3 1 -> stable order 1(3) 3(0) 3(2) NaN(1).
  auto [t, ti] = kthvalue(f64({3, kNaN, 3, 1}), 3);
  EXPECT_EQ(t.item<double>(), 3);
  EXPECT_EQ(ti.item<int64_t>(), 2);
  auto [n, ni] = kthvalue(f64({3, kNaN, 3, 1}), 4);
  EXPECT_TRUE(std::isnan(n.item<double>()));
  EXPECT_EQ(ni.item<int64_t>(), 1);
}

TEST(OrderStats, MedianAndKthvalueGradients) {
  expect_gradcheck("median all", [](V in) { return median(in[0]); }, {leaf({3, 5})});
  expect_gradcheck("median dim", [](V in) { return std::get<0>(median(in[0], 0)); }, {leaf({4, 3})});
  expect_gradcheck("median keepdim", [](V in) { return std::get<0>(median(in[0], 1, true)); }, {leaf({2, 5})});
  expect_gradcheck("nanmedian", [](V in) { return std::get<0>(nanmedian(in[0], 1)); }, {leaf({3, 4})});
  expect_gradcheck("kthvalue", [](V in) { return std::get<0>(kthvalue(in[0], 2, 0)); }, {leaf({5, 3})});
  // The gradient reaches the picked element only: 1 at position 2 of 3 7 5 1 9 (lower median 5).
  Tensor x = f64({3, 7, 5, 1, 9}).requires_grad_();
  median(x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 1, 0, 0}));
}

TEST(OrderStats, QuantileHandWorked) {
  // 1 2 3 4: q 0.5 -> rank 1.5 (between 2 and 3); q 0.4 -> rank 1.2.
  const Tensor x = f64({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(quantile(x, 0.5).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(quantile(x, 0.5, std::nullopt, false, "lower").item<double>(), 2);
  EXPECT_DOUBLE_EQ(quantile(x, 0.5, std::nullopt, false, "higher").item<double>(), 3);
  EXPECT_DOUBLE_EQ(quantile(x, 0.5, std::nullopt, false, "nearest").item<double>(), 3);  // round(1.5) = 2
  EXPECT_DOUBLE_EQ(quantile(x, 0.5, std::nullopt, false, "midpoint").item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(quantile(x, 0.4).item<double>(), 2.2);
  EXPECT_DOUBLE_EQ(quantile(x, 0.4, std::nullopt, false, "lower").item<double>(), 2);
  EXPECT_DOUBLE_EQ(quantile(x, 0.4, std::nullopt, false, "higher").item<double>(), 3);
  EXPECT_DOUBLE_EQ(quantile(x, 0.4, std::nullopt, false, "nearest").item<double>(), 2);
  EXPECT_DOUBLE_EQ(quantile(x, 0.4, std::nullopt, false, "midpoint").item<double>(), 2.5);
  // 0 10 20: q 0.25 -> rank 0.5: nearest rounds to even (0), linear 5.
  const Tensor y = f64({20, 0, 10});
  EXPECT_DOUBLE_EQ(quantile(y, 0.25, std::nullopt, false, "nearest").item<double>(), 0);
  EXPECT_DOUBLE_EQ(quantile(y, 0.25).item<double>(), 5);
  EXPECT_DOUBLE_EQ(quantile(y, 1.0).item<double>(), 20);
  EXPECT_DOUBLE_EQ(quantile(y, 0.0).item<double>(), 0);
}

TEST(OrderStats, QuantileMatchesALoopForEveryInterpolation) {
  const std::vector<double> qs = {0, 0.1, 0.25, 0.5, 0.7, 0.9, 1};
  for (int64_t cols : {7, 6}) {
    const int64_t rows = 3;
    const Tensor x = randn({rows, cols}, kFloat64);
    const std::vector<double> m = values(x);
    for (const std::string mode : {"linear", "lower", "higher", "nearest", "midpoint"}) {
      SCOPED_TRACE(mode + " cols " + std::to_string(cols));
      for (int64_t dim : {0, 1}) {
        const Tensor out = quantile(x, f64(qs), dim, false, mode);
        const int64_t count = dim == 1 ? rows : cols;
        ASSERT_EQ(out.shape(), (Shape{static_cast<int64_t>(qs.size()), count}));
        std::vector<double> want;
        for (double q : qs)
          for (int64_t r = 0; r < count; ++r) want.push_back(ref_quantile(line(m, rows, cols, dim, r), q, mode, false));
        expect_same(values(out), want);
      }
      std::vector<double> want_all;
      for (double q : qs) want_all.push_back(ref_quantile(m, q, mode, false));
      expect_same(values(quantile(x, f64(qs), std::nullopt, false, mode)), want_all);
    }
  }
}

TEST(OrderStats, QuantileShapesAndDtypes) {
  const Tensor x = randn({2, 3, 4}, kFloat32);
  EXPECT_EQ(quantile(x, 0.3).shape(), (Shape{}));
  EXPECT_EQ(quantile(x, 0.3, std::nullopt, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(quantile(x, 0.3, 1).shape(), (Shape{2, 4}));
  EXPECT_EQ(quantile(x, 0.3, 1, true).shape(), (Shape{2, 1, 4}));
  const Tensor q = Tensor::from_vector<float>({0.1f, 0.5f});
  EXPECT_EQ(quantile(x, q, -1).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(quantile(x, q, 0, true).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(quantile(x, q).shape(), (Shape{2}));
  EXPECT_EQ(quantile(x, scalar_tensor(0.5, kFloat32)).shape(), (Shape{}));
  EXPECT_EQ(quantile(x, q).dtype(), kFloat32);
  // float32 against the double loop on the same values.
  const std::vector<double> all = values(x);
  EXPECT_NEAR(quantile(x, 0.3).item<float>(), ref_quantile(all, 0.3, "linear", false), 1e-5);
  // Along dim 1 of [2, 3, 4]: element [0][.][2] is x[0][j][2].
  const Tensor mid = quantile(x, 0.5, 1);
  EXPECT_NEAR(mid[0][2].item<float>(), ref_quantile({all[2], all[6], all[10]}, 0.5, "linear", false), 1e-6);
}

TEST(OrderStats, QuantileNaNAndNanquantile) {
  // Row 0: 1 NaN 3 2; row 1: 4 5 6 7; row 2: NaN NaN NaN NaN.
  const Tensor x = f64({1, kNaN, 3, 2, 4, 5, 6, 7, kNaN, kNaN, kNaN, kNaN}, {3, 4});
  for (const std::string mode : {"linear", "lower", "higher", "nearest", "midpoint"}) {
    SCOPED_TRACE(mode);
    const std::vector<double> m = values(x);
    for (double q : {0.0, 0.3, 0.5, 1.0}) {
      std::vector<double> want, want_nan;
      for (int64_t r = 0; r < 3; ++r) {
        want.push_back(ref_quantile(line(m, 3, 4, 1, r), q, mode, false));
        want_nan.push_back(ref_quantile(line(m, 3, 4, 1, r), q, mode, true));
      }
      expect_same(values(quantile(x, q, 1, false, mode)), want);
      expect_same(values(nanquantile(x, q, 1, false, mode)), want_nan);
    }
  }
  // Hand-worked: of 1 3 2 (sorted 1 2 3), q 0.75 -> rank 1.5 -> 2.5; row 1 rank 2.25 -> 6.25.
  expect_same(values(nanquantile(x, 0.75, 1)), {2.5, 6.25, kNaN});
  EXPECT_TRUE(std::isnan(quantile(x, 0.5).item<double>()));
  EXPECT_DOUBLE_EQ(nanquantile(x, 0.5).item<double>(), 4);  // of 1 3 2 4 5 6 7: the middle of seven
}

TEST(OrderStats, QuantileGradients) {
  const Tensor q = f64({0.3, 0.5, 0.85});
  for (const std::string mode : {"linear", "lower", "higher", "nearest", "midpoint"}) {
    expect_gradcheck(("quantile " + mode).c_str(), [&](V in) { return quantile(in[0], q, 1, false, mode); },
                     {leaf({3, 5})});
    expect_gradcheck(("nanquantile " + mode).c_str(), [&](V in) { return nanquantile(in[0], 0.4, 0, true, mode); },
                     {leaf({4, 3})});
  }
  expect_gradcheck("quantile of all", [](V in) { return quantile(in[0], 0.37); }, {leaf({2, 3, 2})});
  // linear at rank 1.2 of 1 2 3 4: 0.8 to the second smallest, 0.2 to the third.
  Tensor x = f64({4, 1, 3, 2}).requires_grad_();
  quantile(x, 0.4).backward();
  expect_same(values(x.grad()), {0, 0, 0.2, 0.8});
}

TEST(OrderStats, Errors) {
  const Tensor x = randn({3, 4}, kFloat64);
  expect_error([&] { median(x, 2); }, {"median", "2"});
  expect_error([&] { median(Tensor::empty({2, 0}, kFloat64), 1); }, {"median", "non-empty", "[2, 0]"});
  expect_error([&] { median(Tensor::empty({0}, kInt64)); }, {"median", "empty", "int64"});
  expect_error([&] { kthvalue(x, 5, 1); }, {"kthvalue", "k (5)", "size 4", "1 <= k <= 4"});
  expect_error([&] { kthvalue(x, 0); }, {"kthvalue", "k (0)"});
  expect_error([&] { quantile(x, 1.5); }, {"quantile", "[0, 1]", "1.5"});
  expect_error([&] { quantile(x, f64({0.2, -0.1})); }, {"quantile", "[0, 1]", "-0.1"});
  expect_error([&] { quantile(x, 0.5, std::nullopt, false, "cubic"); }, {"quantile", "interpolation", "cubic"});
  expect_error([&] { quantile(x, Tensor::from_vector<float>({0.5f})); }, {"quantile", "float64", "float32"});
  expect_error([&] { quantile(x, f64({0.5, 0.5}, {1, 2})); }, {"quantile", "q", "[1, 2]"});
  expect_error([&] { quantile(Tensor::from_vector<int64_t>({1, 2}), 0.5); }, {"quantile", "float32 or float64", "int64"});
  expect_error([&] { nanquantile(Tensor::empty({0}, kFloat64), 0.5); }, {"nanquantile", "non-empty"});
  expect_error([&] { quantile(x, 0.5, -3); }, {"quantile", "-3"});
}

// The Tensor methods forward to the functions.
TEST(OrderStats, TensorMethodsForward) {
  const Tensor x = randn({4, 5}, kFloat64);
  EXPECT_TRUE(x.median().equal(median(x)));
  EXPECT_TRUE(std::get<1>(x.median(1)).equal(std::get<1>(median(x, 1))));
  EXPECT_TRUE(std::get<0>(x.kthvalue(2, 0)).equal(std::get<0>(kthvalue(x, 2, 0))));
  EXPECT_TRUE(x.quantile(0.3, 1).equal(quantile(x, 0.3, 1)));
  EXPECT_TRUE(x.nanquantile(0.3).equal(nanquantile(x, 0.3)));
  EXPECT_TRUE(x.cov().equal(cov(x)));
  EXPECT_TRUE(x.corrcoef().equal(corrcoef(x)));
  EXPECT_TRUE(x.histc(4).equal(histc(x, 4)));
  const Tensor labels = Tensor::from_vector<int64_t>({0, 2, 2});
  EXPECT_EQ(labels.bincount().to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 2}));
}

}  // namespace minidl::order_stats_test
