// meshgrid, cartesian_prod, block_diag, kron and cdist: values against loops, float64 gradient
// checks, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::combine_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

using V = const std::vector<Tensor>&;

}  // namespace

TEST(Combine, MeshgridIjAndXy) {
  const Tensor a = Tensor::from_vector<double>({1, 2}), b = Tensor::from_vector<double>({10, 20, 30});
  const auto ij = meshgrid({a, b}, "ij");
  ASSERT_EQ(ij[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(values(ij[0]), (std::vector<double>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(values(ij[1]), (std::vector<double>{10, 20, 30, 10, 20, 30}));
  const auto xy = meshgrid({a, b}, "xy");
  ASSERT_EQ(xy[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values(xy[0]), (std::vector<double>{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(values(xy[1]), (std::vector<double>{10, 10, 20, 20, 30, 30}));
  const auto three = meshgrid({a, b, Tensor::from_vector<double>({5})}, "xy");
  EXPECT_EQ(three[2].shape(), (Shape{3, 2, 1}));
  expect_gradcheck("meshgrid", [](V in) { return meshgrid({in[0], in[1]}, "xy")[0] * meshgrid({in[0], in[1]})[1].t(); },
                   {leaf({3}), leaf({4})});
}

TEST(Combine, CartesianProductListsEveryPair) {
  const Tensor a = Tensor::from_vector<int64_t>({1, 2}), b = Tensor::from_vector<int64_t>({3, 4, 5});
  const Tensor p = cartesian_prod({a, b});
  ASSERT_EQ(p.shape(), (Shape{6, 2}));
  EXPECT_EQ(p.to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 1, 4, 1, 5, 2, 3, 2, 4, 2, 5}));
  EXPECT_TRUE(cartesian_prod({a}).equal(a));
}

TEST(Combine, BlockDiagPlacesEachBlock) {
  const Tensor a = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2});
  const Tensor b = Tensor::from_vector<double>({5, 6, 7});  // one row
  const Tensor c = scalar_tensor(8, kInt64);  // 0-d, promoted
  const Tensor m = block_diag({a, b, c});
  ASSERT_EQ(m.shape(), (Shape{4, 6}));
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_EQ(values(m), (std::vector<double>{1, 2, 0, 0, 0, 0,  //
                                          3, 4, 0, 0, 0, 0,  //
                                          0, 0, 5, 6, 7, 0,  //
                                          0, 0, 0, 0, 0, 8}));
  expect_gradcheck("block_diag", [](V in) { return block_diag({in[0], in[1]}); }, {leaf({2, 3}), leaf({3, 1})});
}

TEST(Combine, KronAgainstItsDefinition) {
  const Tensor a = randn({2, 3}, kFloat64), b = randn({4, 2}, kFloat64);
  const Tensor k = kron(a, b);
  ASSERT_EQ(k.shape(), (Shape{8, 6}));
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_DOUBLE_EQ(k.index({i, j}).item<double>(),
                       a.index({i / 4, j / 2}).item<double>() * b.index({i % 4, j % 2}).item<double>());
  // Fewer dims are padded in front: [3] with [2, 2] is [1, 3] with [2, 2].
  EXPECT_TRUE(kron(Tensor::from_vector<double>({1, 2, 3}), eye(2, kFloat64))
                  .equal(kron(Tensor::from_vector<double>({1, 2, 3}, {1, 3}), eye(2, kFloat64))));
  expect_gradcheck("kron", [](V in) { return kron(in[0], in[1]); }, {leaf({2, 3}), leaf({2, 1, 2})});
}

TEST(Combine, CdistBothWaysAgainstLoops) {
  const Tensor x1 = randn({2, 30, 4}, kFloat64), x2 = randn({1, 27, 4}, kFloat64);
  for (double p : std::vector<double>{0.0, 1.0, 2.0, 3.5, INFINITY}) {
    SCOPED_TRACE(p);
    for (const char* mode : {"use_mm_for_euclid_dist_if_necessary", "donot_use_mm_for_euclid_dist"}) {
      const Tensor d = cdist(x1, x2, p, mode);
      ASSERT_EQ(d.shape(), (Shape{2, 30, 27}));
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 30; i += 7)
          for (int64_t j = 0; j < 27; j += 5) {
            double want = 0;
            for (int64_t k = 0; k < 4; ++k) {
              const double diff = std::fabs(x1.index({b, i, k}).item<double>() - x2.index({0, j, k}).item<double>());
              if (p == 0) want += diff != 0;
              else if (std::isinf(p)) want = std::max(want, diff);
              else want += std::pow(diff, p);
            }
            if (p > 0 && !std::isinf(p)) want = std::pow(want, 1 / p);
            EXPECT_NEAR(d.index({b, i, j}).item<double>(), want, 1e-12) << mode << " " << b << " " << i << " " << j;
          }
    }
  }
  expect_gradcheck("cdist by differences", [](V in) { return cdist(in[0], in[1], 3.0); }, {leaf({3, 4}), leaf({2, 4})});
  expect_gradcheck("cdist by a product",
                   [](V in) { return cdist(in[0], in[1], 2.0, "use_mm_for_euclid_dist"); }, {leaf({3, 4}), leaf({2, 4})});
}

TEST(Combine, BadInputSaysWhatWasExpected) {
  expect_error([] { meshgrid({zeros({2, 2})}); }, {"meshgrid", "0-d or 1-D", "[2, 2]"});
  expect_error([] { meshgrid({zeros({2})}, "ji"); }, {"meshgrid", "\"ij\" or \"xy\"", "ji"});
  expect_error([] { meshgrid({zeros({2}), zeros({2}, kFloat64)}); }, {"meshgrid", "one dtype"});
  expect_error([] { block_diag({zeros({2, 2, 2})}); }, {"block_diag", "[2, 2, 2]"});
  expect_error([] { cdist(zeros({3, 4}), zeros({2, 5})); }, {"cdist", "one number of columns"});
  expect_error([] { cdist(zeros({3, 4}), zeros({2, 4}), -1.0); }, {"cdist", "p >= 0"});
  expect_error([] { cdist(zeros({3, 4}), zeros({2, 4}), 2.0, "fast"); }, {"cdist", "compute_mode", "fast"});
}

}  // namespace minidl::combine_test
