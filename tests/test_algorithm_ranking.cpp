// The rules by which the convolution autotune ranks cuDNN's algorithms over several Find queries
// (ops/cuda/algorithm_ranking.h): by median, within the workspace budget where any fits.
#include <gtest/gtest.h>

#include <cstdint>

#include "ops/cuda/algorithm_ranking.h"

namespace minidl::algorithm_ranking_test {

namespace {

struct Perf {  // the fields of a cuDNN perf record that the ranking reads
  int algo = 0;
  float time = 0;
  size_t memory = 0;
};

constexpr size_t kNoLimit = SIZE_MAX;
using Ranking = minidl::cuda::AlgorithmRanking<Perf, 8>;

TEST(AlgorithmRanking, OneSlowQueryDoesNotDecide) {
  Ranking r;
  // Algorithm 5 is faster in four of five queries; one noisy query ranks algorithm 0 first.
  for (float t : {0.071f, 0.072f, 0.150f, 0.070f, 0.073f}) r.add({5, t, 100});
  for (float t : {0.089f, 0.090f, 0.060f, 0.091f, 0.093f}) r.add({0, t, 0});
  const Perf* best = r.fastest(kNoLimit);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->algo, 5);
  EXPECT_FLOAT_EQ(best->time, 0.072f);  // the median, not the last or the least
}

TEST(AlgorithmRanking, TheBudgetComesBeforeSpeed) {
  Ranking r;
  r.add({5, 0.07f, 1000});
  r.add({0, 0.09f, 0});
  EXPECT_EQ(r.fastest(500)->algo, 0);
  EXPECT_EQ(r.fastest(kNoLimit)->algo, 5);
  Ranking over;  // nothing fits: the fastest of any workspace
  over.add({5, 0.07f, 1000});
  over.add({4, 0.08f, 900});
  EXPECT_EQ(over.fastest(500)->algo, 5);
}

TEST(AlgorithmRanking, NearFastestKeepsTheCloseOnesFastestFirst) {
  Ranking r;
  r.add({7, 0.081f, 10});
  r.add({5, 0.070f, 10});
  r.add({0, 0.090f, 0});
  r.add({1, 0.106f, 0});  // more than 1.5x the fastest
  r.add({4, 0.075f, 600});  // over the budget
  const auto near = r.near_fastest(500, 1.5f);
  ASSERT_EQ(near.size(), 3u);
  EXPECT_EQ(near[0]->algo, 5);
  EXPECT_EQ(near[1]->algo, 7);
  EXPECT_EQ(near[2]->algo, 0);
}

TEST(AlgorithmRanking, NearFastestOverTheBudgetIsTheFastestAlone) {
  Ranking r;
  r.add({5, 0.07f, 1000});
  r.add({4, 0.08f, 900});
  const auto near = r.near_fastest(500, 1.5f);
  ASSERT_EQ(near.size(), 1u);
  EXPECT_EQ(near[0]->algo, 5);
  EXPECT_TRUE(Ranking().near_fastest(kNoLimit, 1.5f).empty());
  EXPECT_EQ(Ranking().fastest(kNoLimit), nullptr);
}

}  // namespace

}  // namespace minidl::algorithm_ranking_test
