// The CPU's float32 GEMM on oneDNN (ops/cpu/onednn_gemm.cpp, where minidl was built with it): the
// products it takes agree with a float64 product and give the same bits on 1 to 4 threads,
// including the shape whose bits oneDNN's own threading changes (64 x 784 by 784 x 512).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/threads.h"
#include "minidl.h"
#include "ops/backend_setting.h"

namespace minidl::gemm_onednn_test {

namespace {

struct Case {
  int64_t m, k, n;
  bool trans_a, trans_b;
};

const std::vector<Case> kCases = {{64, 784, 512, false, true},   // the MLP's first layer, batch 64
                                  {512, 784, 512, false, true},  // ... batch 512
                                  {784, 512, 512, true, false},  // its weight gradient
                                  {97, 301, 203, false, false},  // odd sizes
                                  {203, 97, 301, true, true}};

Tensor operand(int64_t rows, int64_t cols, bool trans) { return trans ? randn({cols, rows}) : randn({rows, cols}); }

Tensor product(const Tensor& a, const Tensor& b, const Case& c) {
  return matmul(c.trans_a ? a.transpose(0, 1) : a, c.trans_b ? b.transpose(0, 1) : b);
}

}  // namespace

TEST(GemmOnednn, MatchesFloat64AndTheSameBitsOnOneToFourThreads) {
  if (!onednn_available()) GTEST_SKIP() << "built without oneDNN (cmake/onednn.cmake): every GEMM is Eigen's";
  const int threads = get_num_threads();
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n));
    manual_seed(2);
    const Tensor a = operand(c.m, c.k, c.trans_a), b = operand(c.k, c.n, c.trans_b);
    set_num_threads(1);
    const std::vector<float> one = product(a, b, c).to_vector<float>();
    const std::vector<double> exact = product(a.to(kFloat64), b.to(kFloat64), c).to_vector<double>();
    for (size_t i = 0; i < one.size(); ++i)
      ASSERT_NEAR(one[i], exact[i], 1e-5 * static_cast<double>(c.k) * (1 + std::abs(exact[i]))) << "at " << i;
    for (int t = 2; t <= 4; ++t) {
      set_num_threads(t);
      EXPECT_EQ(product(a, b, c).to_vector<float>(), one) << t << " threads";
    }
  }
  set_num_threads(threads);
}

}  // namespace minidl::gemm_onednn_test
