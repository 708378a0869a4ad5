// unfold as a view (windows, the gradient of overlaps), masked_scatter, dist, pdist and renorm
// against loops, and random_ and bernoulli_ with a probability tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::unfold_scatter_random_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

using V = const std::vector<Tensor>&;

}  // namespace

TEST(UnfoldMore, WindowsAreAViewAndOverlapsAddUp) {
  const Tensor x = arange(0, 14, 1, kFloat64).reshape({2, 7});
  const Tensor w = x.unfold(1, 3, 2);  // windows at 0, 2, 4: [2, 3, 3]
  ASSERT_EQ(w.shape(), (Shape{2, 3, 3}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 3; ++j)
        EXPECT_EQ(w.index({b, k, j}).item<double>(), x.index({b, 2 * k + j}).item<double>());
  // Along dim 0 the window dim goes last: [1, 7, 2].
  EXPECT_EQ(unfold(x, 0, 2, 1).shape(), (Shape{1, 7, 2}));
  // Elements 2 and 4 are in two windows, 6 in one: their gradients count that.
  Tensor leaf_x = x.clone().requires_grad_();
  leaf_x.unfold(1, 3, 2).sum().backward();
  EXPECT_EQ(values(leaf_x.grad().index({0})), (std::vector<double>{1, 1, 2, 1, 2, 1, 1}));
  expect_gradcheck("unfold", [](V in) { return unfold(in[0], -1, 4, 3) * 2.0; }, {leaf({3, 10})});
  expect_error([&] { unfold(x, 1, 8, 1); }, {"unfold", "0 <= size <= 7"});
  expect_error([&] { unfold(x, 1, 2, 0); }, {"unfold", "step > 0"});
}

TEST(UnfoldMore, MaskedScatterFillsInOrder) {
  const Tensor x = zeros({2, 3}, kFloat64);
  const Tensor mask = Tensor::from_vector<int64_t>({1, 0, 1, 0, 1, 1}, {2, 3}).to(kBool);
  const Tensor source = Tensor::from_vector<double>({10, 20, 30, 40, 50});
  EXPECT_EQ(values(masked_scatter(x, mask, source)), (std::vector<double>{10, 0, 20, 0, 30, 40}));
  // A broadcast mask: column 1 of both rows.
  const Tensor column = Tensor::from_vector<int64_t>({0, 1, 0}).to(kBool);
  EXPECT_EQ(values(x.masked_scatter(column, source)), (std::vector<double>{0, 10, 0, 0, 20, 0}));
  expect_gradcheck("masked_scatter", [mask](V in) { return masked_scatter(in[0], mask, in[1]); },
                   {leaf({2, 3}), leaf({5})});
  expect_error([&] { masked_scatter(x, mask, Tensor::from_vector<double>({1, 2})); },
               {"masked_scatter", "at least 4 elements", "got 2"});
  expect_error([&] { masked_scatter(x, ones({2, 3}), source); }, {"masked_scatter", "bool mask"});
}

TEST(DistanceMore, DistPdistRenorm) {
  const Tensor a = randn({3, 4}, kFloat64), b = randn({4}, kFloat64);
  double want = 0;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) want += std::pow(std::fabs(a.index({i, j}).item<double>() - b.index({j}).item<double>()), 3);
  EXPECT_NEAR(dist(a, b, 3).item<double>(), std::cbrt(want), 1e-12);
  EXPECT_NEAR(a.dist(b).item<double>(), norm(a - b).item<double>(), 1e-12);
  const Tensor x = randn({5, 3}, kFloat64);
  const Tensor d = pdist(x);
  ASSERT_EQ(d.shape(), (Shape{10}));
  int64_t k = 0;
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = i + 1; j < 5; ++j, ++k)
      EXPECT_NEAR(d.index({k}).item<double>(), norm(x.index({i}) - x.index({j})).item<double>(), 1e-12);
  expect_gradcheck("pdist", [](V in) { return pdist(in[0], 1.5); }, {leaf({4, 3})});
  // renorm: rows with norm above 1 scaled to 1 (less 1e-7 relative), the others untouched.
  const Tensor w = Tensor::from_vector<double>({3, 4, 0.3, 0.4}, {2, 2});
  const Tensor r = w.renorm(2, 0, 1.0);
  EXPECT_NEAR(r.index({0, 0}).item<double>(), 3 / (5 + 1e-7), 1e-15);
  EXPECT_EQ(r.index({1, 1}).item<double>(), 0.4);
  expect_gradcheck("renorm", [](V in) { return renorm(in[0] * 3.0, 2, 1, 1.0); }, {leaf({3, 4})});
  expect_error([] { pdist(zeros({3})); }, {"pdist", "2-D"});
  expect_error([] { renorm(zeros({3}), 0, 0, 1); }, {"renorm", "p > 0"});
}

TEST(RandomMore, RandomAndBernoulliWithProbabilities) {
  manual_seed(3);
  Tensor ids = zeros({2000}, kInt64);
  ids.random_(5, 9);
  const std::vector<int64_t> v = ids.to_vector<int64_t>();
  std::vector<int> seen(4);
  for (int64_t x : v) {
    ASSERT_TRUE(x >= 5 && x < 9) << x;
    ++seen[static_cast<size_t>(x - 5)];
  }
  for (int count : seen) EXPECT_NEAR(count, 500, 90);
  Tensor small = zeros({1000}, kFloat32);
  small.random_(3);
  EXPECT_EQ(amax(small).item<float>(), 2.0f);
  EXPECT_EQ(amin(small).item<float>(), 0.0f);
  Tensor bits = zeros({500}, kUInt8);
  bits.random_();
  EXPECT_GT(amax(bits.to(kInt64)).item<int64_t>(), 200);  // [0, 255]
  Tensor h = zeros({200}, kFloat16);
  h.random_();
  EXPECT_LE(amax(h.to(kFloat32)).item<float>(), 2048.0f);  // every integer up to 2^11 exact in float16
  // Per-element probabilities: column 0 never, column 1 always, column 2 half the time.
  Tensor mask = zeros({3000, 3});
  mask.bernoulli_(Tensor::from_vector<float>({0, 1, 0.5}));
  const Tensor means = mean(mask, {0});
  EXPECT_EQ(means.index({0}).item<float>(), 0.0f);
  EXPECT_EQ(means.index({1}).item<float>(), 1.0f);
  EXPECT_NEAR(means.index({2}).item<float>(), 0.5f, 0.04f);
  expect_error([&] { ids.random_(5, 5); }, {"random_", "from < to"});
  expect_error([&] { mask.bernoulli_(zeros({2})); }, {"bernoulli_", "broadcast to"});
}

}  // namespace minidl::unfold_scatter_random_test
