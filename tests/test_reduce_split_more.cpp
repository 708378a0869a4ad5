// nansum, nanmean, count_nonzero, aminmax, var_mean and std_mean; split by sizes and tensor_split;
// take_along_dim, index_fill and index_copy (and their in-place forms): values against loops or
// against the ops they are made of, float64 gradient checks, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::reduce_split_more_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

using V = const std::vector<Tensor>&;

}  // namespace

TEST(ReduceMore, NanSkippingSumAndMean) {
  const double nan = std::nan("");
  const Tensor x = Tensor::from_vector<double>({1, nan, 3, nan, nan, nan}, {2, 3});
  EXPECT_EQ(nansum(x).item<double>(), 4.0);
  EXPECT_EQ(values(nansum(x, {1})), (std::vector<double>{4, 0}));
  const std::vector<double> m = values(nanmean(x, {1}));
  EXPECT_EQ(m[0], 2.0);
  EXPECT_TRUE(std::isnan(m[1]));  // all NaN: 0 / 0
  const Tensor columns = x.nanmean({0}, true);
  EXPECT_EQ(columns.shape(), (Shape{1, 3}));
  EXPECT_EQ(values(columns)[0], 1.0);
  EXPECT_TRUE(std::isnan(values(columns)[1]));
  EXPECT_EQ(values(columns)[2], 3.0);
  EXPECT_EQ(nansum(Tensor::from_vector<int64_t>({2, 5})).item<int64_t>(), 7);
  // The gradient is 0 at NaN, as sum's over the zeros put there.
  Tensor leaf_x = x.clone().requires_grad_();
  nanmean(leaf_x).backward();
  EXPECT_EQ(values(leaf_x.grad()), (std::vector<double>{0.5, 0, 0.5, 0, 0, 0}));
  expect_gradcheck("nansum", [](V in) { return nansum(in[0], {0}); }, {leaf({3, 2})});
  expect_gradcheck("nanmean", [](V in) { return nanmean(in[0], {1}, true); }, {leaf({3, 2})});
}

TEST(ReduceMore, CountsExtremesAndMoments) {
  const Tensor x = Tensor::from_vector<double>({0, 2, -1, 0, 0, 5}, {2, 3});
  EXPECT_EQ(count_nonzero(x).item<int64_t>(), 3);
  EXPECT_EQ(count_nonzero(x, {0}).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(x.count_nonzero({1}).dtype(), kInt64);
  auto [lo, hi] = aminmax(x);
  EXPECT_EQ(lo.item<double>(), -1.0);
  EXPECT_EQ(hi.item<double>(), 5.0);
  auto [rows_lo, rows_hi] = x.aminmax(1, true);
  EXPECT_EQ(values(rows_lo), (std::vector<double>{-1, 0}));
  EXPECT_EQ(rows_hi.shape(), (Shape{2, 1}));
  const Tensor r = randn({4, 5}, kFloat64);
  auto [v, m] = var_mean(r, {1}, Scalar(0), true);
  EXPECT_TRUE(v.equal(var(r, {1}, Scalar(0), true)));
  EXPECT_TRUE(m.equal(mean(r, {1}, true)));
  auto [s, m2] = std_mean(r);
  EXPECT_TRUE(s.equal(minidl::std(r)));
  EXPECT_TRUE(m2.equal(mean(r)));
  expect_error([] { aminmax(zeros({0})); }, {"aminmax", "non-empty"});
  expect_error([] { nanmean(zeros({2}, kInt64)); }, {"nanmean", "floating"});
}

TEST(SplitMore, BySizesAndTensorSplit) {
  const Tensor x = arange(0, 10, 1, kFloat64).reshape({2, 5});
  const auto parts = x.split(std::vector<int64_t>{2, 0, 3}, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(values(parts[0]), (std::vector<double>{0, 1, 5, 6}));
  EXPECT_EQ(parts[1].shape(), (Shape{2, 0}));
  EXPECT_EQ(values(parts[2]), (std::vector<double>{2, 3, 4, 7, 8, 9}));
  // 5 in 3 sections: 2, 2, 1.
  const auto even = tensor_split(x, 3, 1);
  ASSERT_EQ(even.size(), 3u);
  EXPECT_EQ(even[0].size(1), 2);
  EXPECT_EQ(even[2].size(1), 1);
  EXPECT_EQ(tensor_split(x, 7, 1).back().size(1), 0);  // more sections than columns: empty ones
  // Between indices, as Python slices: [:1], [1:4], [4:2] (empty), [2:].
  const auto at = x.tensor_split(std::vector<int64_t>{1, 4, 2}, 1);
  ASSERT_EQ(at.size(), 4u);
  EXPECT_EQ(at[1].size(1), 3);
  EXPECT_EQ(at[2].size(1), 0);
  EXPECT_EQ(values(at[3]), (std::vector<double>{2, 3, 4, 7, 8, 9}));
  EXPECT_EQ(tensor_split(x, std::vector<int64_t>{-2}, 1)[1].size(1), 2);
  expect_gradcheck("split by sizes", [](V in) { return split(in[0], std::vector<int64_t>{1, 3}, 0)[1] * 2.0; },
                   {leaf({4, 2})});
  expect_error([&] { split(x, std::vector<int64_t>{2, 2}, 1); }, {"split_with_sizes", "add up to 5", "got 4"});
  expect_error([&] { tensor_split(x, 0); }, {"tensor_split", "sections > 0"});
}

TEST(IndexMore, TakeAlongDimBroadcasts) {
  const Tensor x = randn({3, 4}, kFloat64);
  const Tensor order = argsort(x, 1);
  const Tensor sorted = take_along_dim(x, order, 1);
  EXPECT_TRUE(sorted.equal(std::get<0>(sort(x, 1))));
  // indices [1, 2] broadcast over x's 3 rows: every row's columns 3 and 0.
  const Tensor cols = Tensor::from_vector<int64_t>({3, 0}, {1, 2});
  const Tensor picked = x.take_along_dim(cols, 1);
  ASSERT_EQ(picked.shape(), (Shape{3, 2}));
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(picked.index({i, 0}).item<double>(), x.index({i, 3}).item<double>());
    EXPECT_EQ(picked.index({i, 1}).item<double>(), x.index({i, 0}).item<double>());
  }
  // No dim: over the flattened tensors.
  EXPECT_EQ(take_along_dim(x, Tensor::from_vector<int64_t>({5})).item<double>(), x.index({1, 1}).item<double>());
  expect_gradcheck("take_along_dim", [cols](V in) { return take_along_dim(in[0], cols, 1); }, {leaf({3, 4})});
  expect_error([&] { take_along_dim(x, Tensor::from_vector<int64_t>({1}), 1); }, {"take_along_dim", "as many dims"});
}

TEST(IndexMore, IndexFillAndIndexCopy) {
  const Tensor x = arange(0, 12, 1, kFloat64).reshape({3, 4});
  const Tensor cols = Tensor::from_vector<int64_t>({3, -4});  // negative: from the end, as PyTorch
  EXPECT_EQ(values(index_fill(x, 1, cols, -1.0)), (std::vector<double>{-1, 1, 2, -1, -1, 5, 6, -1, -1, 9, 10, -1}));
  const Tensor rows = Tensor::from_vector<int64_t>({2, 0});
  const Tensor source = Tensor::from_vector<double>({100, 101, 102, 103, 200, 201, 202, 203}, {2, 4});
  EXPECT_EQ(values(x.index_copy(0, rows, source)),
            (std::vector<double>{200, 201, 202, 203, 4, 5, 6, 7, 100, 101, 102, 103}));
  Tensor y = x.clone();
  y.index_fill_(0, Tensor::from_vector<int64_t>({1}), 0.0);
  EXPECT_EQ(values(y.index({1})), (std::vector<double>{0, 0, 0, 0}));
  y.index_copy_(1, Tensor::from_vector<int64_t>({0}), full({3, 1}, 9.0, kFloat64));
  EXPECT_EQ(values(y.index({indexing::Slice(), 0})), (std::vector<double>{9, 9, 9}));
  expect_gradcheck("index_fill with a tensor value",
                   [](V in) { return index_fill(in[0], 1, Tensor::from_vector<int64_t>({0, 2}), in[1]); },
                   {leaf({2, 3}), leaf({})});
  expect_gradcheck("index_copy", [rows](V in) { return index_copy(in[0], 0, rows, in[1]); },
                   {leaf({3, 2}), leaf({2, 2})});
  expect_error([&] { index_copy(x, 0, rows, zeros({2, 3}, kFloat64)); }, {"index_copy", "[2, 4]", "[2, 3]"});
  expect_error([&] { index_fill(x, 1, Tensor::from_vector<int64_t>({4}), 0.0); }, {"index_fill", "4"});
  expect_error([&] { index_fill(x, 1, cols, ones({2}, kFloat64)); }, {"index_fill", "0-d value"});
}

}  // namespace minidl::reduce_split_more_test
