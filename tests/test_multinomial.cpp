// multinomial: draw frequencies against the probabilities by a chi-square bound (seeded, so the
// test cannot flake), draws without replacement distinct and in sequential-draw order, the same
// draws again under the same generator, and torch.multinomial's errors. The CUDA tests run the same
// checks on the GPU and skip without one.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::multinomial_test {

using minidl::testing::expect_error;

namespace {

// Pearson's chi-square of the counts of `draws` (values in [0, p.size())) against probabilities p
// (normalized here), over the categories of nonzero p; a zero-probability draw fails at once.
double chi_square(const std::vector<int64_t>& draws, const std::vector<double>& p) {
  double total = 0;
  for (double w : p) total += w;
  std::vector<double> count(p.size(), 0);
  for (int64_t d : draws) {
    EXPECT_TRUE(d >= 0 && d < static_cast<int64_t>(p.size()) && p[static_cast<size_t>(d)] > 0) << "drew " << d;
    if (d >= 0 && d < static_cast<int64_t>(p.size())) ++count[static_cast<size_t>(d)];
  }
  double chi2 = 0;
  for (size_t c = 0; c < p.size(); ++c) {
    if (p[c] == 0) continue;
    const double expected = static_cast<double>(draws.size()) * p[c] / total;
    chi2 += (count[c] - expected) * (count[c] - expected) / expected;
  }
  return chi2;
}

// Chi-square quantiles at p = 0.999 by degrees of freedom: a correct sampler exceeds them once in
// a thousand seeds; a wrong one (an off-by-one category, a dropped weight) by far.
constexpr double kChi2Bound3 = 16.27, kChi2Bound4 = 18.47;

// Checks every draw mode on `device`; shared by the CPU and CUDA tests.
void check_distributions(Device device) {
  // With replacement, unnormalized weights, a zero category, float32 and float64; [C] and [N, C].
  const std::vector<double> p = {0.2, 0.0, 0.4, 0.6, 0.8};
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor probs = Tensor::from_vector<double>(p, {5}).to(dtype).to(device);
    Tensor draws = multinomial(probs, 4000, true);
    EXPECT_EQ(draws.shape(), (Shape{4000}));
    EXPECT_EQ(draws.dtype(), kInt64);
    EXPECT_LT(chi_square(draws.to_vector<int64_t>(), p), kChi2Bound3);
  }
  const std::vector<double> q = {0.5, 0.1, 0.1, 0.2, 0.1};
  Tensor two = Tensor::from_vector<double>({0.2, 0.0, 0.4, 0.6, 0.8, 0.5, 0.1, 0.1, 0.2, 0.1}, {2, 5}).to(device);
  Tensor rows = multinomial(two, 3000, true);
  ASSERT_EQ(rows.shape(), (Shape{2, 3000}));
  EXPECT_LT(chi_square(rows.select(0, 0).to_vector<int64_t>(), p), kChi2Bound3);
  EXPECT_LT(chi_square(rows.select(0, 1).to_vector<int64_t>(), q), kChi2Bound4);

  // Without replacement: distinct draws per row, zero weights never drawn while others remain; the
  // first draw follows p and the second P(j) = sum_i p_i p_j / (1 - p_i), as drawing one by one.
  const std::vector<double> r = {0.1, 0.2, 0.3, 0.4};
  Tensor many = Tensor::from_vector<double>(r, {1, 4}).expand({2000, 4}).to(device);
  std::vector<int64_t> picks = multinomial(many, 3, false).to_vector<int64_t>();
  std::vector<int64_t> first, second;
  for (size_t i = 0; i < picks.size(); i += 3) {
    EXPECT_EQ(std::set<int64_t>(picks.begin() + i, picks.begin() + i + 3).size(), 3u) << "row " << i / 3;
    first.push_back(picks[i]);
    second.push_back(picks[i + 1]);
  }
  EXPECT_LT(chi_square(first, r), kChi2Bound3);
  std::vector<double> second_p(4, 0);
  for (size_t j = 0; j < 4; ++j)
    for (size_t i = 0; i < 4; ++i)
      if (i != j) second_p[j] += r[i] * r[j] / (1 - r[i]);
  EXPECT_LT(chi_square(second, second_p), kChi2Bound3);
  Tensor sparse = Tensor::from_vector<double>({0, 3, 0, 1e-30, 2, 0}, {6}).to(device);
  std::vector<int64_t> all = multinomial(sparse, 3).to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()), (std::set<int64_t>{1, 3, 4}));
}

void check_errors(Device device) {
  auto probs = [&](const std::vector<double>& v) { return Tensor::from_vector<double>(v, {1, 3}).to(device); };
  expect_error([&] { multinomial(probs({0.5, -0.1, 0.6}), 1); }, {"inf, nan or element < 0", "row 0"});
  expect_error([&] { multinomial(probs({0.5, INFINITY, 0.6}), 1, true); }, {"inf, nan or element < 0"});
  expect_error([&] { multinomial(probs({0.5, NAN, 0.6}), 1); }, {"inf, nan or element < 0"});
  expect_error([&] { multinomial(probs({0, 0, 0}), 1, true); }, {"sum of probabilities <= 0"});
  expect_error([&] { multinomial(probs({0, 1, 0}), 2); }, {"not enough nonzero categories", "2"});
  expect_error([&] { multinomial(probs({1, 1, 1}), 4); }, {"num_samples=4", "3 categories", "without replacement"});
  expect_error([&] { multinomial(probs({1, 1, 1}), 0, true); }, {"num_samples <= 0"});
  expect_error([&] { multinomial(zeros({2, 2, 2}, kFloat32, device), 1); }, {"1 or 2 dims", "[2, 2, 2]"});
  expect_error([&] { multinomial(ones({3}, kInt64, device), 1); }, {"floating", "int64"});
  expect_error([&] { multinomial(zeros({2, 0}, kFloat32, device), 1); }, {"at least one category"});
}

void check_generator_repeats(Device device) {
  Tensor p = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).to(device);
  auto draw = [&](uint64_t seed) {
    Generator gen(seed);
    GeneratorGuard guard(gen);
    return cat({multinomial(p, 8, true), multinomial(p, 3)}, 1).to_vector<int64_t>();
  };
  EXPECT_EQ(draw(11), draw(11));
  EXPECT_NE(draw(11), draw(12));
  EXPECT_EQ(p.multinomial(2).shape(), (Shape{2, 2}));  // the Tensor method
}

}  // namespace

TEST(Multinomial, DrawsFollowTheProbabilities) {
  manual_seed(3310);
  check_distributions(Device::cpu());
}

TEST(Multinomial, SameGeneratorSameDraws) { check_generator_repeats(Device::cpu()); }

TEST(Multinomial, Errors) { check_errors(Device::cpu()); }

TEST(Multinomial, EdgeShapes) {
  manual_seed(3311);
  EXPECT_EQ(multinomial(ones({1}), 5, true).to_vector<int64_t>(), (std::vector<int64_t>(5, 0)));
  EXPECT_EQ(multinomial(ones({1}), 1).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(multinomial(ones({0, 4}), 2).shape(), (Shape{0, 2}));
  // A one-hot row always gives its category; a bfloat16 softmax samples too.
  EXPECT_EQ(multinomial(Tensor::from_vector<float>({0, 0, 1}, {3}), 4, true).to_vector<int64_t>(),
            (std::vector<int64_t>(4, 2)));
  EXPECT_EQ(multinomial(softmax(randn({2, 65}).to(kBFloat16), -1), 1).shape(), (Shape{2, 1}));
}

TEST(CudaMultinomial, DrawsFollowTheProbabilities) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(3312);
  check_distributions(minidl::testing::gpu());
}

TEST(CudaMultinomial, SameGeneratorSameDrawsAndErrors) {
  MINIDL_REQUIRE_CUDA();
  check_generator_repeats(minidl::testing::gpu());
  check_errors(minidl::testing::gpu());
}

}  // namespace minidl::multinomial_test
