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
}  // namespace

int64_t fan_in(const Tensor& weight) {
  MINIDL_CHECK(weight.dim() >= 2, "fan_in: expected a weight with at least 2 dimensions, got shape ", weight.shape());
  int64_t receptive = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.size(d);
  return weight.size(1) * receptive;
}

void kaiming_uniform_(Tensor& weight, double a) {
  double gain = std::sqrt(2.0 / (1 + a * a));
  double bound = gain * std::sqrt(3.0 / static_cast<double>(fan_in(weight)));
  uniform_(weight, -bound, bound);
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

}  // namespace minidl::nn::init
