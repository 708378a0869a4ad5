#include "nn/init.h"

#include <Eigen/Core>
#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/autograd.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace minidl::nn::init {

namespace {
void assign(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  copy_(t, values);
}

int64_t receptive_field(const Tensor& weight, const char* what) {
  MINIDL_CHECK(weight.dim() >= 2, what, ": expected a weight with at least 2 dimensions, got shape ", weight.shape());
  int64_t receptive = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.size(d);
  return receptive;
}

double fan(const Tensor& weight, FanMode mode) {
  return static_cast<double>(mode == FanMode::FanIn ? fan_in(weight) : fan_out(weight));
}
}  // namespace

int64_t fan_in(const Tensor& weight) { return weight.size(1) * receptive_field(weight, "fan_in"); }
int64_t fan_out(const Tensor& weight) { return weight.size(0) * receptive_field(weight, "fan_out"); }

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Tanh: return 5.0 / 3;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1 + param * param));
    default: return 1;
  }
}

void kaiming_uniform_(Tensor& weight, double a, FanMode mode, Nonlinearity nonlinearity) {
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan(weight, mode));
  init::uniform_(weight, -bound, bound);
}

void kaiming_normal_(Tensor& weight, double a, FanMode mode, Nonlinearity nonlinearity) {
  init::normal_(weight, 0, calculate_gain(nonlinearity, a) / std::sqrt(fan(weight, mode)));
}

void xavier_uniform_(Tensor& weight, double gain) {
  const double bound = gain * std::sqrt(6.0 / (fan(weight, FanMode::FanIn) + fan(weight, FanMode::FanOut)));
  init::uniform_(weight, -bound, bound);
}

void xavier_normal_(Tensor& weight, double gain) {
  init::normal_(weight, 0, gain * std::sqrt(2.0 / (fan(weight, FanMode::FanIn) + fan(weight, FanMode::FanOut))));
}

// Drawn on the CPU and copied: the same seed gives the same model on every device.
void uniform_(Tensor& t, double low, double high) { assign(t, uniform(t.shape(), low, high, t.dtype())); }

void normal_(Tensor& t, double mean, double stddev) {
  Tensor z = randn(t.shape(), t.dtype());
  NoGradGuard no_grad;
  assign(t, z * stddev + mean);
}

namespace {
// The inverse of erf on (-1, 1) by Newton's method from a closed-form first guess; |error| < 1e-12
// after three steps, far below what a float32 weight keeps.
double erfinv(double y) {
  const double w = -std::log((1 - y) * (1 + y));  // Winitzki's approximation, a = 0.147
  const double t = 2 / (M_PI * 0.147) - w / 2;
  double x = std::copysign(std::sqrt(std::sqrt(t * t + w / 0.147) - t), y);
  for (int i = 0; i < 3; ++i) x -= (std::erf(x) - y) / (2 / std::sqrt(M_PI) * std::exp(-x * x));
  return x;
}
double normal_cdf(double x) { return (1 + std::erf(x / std::sqrt(2.0))) / 2; }
}  // namespace

void trunc_normal_(Tensor& t, double mean, double stddev, double a, double b) {
  MINIDL_CHECK(stddev > 0 && a < b, "trunc_normal_: expected std > 0 and a < b, got std ", stddev, ", [", a, ", ", b, "]");
  const double lo = 2 * normal_cdf((a - mean) / stddev) - 1, hi = 2 * normal_cdf((b - mean) / stddev) - 1;
  std::vector<double> u = uniform({t.numel()}, lo, hi, kFloat64).to_vector<double>();
  for (double& v : u) v = std::clamp(mean + stddev * std::sqrt(2.0) * erfinv(v), a, b);
  assign(t, Tensor::from_vector(u, t.shape()).to(t.dtype()));
}

// Eigen's Householder QR on the host: initialization runs once, on a matrix the size of a weight.
void orthogonal_(Tensor& t, double gain) {
  MINIDL_CHECK(t.dim() >= 2, "orthogonal_: expected a tensor with at least 2 dimensions, got shape ", t.shape());
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  const bool wide = rows < cols;
  const int64_t m = wide ? cols : rows, n = wide ? rows : cols;  // QR of a tall m x n matrix
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Tensor draw = randn({m, n}, kFloat64);
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(Eigen::Map<const RowMajor>(draw.data<double>(), m, n));
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(m, n);
  // Signs of R's diagonal on Q's columns make the distribution uniform (Haar), as PyTorch does.
  for (int64_t j = 0; j < n; ++j) q.col(j) *= qr.matrixQR()(j, j) < 0 ? -gain : gain;
  Tensor out = Tensor::empty({rows, cols}, kFloat64);
  Eigen::Map<RowMajor> values(out.data<double>(), rows, cols);
  if (wide) {
    values = q.transpose();
  } else {
    values = q;
  }
  assign(t, out.reshape(t.shape()).to(t.dtype()));
}

void constant_(Tensor& t, double value) { assign(t, full(t.shape(), value, t.dtype(), t.device())); }
void zeros_(Tensor& t) { constant_(t, 0); }
void ones_(Tensor& t) { constant_(t, 1); }

}  // namespace minidl::nn::init
