// Inputs that once ended the process or came back as wrong data: integer division by zero and
// shapes whose sizes overflow. Each is now an error that says what was wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "minidl.h"
#include "test_util.h"

namespace minidl::input_errors_test {

using minidl::testing::expect_error;

TEST(InputErrors, IntegerDivisionByZeroIsAnError) {
  Tensor a = Tensor::from_vector(std::vector<int64_t>{6, 7, 8}, {3});
  Tensor b = Tensor::from_vector(std::vector<int64_t>{2, 0, 4}, {3});
  // Integral division that stays integral (// and %) refuses a zero divisor; / is true division.
  expect_error([&] { floor_divide(a, b); }, {"floor_divide", "integer division by zero", "[3]"});
  expect_error([&] { (void)(a % 0); }, {"remainder", "integer division by zero"});
  EXPECT_TRUE(std::isinf(div(a, b).to_vector<float>()[1]));
  // Nonzero divisors floor, as Python's // and PyTorch's floor_divide do.
  Tensor q = floor_divide(a, Tensor::from_vector(std::vector<int64_t>{4, -2, 3}, {3}));
  EXPECT_EQ(q.to_vector<int64_t>(), (std::vector<int64_t>{1, -4, 2}));
  // Floating division by zero is IEEE's business: inf, as in PyTorch.
  EXPECT_TRUE(std::isinf(div(ones({1}), zeros({1})).item<float>()));
}

TEST(InputErrors, ShapesTooLargeToCountAreErrors) {
  const int64_t big = int64_t{1} << 40;
  expect_error([&] { Tensor::empty({big, big}, kFloat32); }, {"more elements than an int64 can count"});
  expect_error([&] { zeros({big, big, 2}); }, {"more elements than an int64 can count"});
  // Element count fits, bytes do not.
  expect_error([&] { Tensor::empty({std::numeric_limits<int64_t>::max() / 4}, kFloat64); },
               {"needs more bytes than an int64 can count"});
  expect_error([&] { randn({4}).view({big, big}); }, {"more elements than an int64 can count"});
  // A zero dimension makes any shape empty, however large the others.
  EXPECT_EQ(Tensor::empty({0, big, big}, kFloat32).numel(), 0);
}

}  // namespace minidl::input_errors_test
