// Logical ops on every dtype, the mask operators &, |, ^, ~ on bool tensors, bitwise ops on
// integers (PyTorch's results), broadcasting, and the errors for floating operands.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "minidl.h"
#include "test_util.h"

namespace minidl::logical_ops_test {

using minidl::testing::expect_error;

namespace {

Tensor mask(const std::vector<int64_t>& v) { return Tensor::from_vector<int64_t>(v).to(kBool); }
std::vector<int64_t> ints(const Tensor& t) { return t.to(kInt64).to_vector<int64_t>(); }
using V = std::vector<int64_t>;

}  // namespace

TEST(LogicalOps, TruthTables) {
  Tensor a = mask({1, 1, 0, 0}), b = mask({1, 0, 1, 0});
  EXPECT_EQ(ints(logical_and(a, b)), (V{1, 0, 0, 0}));
  EXPECT_EQ(ints(logical_or(a, b)), (V{1, 1, 1, 0}));
  EXPECT_EQ(ints(logical_xor(a, b)), (V{0, 1, 1, 0}));
  EXPECT_EQ(ints(logical_not(a)), (V{0, 0, 1, 1}));
  EXPECT_EQ(logical_and(a, b).dtype(), kBool);
}

TEST(LogicalOps, AnyDtypeGivesBool) {
  // 0 is false, anything else (NaN too) is true, as torch.logical_and.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor f = Tensor::from_vector<float>({0.0f, -0.0f, 2.5f, nan});
  Tensor i = Tensor::from_vector<int64_t>({3, 0, 0, -1});
  EXPECT_EQ(logical_not(f).dtype(), kBool);
  EXPECT_EQ(ints(logical_not(f)), (V{1, 1, 0, 0}));
  EXPECT_EQ(ints(logical_and(f, i)), (V{0, 0, 0, 1}));
  EXPECT_EQ(ints(logical_or(f, i)), (V{1, 0, 1, 1}));
  EXPECT_EQ(ints(logical_xor(f, i)), (V{1, 0, 1, 0}));
  // Broadcast: [2, 1] against [3].
  Tensor col = Tensor::from_vector<int64_t>({0, 5}).reshape({2, 1});
  Tensor row = Tensor::from_vector<double>({1, 0, 2});
  Tensor r = logical_or(col, row);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(ints(r), (V{1, 0, 1, 1, 1, 1}));
}

TEST(LogicalOps, MaskOperators) {
  Tensor x = Tensor::from_vector<double>({-1, 2, 3, std::nan("")});
  Tensor keep = (x > 0) & ~isnan(x);
  EXPECT_EQ(keep.dtype(), kBool);
  EXPECT_EQ(ints(keep), (V{0, 1, 1, 0}));
  EXPECT_EQ(ints((x < 0) | (x > 2)), (V{1, 0, 1, 0}));
  EXPECT_EQ(ints((x > 0) ^ (x > 2)), (V{0, 1, 0, 0}));
  EXPECT_EQ(ints(mask({1, 0}) & true), (V{1, 0}));
  EXPECT_EQ((mask({1, 0}) & true).dtype(), kBool);
}

TEST(LogicalOps, BitwiseOnIntegers) {
  // torch.tensor([12, -12]) & 10 == [8, 0]; | 10 == [14, -2]; ^ 10 == [6, -2]; ~ == [-13, 11]
  Tensor a = Tensor::from_vector<int64_t>({12, -12});
  Tensor ten = Tensor::from_vector<int64_t>({10, 10});
  EXPECT_EQ((a & ten).to_vector<int64_t>(), (V{8, 0}));
  EXPECT_EQ((a | ten).to_vector<int64_t>(), (V{14, -2}));
  EXPECT_EQ((a ^ ten).to_vector<int64_t>(), (V{6, -2}));
  EXPECT_EQ((~a).to_vector<int64_t>(), (V{-13, 11}));
  EXPECT_EQ((a & 10).to_vector<int64_t>(), (V{8, 0}));
  EXPECT_EQ((10 | a).to_vector<int64_t>(), (V{14, -2}));
  EXPECT_EQ(bitwise_xor(a, 10).dtype(), kInt64);
  // A bool mask and an integer meet in int64, as PyTorch promotes them.
  Tensor m = bitwise_and(mask({1, 1}), Tensor::from_vector<int64_t>({3, 2}));
  EXPECT_EQ(m.dtype(), kInt64);
  EXPECT_EQ(m.to_vector<int64_t>(), (V{1, 0}));
  // Strided operands: a transposed view.
  Tensor t = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}).reshape({2, 3}).transpose(0, 1);
  EXPECT_EQ((t & 1).contiguous().to_vector<int64_t>(), (V{1, 0, 0, 1, 1, 0}));
}

TEST(LogicalOps, FloatingOperandsAreErrors) {
  Tensor f = zeros({2}), i = Tensor::from_vector<int64_t>({1, 2});
  expect_error([&] { f & i; }, {"bitwise_and", "float32", "integral or bool"});
  expect_error([&] { f | f; }, {"bitwise_or", "float32"});
  expect_error([&] { i ^ f; }, {"bitwise_xor", "float32"});
  expect_error([&] { ~f; }, {"bitwise_not", "float32"});
  expect_error([&] { i & 1.5; }, {"integral or bool scalar"});
  expect_error([&] { logical_and(zeros({2}), zeros({3})); }, {"[2]", "[3]"});
  expect_error([&] { logical_not(Tensor()); }, {"logical_not", "defined"});
}

}  // namespace minidl::logical_ops_test
