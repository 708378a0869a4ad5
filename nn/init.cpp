#include "nn/init.h"

#include <cmath>

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
  uniform_(weight, -bound, bound);
}

void kaiming_normal_(Tensor& weight, double a, FanMode mode, Nonlinearity nonlinearity) {
  normal_(weight, 0, calculate_gain(nonlinearity, a) / std::sqrt(fan(weight, mode)));
}

void xavier_uniform_(Tensor& weight, double gain) {
  const double bound = gain * std::sqrt(6.0 / (fan(weight, FanMode::FanIn) + fan(weight, FanMode::FanOut)));
  uniform_(weight, -bound, bound);
}

void xavier_normal_(Tensor& weight, double gain) {
  normal_(weight, 0, gain * std::sqrt(2.0 / (fan(weight, FanMode::FanIn) + fan(weight, FanMode::FanOut))));
}

// Drawn on the CPU and copied: the same seed gives the same model on every device.
void uniform_(Tensor& t, double low, double high) { assign(t, uniform(t.shape(), low, high, t.dtype())); }

void normal_(Tensor& t, double mean, double stddev) {
  Tensor z = randn(t.shape(), t.dtype());
  NoGradGuard no_grad;
  assign(t, z * stddev + mean);
}

void constant_(Tensor& t, double value) { assign(t, full(t.shape(), value, t.dtype(), t.device())); }
void zeros_(Tensor& t) { constant_(t, 0); }
void ones_(Tensor& t) { constant_(t, 1); }

}  // namespace minidl::nn::init
