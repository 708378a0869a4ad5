// cov and corrcoef: hand-worked cases, a loop of the weighted formula in doubles, float64 gradient
// checks and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::cov_corrcoef_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::f64;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

using V = const std::vector<Tensor>&;

// numpy.cov's formula over the rows of x [vars, obs] with frequency and observation weights.
std::vector<double> ref_cov(const std::vector<double>& x, int64_t vars, int64_t obs, int64_t correction,
                            const std::vector<double>& f, const std::vector<double>& a) {
  std::vector<double> w(obs, 1.0);
  for (int64_t k = 0; k < obs; ++k) w[k] = (f.empty() ? 1 : f[k]) * (a.empty() ? 1 : a[k]);
  double w_sum = 0, wa_sum = 0;
  for (int64_t k = 0; k < obs; ++k) {
    w_sum += w[k];
    wa_sum += w[k] * (a.empty() ? 1 : a[k]);
  }
  const double factor = a.empty() ? w_sum - correction : w_sum - correction * wa_sum / w_sum;
  std::vector<double> mean(vars, 0), out;
  for (int64_t i = 0; i < vars; ++i) {
    for (int64_t k = 0; k < obs; ++k) mean[i] += w[k] * x[i * obs + k];
    mean[i] /= w_sum;
  }
  for (int64_t i = 0; i < vars; ++i)
    for (int64_t j = 0; j < vars; ++j) {
      double s = 0;
      for (int64_t k = 0; k < obs; ++k) s += w[k] * (x[i * obs + k] - mean[i]) * (x[j * obs + k] - mean[j]);
      out.push_back(s / factor);
    }
  return out;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

}  // namespace

TEST(Statistics, CovHandWorked) {
  // 1 2 3 4: mean 2.5, squared deviations 2.25 0.25 0.25 2.25, sum 5.
  const Tensor x = f64({1, 2, 3, 4});
  EXPECT_EQ(cov(x).dim(), 0);
  EXPECT_DOUBLE_EQ(cov(x).item<double>(), 5.0 / 3);
  EXPECT_DOUBLE_EQ(cov(x, 0).item<double>(), 5.0 / 4);
  // Rows 1 2 3 and 3 2 1: variances 1, covariance -1.
  EXPECT_EQ(values(cov(f64({1, 2, 3, 3, 2, 1}, {2, 3}))), (std::vector<double>{1, -1, -1, 1}));
  // fweights 1 2 1 on 0 1 2: the observations 0 1 1 2 (mean 1, squared deviations sum 2).
  EXPECT_DOUBLE_EQ(cov(f64({0, 1, 2}), 1, Tensor::from_vector<int64_t>({1, 2, 1})).item<double>(), 2.0 / 3);
  // Integral input computes in float32.
  const Tensor ints = cov(Tensor::from_vector<int64_t>({1, 2, 3, 4}));
  EXPECT_EQ(ints.dtype(), kFloat32);
  EXPECT_NEAR(ints.item<float>(), 5.0 / 3, 1e-6);
  // No degrees of freedom: divided by 0, as PyTorch's.
  EXPECT_TRUE(std::isnan(cov(f64({2.0})).item<double>()));
}

TEST(Statistics, CovMatchesTheWeightedFormula) {
  const int64_t vars = 3, obs = 7;
  const Tensor x = randn({vars, obs}, kFloat64);
  const std::vector<double> xs = values(x);
  const std::vector<double> f = {1, 0, 2, 3, 1, 1, 2}, a = {0.5, 1.5, 0.2, 1, 2, 0.7, 0.1};
  const Tensor ft = Tensor::from_vector<int64_t>({1, 0, 2, 3, 1, 1, 2}), at = f64(a);
  for (int64_t correction : {0, 1, 2}) {
    SCOPED_TRACE(correction);
    expect_near_all(values(cov(x, correction)), ref_cov(xs, vars, obs, correction, {}, {}));
    expect_near_all(values(cov(x, correction, ft)), ref_cov(xs, vars, obs, correction, f, {}));
    expect_near_all(values(cov(x, correction, {}, at)), ref_cov(xs, vars, obs, correction, {}, a));
    expect_near_all(values(cov(x, correction, ft, at)), ref_cov(xs, vars, obs, correction, f, a));
  }
  EXPECT_EQ(cov(x).shape(), (Shape{3, 3}));
  EXPECT_EQ(cov(randn({1, 5}, kFloat64)).dim(), 0);  // squeezed, as PyTorch's
}

TEST(Statistics, CorrcoefMatchesALoop) {
  EXPECT_EQ(values(corrcoef(f64({1, 2, 3, 3, 2, 1}, {2, 3}))), (std::vector<double>{1, -1, -1, 1}));
  EXPECT_DOUBLE_EQ(corrcoef(f64({1, 5, 2})).item<double>(), 1);
  EXPECT_TRUE(std::isnan(corrcoef(f64({2, 2, 2})).item<double>()));  // zero variance: 0 / 0
  const Tensor x = randn({4, 9}, kFloat64);
  const std::vector<double> c = ref_cov(values(x), 4, 9, 1, {}, {});
  std::vector<double> want;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) want.push_back(c[i * 4 + j] / std::sqrt(c[i * 4 + i] * c[j * 4 + j]));
  expect_near_all(values(corrcoef(x)), want);
  const Tensor r = corrcoef(x);
  EXPECT_LE(values(amax(r))[0], 1.0);
  EXPECT_GE(values(amin(r))[0], -1.0);
}

TEST(Statistics, Gradients) {
  expect_gradcheck("cov", [](V in) { return cov(in[0]); }, {leaf({3, 6})});
  expect_gradcheck("cov 1-D", [](V in) { return cov(in[0], 0); }, {leaf({5})});
  expect_gradcheck("cov aweights",
                   [](V in) { return cov(in[0], 1, Tensor::from_vector<int64_t>({1, 2, 1, 3, 1}), exp(in[1])); },
                   {leaf({2, 5}), leaf({5})});
  expect_gradcheck("corrcoef", [](V in) { return corrcoef(in[0]); }, {leaf({3, 7})});
}

TEST(Statistics, Errors) {
  const Tensor x = randn({2, 4}, kFloat64);
  expect_error([&] { cov(randn({2, 2, 2}, kFloat64)); }, {"cov", "at most 2", "[2, 2, 2]"});
  expect_error([&] { cov(Tensor::from_vector<bool>({true, false})); }, {"cov", "bool"});
  expect_error([&] { cov(x, 1, f64({1, 1, 1, 1})); }, {"cov", "integral fweights", "float64"});
  expect_error([&] { cov(x, 1, {}, Tensor::from_vector<int64_t>({1, 1, 1, 1})); }, {"cov", "aweights", "int64"});
  expect_error([&] { cov(x, 1, Tensor::from_vector<int64_t>({1, 1, 1})); }, {"cov", "fweights", "(4)", "3"});
  expect_error([&] { cov(x, 1, {}, f64({1, 1}, {1, 2})); }, {"cov", "aweights", "[1, 2]"});
  expect_error([&] { cov(x, 1, Tensor::from_vector<int64_t>({1, -1, 1, 1})); }, {"cov", "non-negative fweights", "-1"});
  expect_error([&] { cov(x, 1, {}, f64({0, 0, 0, 0})); }, {"cov", "nonzero sum"});
  expect_error([&] { corrcoef(randn({2, 2, 2}, kFloat64)); }, {"corrcoef", "at most 2", "[2, 2, 2]"});
}

}  // namespace minidl::cov_corrcoef_test
