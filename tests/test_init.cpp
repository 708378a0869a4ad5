// nn::init against PyTorch's formulas: fans, gains, and the range or spread of every initializer
// on a weight large enough that the sample shows it.
#include <gtest/gtest.h>

#include <cmath>

#include "minidl.h"
#include "nn/nn.h"

namespace minidl::init_test {

namespace init = minidl::nn::init;

namespace {

struct Stats {
  double max_abs = 0, mean = 0, stddev = 0;
};

Stats stats(const Tensor& t) {
  std::vector<double> v = t.to(kFloat64).to_vector<double>();
  Stats s;
  for (double x : v) {
    s.max_abs = std::max(s.max_abs, std::abs(x));
    s.mean += x;
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(s.stddev / static_cast<double>(v.size()));
  return s;
}

}  // namespace

TEST(Init, FansAndGains) {
  Tensor conv = Tensor::empty({16, 8, 3, 5});
  EXPECT_EQ(init::fan_in(conv), 8 * 15);
  EXPECT_EQ(init::fan_out(conv), 16 * 15);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Tanh), 5.0 / 3);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Sigmoid), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyReLU, 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_THROW(init::fan_in(Tensor::empty({5})), Error);
}

TEST(Init, RangesAndSpreads) {
  manual_seed(7);
  Tensor w = Tensor::empty({256, 128, 3, 3});  // fan_in 1152, fan_out 2304
  const double fi = 1152, fo = 2304;

  init::kaiming_uniform_(w, 0, init::FanMode::FanOut, init::Nonlinearity::ReLU);
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / fo);
  Stats s = stats(w);
  EXPECT_LE(s.max_abs, bound * (1 + 1e-6));
  EXPECT_GT(s.max_abs, 0.99 * bound);

  init::kaiming_normal_(w, 0, init::FanMode::FanIn, init::Nonlinearity::ReLU);
  s = stats(w);
  EXPECT_NEAR(s.stddev, std::sqrt(2.0 / fi), 0.01 * std::sqrt(2.0 / fi));
  EXPECT_NEAR(s.mean, 0, 0.01 * s.stddev);

  init::xavier_uniform_(w, 2.0);
  bound = 2.0 * std::sqrt(6.0 / (fi + fo));
  s = stats(w);
  EXPECT_LE(s.max_abs, bound * (1 + 1e-6));
  EXPECT_GT(s.max_abs, 0.99 * bound);

  init::xavier_normal_(w);
  s = stats(w);
  EXPECT_NEAR(s.stddev, std::sqrt(2.0 / (fi + fo)), 0.01 * std::sqrt(2.0 / (fi + fo)));

  init::ones_(w);
  s = stats(w);
  EXPECT_EQ(s.mean, 1.0);
  EXPECT_EQ(s.stddev, 0.0);
}

}  // namespace minidl::init_test
