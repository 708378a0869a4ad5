// atleast_1d/2d/3d, hstack, vstack, row_stack, dstack, column_stack, rot90, flipud, fliplr, and the
// in-place tril_, triu_ and fill_diagonal_: shapes and values against NumPy's rules written out by
// hand, gradients, and bad input.
#include <gtest/gtest.h>

#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::stack_rotate_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

Tensor f64(std::vector<double> v, Shape s) { return Tensor::from_vector<double>(v, s); }
using V = const std::vector<Tensor>&;

}  // namespace

TEST(StackMore, AtLeastAndTheStacks) {
  const Tensor s = scalar_tensor(5.0, kFloat64), v = f64({1, 2, 3}, {3}), m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(atleast_1d(s).shape(), (Shape{1}));
  EXPECT_EQ(atleast_2d(v).shape(), (Shape{1, 3}));
  EXPECT_EQ(atleast_3d(v).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(atleast_3d(m).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(atleast_3d(s).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(values(hstack({v, v})), (std::vector<double>{1, 2, 3, 1, 2, 3}));  // 1-D: along dim 0
  EXPECT_EQ(hstack({m, m}).shape(), (Shape{2, 6}));
  EXPECT_EQ(values(vstack({v, v})), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(vstack({v, m}).shape(), (Shape{3, 3}));
  EXPECT_EQ(row_stack({v, v}).shape(), (Shape{2, 3}));
  EXPECT_EQ(dstack({v, v}).shape(), (Shape{1, 3, 2}));
  const Tensor cols = column_stack({v, f64({7, 8, 9}, {3}), f64({10, 11, 12}, {3, 1})});
  EXPECT_EQ(cols.shape(), (Shape{3, 3}));
  EXPECT_EQ(values(cols), (std::vector<double>{1, 7, 10, 2, 8, 11, 3, 9, 12}));
  expect_gradcheck("dstack", [](V in) { return dstack({in[0], in[1]}); }, {leaf({2, 3}), leaf({2, 3})});
  expect_error([] { vstack({}); }, {"vstack", "at least one tensor"});
}

TEST(StackMore, Rot90TurnsCounterclockwise) {
  const Tensor m = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(values(rot90(m)), (std::vector<double>{2, 4, 1, 3}));      // [[1, 2], [3, 4]] -> [[2, 4], [1, 3]]
  EXPECT_EQ(values(rot90(m, 2)), (std::vector<double>{4, 3, 2, 1}));
  EXPECT_EQ(values(rot90(m, -1)), (std::vector<double>{3, 1, 4, 2}));  // clockwise
  EXPECT_TRUE(rot90(m, 4).equal(m));
  EXPECT_TRUE(rot90(m, 1, {1, 0}).equal(rot90(m, -1)));
  const Tensor t = randn({2, 3, 4}, kFloat64);
  const Tensor r = t.rot90(1, {-2, -1});
  ASSERT_EQ(r.shape(), (Shape{2, 4, 3}));
  // out[b, i, j] = t[b, j, W - 1 - i]
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(r.index({1, i, j}).item<double>(), t.index({1, j, 3 - i}).item<double>());
  EXPECT_EQ(values(flipud(m)), (std::vector<double>{3, 4, 1, 2}));
  EXPECT_EQ(values(m.fliplr()), (std::vector<double>{2, 1, 4, 3}));
  expect_gradcheck("rot90", [](V in) { return rot90(in[0], 3); }, {leaf({3, 2})});
  expect_error([&] { rot90(m, 1, {0, 0}); }, {"rot90", "two different dims"});
  expect_error([] { fliplr(zeros({3})); }, {"fliplr", "at least 2 dims"});
}

TEST(StackMore, InPlaceTrianglesAndDiagonal) {
  Tensor m = ones({3, 4});
  m.tril_();
  EXPECT_TRUE(m.equal(tril(ones({3, 4}))));
  Tensor u = ones({3, 4});
  u.triu_(1);
  EXPECT_TRUE(u.equal(triu(ones({3, 4}), 1)));
  Tensor d = zeros({3, 4});
  d.fill_diagonal_(2.0);
  EXPECT_EQ(values(d), (std::vector<double>{2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0}));
  // Tall, with wrap: the diagonal starts again after a skipped row (NumPy's fill_diagonal).
  Tensor tall = zeros({7, 3});
  tall.fill_diagonal_(1.0, true);
  const std::vector<double> got = values(tall);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const bool on = (i * 3 + j) % 4 == 0;
      EXPECT_EQ(got[static_cast<size_t>(i * 3 + j)], on ? 1.0 : 0.0) << i << ", " << j;
    }
  Tensor tall_nowrap = zeros({7, 3});
  tall_nowrap.fill_diagonal_(1.0);
  EXPECT_EQ(tall_nowrap.sum().item<float>(), 3.0f);
  Tensor cube = zeros({2, 2, 2});
  cube.fill_diagonal_(5);
  EXPECT_EQ(values(cube), (std::vector<double>{5, 0, 0, 0, 0, 0, 0, 5}));
  // A transposed view is written through.
  Tensor base = zeros({3, 3});
  Tensor view = base.t();
  view.fill_diagonal_(1.0);
  EXPECT_TRUE(base.equal(eye(3)));
  expect_error([] { Tensor c = zeros({2, 3, 2}); c.fill_diagonal_(1); }, {"fill_diagonal_", "all dims of one length"});
}

}  // namespace minidl::stack_rotate_test
