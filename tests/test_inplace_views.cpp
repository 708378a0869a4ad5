// In-place ops write through any view (strided destinations), broadcast their source, and bump
// the version counter that backward checks.
#include <gtest/gtest.h>

#include "minidl.h"
#include "test_util.h"

namespace minidl::inplace_views_test {

namespace {

using testing::expect_error;
using F = std::vector<float>;

// [[0, 1, 2], [3, 4, 5]]
Tensor m23() { return arange(6.0).view({2, 3}); }

TEST(InplaceViews, ArithmeticThroughTransposedAndSelectedViews) {
  Tensor x = m23();
  x.t().add_(1);
  EXPECT_EQ(x.to_vector<float>(), (F{1, 2, 3, 4, 5, 6}));
  x.select(1, 0).mul_(2);  // column 0
  EXPECT_EQ(x.to_vector<float>(), (F{2, 2, 3, 8, 5, 6}));
  x.t().sub_(tensor({1., 2., 3.}).unsqueeze(1));  // [3, 1] broadcast over x.t()'s [3, 2]
  EXPECT_EQ(x.to_vector<float>(), (F{1, 0, 0, 7, 3, 3}));
  x.select(0, 1).div_(tensor({7., 3., 3.}));
  EXPECT_EQ(x.to_vector<float>(), (F{1, 0, 0, 1, 1, 1}));
  x.t().add_(tensor({1., 1.}), /*alpha=*/3);  // [2] broadcast over [3, 2]
  EXPECT_EQ(x.to_vector<float>(), (F{4, 3, 3, 4, 4, 4}));
}

TEST(InplaceViews, FillZeroCopyThroughSteppedSlices) {
  Tensor x = zeros({5, 2});
  x.slice(0, 0, 4, 2).fill_(3);  // rows 0 and 2
  EXPECT_EQ(x.to_vector<float>(), (F{3, 3, 0, 0, 3, 3, 0, 0, 0, 0}));
  x.slice(1, 1, 2).zero_();
  EXPECT_EQ(x.to_vector<float>(), (F{3, 0, 0, 0, 3, 0, 0, 0, 0, 0}));
  x.select(1, 1).copy_(tensor({1., 2., 3., 4., 5.}));
  EXPECT_EQ(x.to_vector<float>(), (F{3, 1, 0, 2, 3, 3, 0, 4, 0, 5}));
  x.slice(0, 3).copy_(tensor({7., 8.}));  // broadcast [2] over rows 3 and 4
  EXPECT_EQ(x.to_vector<float>(), (F{3, 1, 0, 2, 3, 3, 7, 8, 7, 8}));
  expect_error([&] { x.t().copy_(zeros({3})); }, {"copy_", "[3]", "does not broadcast", "[2, 5]"});
  expect_error([&] { x.t().add_(zeros({3})); }, {"add_"});
}

TEST(InplaceViews, RandomFillsThroughViews) {
  Tensor x = zeros({100, 2});
  x.select(1, 1).uniform_(2, 3);
  Tensor col0 = x.select(1, 0), col1 = x.select(1, 1);
  EXPECT_EQ(col0.abs().sum().item<float>(), 0.0f);  // untouched
  EXPECT_GE(std::get<0>(col1.min(0)).item<float>(), 2.0f);
  EXPECT_LT(std::get<0>(col1.max(0)).item<float>(), 3.0f);
  x.select(1, 0).normal_(10, 0.01);
  EXPECT_NEAR(col0.mean().item<float>(), 10.0, 0.01);
  x.t()[1].bernoulli_(1.0);
  EXPECT_EQ(col1.sum().item<float>(), 100.0f);
}

TEST(InplaceViews, EveryInplaceOpBumpsTheVersion) {
  Tensor x = zeros({2, 3});
  Tensor v = x.t();
  uint64_t version = x._version();
  auto bumped = [&] { return x._version() > version ? (version = x._version(), true) : false; };
  v.add_(1);
  EXPECT_TRUE(bumped());
  v.sub_(1);
  EXPECT_TRUE(bumped());
  v.mul_(2);
  EXPECT_TRUE(bumped());
  v.div_(2);
  EXPECT_TRUE(bumped());
  v.fill_(1);
  EXPECT_TRUE(bumped());
  v.zero_();
  EXPECT_TRUE(bumped());
  v.copy_(ones({3, 2}));
  EXPECT_TRUE(bumped());
  v.uniform_();
  EXPECT_TRUE(bumped());
  v.normal_();
  EXPECT_TRUE(bumped());
  v.bernoulli_();
  EXPECT_TRUE(bumped());
}

TEST(InplaceViews, ASavedTensorChangedThroughAViewStopsBackward) {
  Tensor w = tensor({1., 2., 3.}).requires_grad_();
  Tensor base = tensor({{1., 1., 1.}, {2., 2., 2.}});
  Tensor y = (w * base).sum();  // mul saves base
  base.select(0, 1).mul_(2);    // changed through a view after the forward
  expect_error([&] { y.backward(); }, {"modified by an inplace operation"});
}

}  // namespace

}  // namespace minidl::inplace_views_test
