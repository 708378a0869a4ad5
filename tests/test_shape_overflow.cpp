// Shapes whose sizes multiply past int64: an error where the tensor would hold that many elements,
// and plain empty tensors where a zero dimension makes the count 0. Either way the arithmetic is
// overflow-checked, never wrapped (scripts/sanitize.sh runs this under UBSan, which would abort on
// a wrapped product).
#include <gtest/gtest.h>

#include "minidl.h"
#include "test_util.h"

namespace minidl::shape_overflow_test {

using namespace minidl::testing;

namespace {

const int64_t kBig = int64_t{1} << 40;

TEST(ShapeOverflow, AnInferredDimensionBesideTooManyElementsIsAnError) {
  expect_error([] { randn({4}).view({-1, kBig, kBig}); }, {"view", "more elements than an int64 can count"});
  expect_error([] { randn({4}).reshape({kBig, -1, kBig}); }, {"more elements than an int64 can count"});
  // A zero among them: no overflow, just a shape that does not fit 4 elements.
  expect_error([] { randn({4}).view({-1, 0, kBig, kBig}); }, {"invalid for input of shape [4]"});
}

TEST(ShapeOverflow, EmptyTensorsWithHugeDimensionsWork) {
  Tensor t = zeros({0, kBig, kBig});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.sum().item<float>(), 0.f);
  EXPECT_EQ(t.view({kBig, 0, kBig}).numel(), 0);
  EXPECT_EQ(t.transpose(0, 2).contiguous().shape(), (Shape{kBig, kBig, 0}));
  EXPECT_EQ((t + 1.0).numel(), 0);
  // Reductions and softmax over an empty input whose other dimensions multiply past int64.
  Tensor u = zeros({3, kBig, kBig, 0});
  EXPECT_EQ(sum(u, {0}).shape(), (Shape{kBig, kBig, 0}));
  EXPECT_EQ(mean(u, {1}, true).shape(), (Shape{3, 1, kBig, 0}));
  EXPECT_EQ(max(u, 1).values.shape(), (Shape{3, kBig, 0}));
  EXPECT_EQ(argmax(u, 2).shape(), (Shape{3, kBig, 0}));
  EXPECT_EQ(softmax(u, 1).shape(), u.shape());
  EXPECT_EQ(log_softmax(u, 0).shape(), u.shape());
}

TEST(ShapeOverflow, AReductionWhoseResultIsTooLargeIsAnError) {
  expect_error([] { sum(zeros({kBig, kBig, 0}), {2}); }, {"more elements than an int64 can count"});
  expect_error([] { max(zeros({0, kBig, kBig}), 0); }, {"more elements than an int64 can count"});
}

}  // namespace

}  // namespace minidl::shape_overflow_test
