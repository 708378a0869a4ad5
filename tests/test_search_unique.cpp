// searchsorted, bucketize, bincount, histc, unique and unique_consecutive: hand-worked cases, loops
// over random inputs (std::lower_bound, maps) and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::search_unique_test {

using minidl::testing::expect_error;
using minidl::testing::f64;
using minidl::testing::values;

namespace {

const double kNaN = std::nan("");
using I = std::vector<int64_t>;
I ints(const Tensor& t) { return t.contiguous().to(kInt64).to_vector<int64_t>(); }
Tensor i64(const I& v, Shape shape = {}) { return Tensor::from_vector<int64_t>(v, shape); }

}  // namespace

TEST(Search, SearchsortedHandWorked) {
  const Tensor seq = f64({1, 3, 5, 7, 9});
  const Tensor vals = f64({3, 6, 9, 1, 0, 10}, {2, 3});
  const Tensor left = searchsorted(seq, vals);
  ASSERT_EQ(left.shape(), (Shape{2, 3}));
  EXPECT_EQ(left.dtype(), kInt64);
  EXPECT_EQ(ints(left), (I{1, 3, 4, 0, 0, 5}));
  EXPECT_EQ(ints(searchsorted(seq, vals, false, true)), (I{2, 3, 5, 1, 0, 5}));
  EXPECT_EQ(ints(searchsorted(seq, vals, false, false, "right")), (I{2, 3, 5, 1, 0, 5}));
  EXPECT_EQ(searchsorted(seq, vals, true).dtype(), kInt32);
  const Tensor one = searchsorted(seq, 6.0);
  EXPECT_EQ(one.dim(), 0);
  EXPECT_EQ(one.item<int64_t>(), 3);
  EXPECT_EQ(searchsorted(seq, 7, false, true).item<int64_t>(), 4);
  // Duplicates: 1 2 2 2 3: left of 2 is 1, right of 2 is 4.
  EXPECT_EQ(ints(searchsorted(f64({1, 2, 2, 2, 3}), f64({2}))), (I{1}));
  EXPECT_EQ(ints(searchsorted(f64({1, 2, 2, 2, 3}), f64({2}), false, true)), (I{4}));
  // sorter: 5 1 3 in the order 1 2 0 is 1 3 5; 4 goes at 2.
  EXPECT_EQ(ints(searchsorted(f64({5, 1, 3}), f64({4}), false, false, std::nullopt, i64({1, 2, 0}))), (I{2}));
  // NaN values go past everything; NaN boundaries count as the largest.
  EXPECT_EQ(ints(searchsorted(f64({1, 2, kNaN}), f64({kNaN, 1.5, 3}))), (I{3, 1, 2}));
  // Mixed dtypes compare promoted; an empty sequence puts everything at 0.
  EXPECT_EQ(ints(searchsorted(i64({1, 3}), f64({2.5}))), (I{1}));
  EXPECT_EQ(ints(searchsorted(f64({}), f64({1, 2}))), (I{0, 0}));
  EXPECT_EQ(searchsorted(seq, f64({})).numel(), 0);
}

TEST(Search, SearchsortedMatchesLowerAndUpperBound) {
  // Integers from a small range: many ties.
  const Tensor seq = std::get<0>(sort(randint(0, 20, {2, 30}, TensorOptions().dtype(kInt64)), 1));
  const Tensor vals = randint(-2, 22, {2, 17}, TensorOptions().dtype(kInt64));
  const I s = ints(seq), v = ints(vals);
  for (bool right : {false, true}) {
    const I got = ints(searchsorted(seq, vals, false, right));
    const I got_1d = ints(searchsorted(seq[1], vals, false, right));  // row 1 against every value
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t j = 0; j < 17; ++j) {
        auto first = s.begin() + b * 30, last = first + 30;
        const int64_t x = v[b * 17 + j];
        const int64_t want = (right ? std::upper_bound(first, last, x) : std::lower_bound(first, last, x)) - first;
        EXPECT_EQ(got[b * 17 + j], want);
        auto f1 = s.begin() + 30, l1 = f1 + 30;
        EXPECT_EQ(got_1d[b * 17 + j], (right ? std::upper_bound(f1, l1, x) : std::lower_bound(f1, l1, x)) - f1);
      }
  }
}

TEST(Search, Bucketize) {
  const Tensor boundaries = f64({1, 3, 5, 7, 9});
  // right = false: boundaries[i - 1] < x <= boundaries[i].
  EXPECT_EQ(ints(bucketize(f64({3, 6, 9}), boundaries)), (I{1, 3, 4}));
  EXPECT_EQ(ints(bucketize(f64({3, 6, 9}), boundaries, false, true)), (I{2, 3, 5}));
  EXPECT_EQ(bucketize(f64({3, 6, 9}, {3, 1}), boundaries, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(bucketize(f64({3, 6, 9}), boundaries, true).dtype(), kInt32);
  EXPECT_EQ(bucketize(Scalar(4.0), boundaries).item<int64_t>(), 2);
}

TEST(Search, Bincount) {
  const Tensor x = i64({0, 1, 1, 3, 1});
  const Tensor counts = bincount(x);
  EXPECT_EQ(counts.dtype(), kInt64);
  EXPECT_EQ(ints(counts), (I{1, 3, 0, 1}));
  EXPECT_EQ(ints(bincount(x, {}, 6)), (I{1, 3, 0, 1, 0, 0}));
  EXPECT_EQ(ints(bincount(x, {}, 2)), (I{1, 3, 0, 1}));
  const Tensor w = Tensor::from_vector<float>({0.5f, 1, 2, 4, 8});
  const Tensor weighted = bincount(x, w);
  EXPECT_EQ(weighted.dtype(), kFloat32);
  EXPECT_EQ(values(weighted), (std::vector<double>{0.5, 11, 0, 4}));
  EXPECT_EQ(bincount(x, f64({1, 1, 1, 1, 1})).dtype(), kFloat64);
  EXPECT_EQ(bincount(x, i64({1, 2, 3, 4, 5})).dtype(), kFloat64);  // as PyTorch: non-float32 weights in float64
  EXPECT_EQ(values(bincount(x, i64({1, 2, 3, 4, 5}))), (std::vector<double>{1, 10, 0, 4}));
  EXPECT_EQ(ints(bincount(Tensor::empty({0}, kInt64), {}, 3)), (I{0, 0, 0}));
  EXPECT_EQ(bincount(Tensor::empty({0}, kInt64)).numel(), 0);
  EXPECT_EQ(ints(bincount(x.to(kInt32))), (I{1, 3, 0, 1}));
  // Against a loop.
  const Tensor r = randint(0, 9, {50}, TensorOptions().dtype(kInt64));
  I want(9, 0);
  int64_t top = 0;
  for (int64_t v : ints(r)) {
    ++want[v];
    top = std::max(top, v);
  }
  want.resize(top + 1);
  EXPECT_EQ(ints(bincount(r)), want);
}

TEST(Search, Histc) {
  // [0, 4] in 4 bins of width 1: 1 -> 1, 2 -> 2, 1 -> 1, 2.5 -> 2, 4 (max) -> 3; -1 and 5 ignored.
  const Tensor x = Tensor::from_vector<float>({1, 2, 1, 2.5f, 4, -1, 5});
  const Tensor h = histc(x, 4, 0, 4);
  EXPECT_EQ(h.dtype(), kFloat32);
  EXPECT_EQ(values(h), (std::vector<double>{0, 2, 2, 1}));
  // min == max: the data's range [1, 3] in 2 bins: 1 -> 0, 2 -> 1, 3 -> 1 (the max in the last bin).
  EXPECT_EQ(values(histc(f64({1, 2, 3}), 2)), (std::vector<double>{1, 2}));
  // All equal: [2 - 1, 2 + 1] in 4 bins of 0.5: 2 -> bin 2.
  EXPECT_EQ(values(histc(f64({2, 2}), 4)), (std::vector<double>{0, 0, 2, 0}));
  // [0, 2] in bins [0, 1) and [1, 2]: 0.5 -> 0, 2 -> 1; NaN ignored.
  EXPECT_EQ(values(histc(f64({0.5, kNaN, 2}), 2, 0, 2)), (std::vector<double>{1, 1}));
  EXPECT_EQ(histc(f64({}), 3).numel(), 3);
  EXPECT_EQ(histc(f64({1})).numel(), 100);
  // Against a loop in doubles.
  const Tensor r = randn({200}, kFloat64);
  std::vector<double> want(7, 0);
  for (double v : values(r)) {
    if (v < -1.5 || v > 2) continue;
    const int64_t b = std::min<int64_t>(6, static_cast<int64_t>(std::floor((v + 1.5) * 7 / 3.5)));
    want[b] += 1;
  }
  EXPECT_EQ(values(histc(r, 7, -1.5, 2)), want);
}

TEST(Search, Errors) {
  const Tensor seq = f64({1, 2, 3});
  expect_error([&] { searchsorted(f64({1, 2, 3, 4}, {2, 2}), f64({1, 2, 3}, {3, 1})); },
               {"searchsorted", "leading dimensions", "[2, 2]", "[3, 1]"});
  expect_error([&] { searchsorted(f64({1, 2, 3, 4}, {2, 2}), f64({1, 2})); }, {"searchsorted", "[2, 2]", "[2]"});
  expect_error([&] { searchsorted(scalar_tensor(1.0, kFloat64), f64({1})); }, {"searchsorted", "0-d"});
  expect_error([&] { searchsorted(f64({1, 2, 3, 4}, {2, 2}), 1.0); }, {"searchsorted", "1-D", "[2, 2]"});
  expect_error([&] { searchsorted(seq, f64({1}), false, false, "middle"); }, {"searchsorted", "side", "middle"});
  expect_error([&] { searchsorted(seq, f64({1}), false, true, "left"); }, {"searchsorted", "left", "right"});
  expect_error([&] { searchsorted(seq, f64({1}), false, false, std::nullopt, f64({0, 1, 2})); },
               {"searchsorted", "sorter", "int64", "float64"});
  expect_error([&] { searchsorted(seq, f64({1}), false, false, std::nullopt, i64({0, 1})); },
               {"searchsorted", "sorter", "[3]", "[2]"});
  expect_error([&] { bucketize(f64({1}), f64({1, 2, 3, 4}, {2, 2})); }, {"bucketize", "1-D", "[2, 2]"});
  expect_error([&] { bincount(i64({1, -2, 3})); }, {"bincount", "non-negative", "-2"});
  expect_error([&] { bincount(i64({1, 2}, {1, 2})); }, {"bincount", "1-D", "[1, 2]"});
  expect_error([&] { bincount(f64({1, 2})); }, {"bincount", "integers", "float64"});
  expect_error([&] { bincount(i64({1, 2}), f64({1})); }, {"bincount", "weights", "2", "[1]"});
  expect_error([&] { bincount(i64({1, 2}), {}, -1); }, {"bincount", "minlength", "-1"});
  expect_error([&] { histc(f64({1}), 0); }, {"histc", "bins > 0", "0"});
  expect_error([&] { histc(f64({1}), 10, 3, 1); }, {"histc", "min <= max", "3", "1"});
  expect_error([&] { histc(i64({1})); }, {"histc", "floating", "int64"});
  expect_error([&] { histc(f64({1, INFINITY})); }, {"histc", "finite", "inf"});
}

TEST(Unique, FlattenedValuesInverseCounts) {
  // 3 1 2 / 3 1 1: distinct 1 2 3; 1 three times, 2 once, 3 twice.
  const Tensor x = i64({3, 1, 2, 3, 1, 1}, {2, 3});
  auto [vals, inverse, counts] = unique(x, true, true, true);
  EXPECT_EQ(ints(vals), (I{1, 2, 3}));
  EXPECT_EQ(vals.dtype(), kInt64);
  ASSERT_EQ(inverse.shape(), (Shape{2, 3}));
  EXPECT_EQ(ints(inverse), (I{2, 0, 1, 2, 0, 0}));
  EXPECT_EQ(ints(counts), (I{3, 1, 2}));
  auto [only, no_inverse, no_counts] = unique(x);
  EXPECT_EQ(ints(only), (I{1, 2, 3}));
  EXPECT_EQ(no_inverse.numel(), 0);
  EXPECT_EQ(no_inverse.dtype(), kInt64);
  EXPECT_EQ(no_counts.numel(), 0);
  // sorted = false gives the sorted order too.
  EXPECT_EQ(ints(std::get<0>(unique(x, false))), (I{1, 2, 3}));
  // NaN: each NaN is distinct, sorted last.
  auto [nv, ni, nc] = unique(f64({kNaN, 1, kNaN, 1}), true, true, true);
  ASSERT_EQ(nv.numel(), 3);
  EXPECT_EQ(nv[0].item<double>(), 1);
  EXPECT_TRUE(std::isnan(nv[1].item<double>()) && std::isnan(nv[2].item<double>()));
  EXPECT_EQ(ints(ni), (I{1, 0, 2, 0}));
  EXPECT_EQ(ints(nc), (I{2, 1, 1}));
  // bool, empty, 0-d.
  const Tensor b = Tensor::from_vector<bool>({true, false, true});
  EXPECT_EQ(std::get<0>(unique(b)).to_vector<bool>(), (std::vector<bool>{false, true}));
  auto [ev, ei, ec] = unique(f64({}), true, true, true);
  EXPECT_EQ(ev.numel() + ei.numel() + ec.numel(), 0);
  auto [sv, si, sc] = unique(scalar_tensor(4.0, kFloat64), true, true, true);
  EXPECT_EQ(values(sv), (std::vector<double>{4}));
  EXPECT_EQ(si.dim(), 0);
  EXPECT_EQ(ints(sc), (I{1}));
}

TEST(Unique, MatchesAMapOnRandomInput) {
  const Tensor x = randint(-5, 6, {4, 9}, TensorOptions().dtype(kInt64));
  auto [vals, inverse, counts] = unique(x, true, true, true);
  std::map<int64_t, int64_t> seen;
  for (int64_t v : ints(x)) ++seen[v];
  I want_values, want_counts;
  for (auto [v, c] : seen) {
    want_values.push_back(v);
    want_counts.push_back(c);
  }
  EXPECT_EQ(ints(vals), want_values);
  EXPECT_EQ(ints(counts), want_counts);
  const I xs = ints(x), inv = ints(inverse);
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(want_values[inv[i]], xs[i]);
}

TEST(Unique, AlongADim) {
  // Rows 1 2 / 0 5 / 1 2 / 0 1: distinct rows in order 0 1 / 0 5 / 1 2.
  const Tensor x = i64({1, 2, 0, 5, 1, 2, 0, 1}, {4, 2});
  auto [vals, inverse, counts] = unique(x, true, true, true, 0);
  ASSERT_EQ(vals.shape(), (Shape{3, 2}));
  EXPECT_EQ(ints(vals), (I{0, 1, 0, 5, 1, 2}));
  EXPECT_EQ(ints(inverse), (I{2, 1, 2, 0}));
  EXPECT_EQ(ints(counts), (I{1, 1, 2}));
  // The same as columns of the transpose.
  auto [tv, ti, tc] = unique_dim(x.t(), 1, true, true, true);
  ASSERT_EQ(tv.shape(), (Shape{2, 3}));
  EXPECT_EQ(ints(tv), (I{0, 0, 1, 1, 5, 2}));
  EXPECT_EQ(ints(ti), (I{2, 1, 2, 0}));
  EXPECT_EQ(ints(tc), (I{1, 1, 2}));
  // Slices of [2, 2] along dim 0 of [3, 2, 2]: slices 0 and 2 equal.
  const Tensor y = i64({1, 2, 3, 4, 0, 0, 0, 9, 1, 2, 3, 4}, {3, 2, 2});
  auto [yv, yi, yc] = unique(y, true, true, true, 0);
  EXPECT_EQ(yv.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(ints(yv), (I{0, 0, 0, 9, 1, 2, 3, 4}));
  EXPECT_EQ(ints(yi), (I{1, 0, 1}));
  EXPECT_EQ(ints(yc), (I{1, 2}));
  expect_error([&] { unique(x, true, false, false, 2); }, {"unique", "2"});
  expect_error([&] { unique(scalar_tensor(1.0, kFloat64), true, false, false, 0); }, {"unique", "0-d"});
}

TEST(Unique, Consecutive) {
  // 1 1 2 2 3 1 1 2: runs 1 2 3 1 2 of lengths 2 2 1 2 1.
  const Tensor x = i64({1, 1, 2, 2, 3, 1, 1, 2});
  auto [vals, inverse, counts] = unique_consecutive(x, true, true);
  EXPECT_EQ(ints(vals), (I{1, 2, 3, 1, 2}));
  EXPECT_EQ(ints(inverse), (I{0, 0, 1, 1, 2, 3, 3, 4}));
  EXPECT_EQ(ints(counts), (I{2, 2, 1, 2, 1}));
  auto [v2, i2, c2] = unique_consecutive(x.reshape({2, 4}), true);
  EXPECT_EQ(i2.shape(), (Shape{2, 4}));
  EXPECT_EQ(c2.numel(), 0);
  // Rows 1 2 / 1 2 / 3 4 / 1 2 along dim 0: 1 2 / 3 4 / 1 2, counts 2 1 1.
  auto [rv, ri, rc] = unique_consecutive(i64({1, 2, 1, 2, 3, 4, 1, 2}, {4, 2}), true, true, 0);
  EXPECT_EQ(ints(rv), (I{1, 2, 3, 4, 1, 2}));
  EXPECT_EQ(ints(ri), (I{0, 0, 1, 2}));
  EXPECT_EQ(ints(rc), (I{2, 1, 1}));
  // Against a loop.
  const Tensor r = randint(0, 3, {40}, TensorOptions().dtype(kInt64));
  I want_values, want_counts;
  for (int64_t v : ints(r)) {
    if (!want_values.empty() && want_values.back() == v) {
      ++want_counts.back();
    } else {
      want_values.push_back(v);
      want_counts.push_back(1);
    }
  }
  auto [lv, li, lc] = unique_consecutive(r, false, true);
  EXPECT_EQ(ints(lv), want_values);
  EXPECT_EQ(ints(lc), want_counts);
}

}  // namespace minidl::search_unique_test
