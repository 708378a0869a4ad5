// tensordot, multi_dot, chain_matmul and matrix_power against sums written out in loops, gradients
// in float64, and bad input.
#include <gtest/gtest.h>

#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::products_more_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;

namespace {

using V = const std::vector<Tensor>&;

}  // namespace

TEST(ProductsMore, TensordotSumsThePairedDims) {
  const Tensor a = randn({3, 4, 5}, kFloat64), b = randn({5, 2, 4}, kFloat64);
  // Sum over a's dims 1 and 2 with b's dims 2 and 0: out[i, j] = sum_k sum_l a[i, k, l] b[l, j, k].
  const Tensor out = tensordot(a, b, {1, 2}, {2, 0});
  ASSERT_EQ(out.shape(), (Shape{3, 2}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      double want = 0;
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t l = 0; l < 5; ++l) want += a.index({i, k, l}).item<double>() * b.index({l, j, k}).item<double>();
      EXPECT_NEAR(out.index({i, j}).item<double>(), want, 1e-12) << i << ", " << j;
    }
  // dims = 1: matmul's contraction; dims = 0: the outer product.
  const Tensor m = randn({3, 4}, kFloat64), n = randn({4, 2}, kFloat64);
  EXPECT_TRUE(allclose(tensordot(m, n, 1), matmul(m, n), 1e-12, 1e-12));
  EXPECT_EQ(tensordot(m, n, 0).shape(), (Shape{3, 4, 4, 2}));
  expect_gradcheck("tensordot", [](V in) { return tensordot(in[0], in[1], {0}, {1}); }, {leaf({3, 2}), leaf({4, 3})});
  expect_error([&] { tensordot(a, b, {1}, {1}); }, {"tensordot", "of one size"});
  expect_error([&] { tensordot(m, n, 3); }, {"tensordot", "0 <= dims <= 2"});
}

TEST(ProductsMore, MultiDotAnyOrderSameProduct) {
  const Tensor a = randn({10, 100}, kFloat64), b = randn({100, 5}, kFloat64), c = randn({5, 50}, kFloat64);
  EXPECT_TRUE(allclose(multi_dot({a, b, c}), matmul(matmul(a, b), c), 1e-10, 1e-10));
  EXPECT_TRUE(allclose(chain_matmul({a, b, c}), matmul(a, matmul(b, c)), 1e-10, 1e-10));
  // A 1-D first (a row) and last (a column): a 0-d result.
  const Tensor u = randn({10}, kFloat64), w = randn({50}, kFloat64);
  const Tensor s = multi_dot({u, a, b, c, w});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_NEAR(s.item<double>(), dot(u, mv(matmul(matmul(a, b), c), w)).item<double>(), 1e-9);
  expect_gradcheck("multi_dot", [](V in) { return multi_dot({in[0], in[1], in[2]}); },
                   {leaf({3}), leaf({3, 4}), leaf({4, 2})});
  expect_error([&] { multi_dot({a}); }, {"multi_dot", "at least 2"});
  expect_error([&] { multi_dot({a, c}); }, {"multi_dot", "cannot be multiplied"});
  expect_error([&] { multi_dot({a, u, b}); }, {"multi_dot", "a 2-D tensor at index 1"});
}

TEST(ProductsMore, MatrixPowerBySquaring) {
  const Tensor x = randn({2, 3, 3}, kFloat64) * 0.5;
  Tensor want = eye(3, kFloat64).expand({2, 3, 3});
  for (int n = 0; n <= 6; ++n) {
    EXPECT_TRUE(allclose(matrix_power(x, n), want, 1e-12, 1e-12)) << n;
    want = matmul(want, x);
  }
  EXPECT_EQ(x.matrix_power(0).shape(), (Shape{2, 3, 3}));
  expect_gradcheck("matrix_power", [](V in) { return matrix_power(in[0], 5); }, {leaf({3, 3})});
  expect_error([&] { matrix_power(x, -1); }, {"matrix_power", "negative power"});
  expect_error([] { matrix_power(zeros({2, 3}), 2); }, {"matrix_power", "square"});
}

}  // namespace minidl::products_more_test
