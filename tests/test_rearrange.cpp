// repeat, flip, roll, tril, triu, one_hot, repeat_interleave: values worked out by hand (as
// PyTorch gives them), float64 gradchecks, and the errors.
#include <gtest/gtest.h>

#include "minidl.h"
#include "ops/rearrange.h"
#include "float64_util.h"
#include "test_util.h"

namespace minidl::rearrange_test {

using minidl::testing::expect_error;
using minidl::testing::f64;
using minidl::testing::values;
using minidl::testing::leaf;
using minidl::testing::expect_gradcheck;

namespace {

}  // namespace

TEST(Rearrange, RepeatTiles) {
  Tensor y = repeat(f64({1, 2}), {2, 2});
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2}));
  Tensor z = repeat(f64({1, 2, 3, 4}, {2, 2}), {1, 2, 1});  // a new leading dim
  EXPECT_EQ(z.shape(), (Shape{1, 4, 2}));
  EXPECT_EQ(values(z), (std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(repeat(f64({1, 2}), {0}).shape(), (Shape{0}));
  // Each element is used 6 times: its gradient is 6.
  Tensor x = ones({2, 3}, kFloat64).requires_grad_();
  sum(repeat(x, {2, 3})).backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(6, 6.0));
  expect_gradcheck("repeat", [](auto& in) { return repeat(in[0], {2, 1, 3}); }, {leaf({2, 3})});
}

TEST(Rearrange, Flip) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values(flip(x, {1})), (std::vector<double>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(values(flip(x, {0, -1})), (std::vector<double>{6, 5, 4, 3, 2, 1}));
  Tensor same = flip(x, {});
  EXPECT_FALSE(same.is_same(x));
  EXPECT_EQ(values(same), values(x));
  expect_gradcheck("flip", [](auto& in) { return flip(in[0], {0, 2}); }, {leaf({2, 3, 4})});
}

TEST(Rearrange, Roll) {
  Tensor v = f64({1, 2, 3, 4});
  EXPECT_EQ(values(roll(v, {1})), (std::vector<double>{4, 1, 2, 3}));
  EXPECT_EQ(values(roll(v, {-1})), (std::vector<double>{2, 3, 4, 1}));
  EXPECT_EQ(values(roll(v, {5})), (std::vector<double>{4, 1, 2, 3}));
  Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values(roll(m, {1})), (std::vector<double>{6, 1, 2, 3, 4, 5}));  // flattened
  EXPECT_EQ(roll(m, {1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(values(roll(m, {1}, {1})), (std::vector<double>{3, 1, 2, 6, 4, 5}));
  EXPECT_EQ(values(roll(m, {1, -1}, {0, 1})), (std::vector<double>{5, 6, 4, 2, 3, 1}));
  expect_gradcheck("roll", [](auto& in) { return roll(in[0], {2, -1}, {0, 1}); }, {leaf({3, 4})});
  expect_gradcheck("roll flat", [](auto& in) { return roll(in[0], {3}); }, {leaf({2, 3})});
}

TEST(Rearrange, TrilTriu) {
  Tensor m = f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_EQ(values(tril(m)), (std::vector<double>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(values(tril(m, -1)), (std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  EXPECT_EQ(values(triu(m)), (std::vector<double>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_EQ(values(triu(m, 1)), (std::vector<double>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  // Non-square and batched: the last two dims.
  Tensor r = tril(ones({2, 2, 3}, kInt64), 1);
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1}));
  expect_gradcheck("tril", [](auto& in) { return tril(in[0]); }, {leaf({2, 3, 3})});
  expect_gradcheck("triu", [](auto& in) { return triu(in[0], -1); }, {leaf({3, 4})});
}

TEST(Rearrange, OneHot) {
  Tensor h = one_hot(Tensor::from_vector<int64_t>({0, 2}), 3);
  EXPECT_EQ(h.dtype(), kInt64);
  EXPECT_EQ(h.shape(), (Shape{2, 3}));
  EXPECT_EQ(h.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 1}));
  Tensor inferred = one_hot(Tensor::from_vector<int64_t>({1, 3, 0, 1}, {2, 2}));
  EXPECT_EQ(inferred.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(sum(inferred).item<int64_t>(), 4);
  EXPECT_EQ(inferred.to_vector<int64_t>()[4 + 3], 1);
}

TEST(Rearrange, RepeatInterleave) {
  EXPECT_EQ(values(repeat_interleave(f64({1, 2}), 2)), (std::vector<double>{1, 1, 2, 2}));
  Tensor m = f64({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(values(repeat_interleave(m, 2, 1)), (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(repeat_interleave(m, 3).shape(), (Shape{12}));
  expect_gradcheck("repeat_interleave", [](auto& in) { return repeat_interleave(in[0], 3, 0); }, {leaf({2, 3})});
}

TEST(Rearrange, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { repeat(x, {2}); }, {"repeat", "at least 2 repeats", "[2, 3]"});
  expect_error([&] { repeat(x, {2, -1}); }, {"repeat", "non-negative"});
  expect_error([&] { flip(x, {0, -2}); }, {"flip", "more than once"});
  expect_error([&] { flip(x, {2}); }, {"flip"});
  expect_error([&] { roll(x, {1, 2}, {0}); }, {"roll", "2 shifts", "1 dims"});
  expect_error([&] { roll(x, {1, 2}); }, {"roll", "one shift"});
  expect_error([&] { tril(zeros({3})); }, {"tril", "at least 2", "[3]"});
  expect_error([&] { triu(zeros({3})); }, {"triu", "[3]"});
  expect_error([&] { one_hot(x); }, {"one_hot", "int64", "float32"});
  expect_error([&] { one_hot(Tensor::from_vector<int64_t>({0, 3}), 3); }, {"one_hot", "3", "num_classes 3"});
  expect_error([&] { one_hot(Tensor::from_vector<int64_t>({0, -1}), 3); }, {"one_hot", "non-negative", "-1"});
  expect_error([&] { one_hot(zeros({0}, kInt64)); }, {"one_hot", "empty"});
  expect_error([&] { repeat_interleave(x, -1); }, {"repeat_interleave", "non-negative"});
}

}  // namespace minidl::rearrange_test
