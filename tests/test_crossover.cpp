// bench_ops crossover's verdict: the size from which the GPU wins for good.
#include <gtest/gtest.h>

#include <cmath>

#include "apps/common/crossover.h"

namespace minidl::crossover_test {

using crossover::crossover_size;

TEST(Crossover, TheSizeFromWhichTheGpuStaysFaster) {
  const std::vector<int64_t> sizes{1000, 10000, 100000, 1000000};
  EXPECT_EQ(crossover_size(sizes, {1, 2, 30, 400}, {5, 5, 5, 5}), 100000);
  EXPECT_EQ(crossover_size(sizes, {9, 9, 9, 9}, {1, 1, 1, 1}), 1000);  // always
  EXPECT_EQ(crossover_size(sizes, {1, 1, 1, 1}, {2, 2, 2, 2}), std::nullopt);  // never
  // Faster in the middle only, or not at the largest size: not a crossover there.
  EXPECT_EQ(crossover_size(sizes, {1, 9, 1, 9}, {5, 5, 5, 5}), 1000000);
  EXPECT_EQ(crossover_size(sizes, {1, 9, 9, 1}, {5, 5, 5, 5}), std::nullopt);
  EXPECT_EQ(crossover_size(sizes, {9, 9, 9, 9}, {5, 5, NAN, 5}), 1000000);  // a gap is not a win
  EXPECT_EQ(crossover_size({}, {}, {}), std::nullopt);
}

TEST(Crossover, MeasuresTheCpuAndRejectsBadSizes) {
  const crossover::Row r = crossover::measure("softmax", 2000, false, 5, 3);
  EXPECT_GT(r.cpu_ms, 0);
  EXPECT_TRUE(std::isnan(r.gpu_ms));
  EXPECT_THROW(crossover::measure("softmax", 1500, false, 5, 3), minidl::Error);
  EXPECT_THROW(crossover::measure("exp", 1000, false, 5, 3), minidl::Error);
}

}  // namespace minidl::crossover_test
