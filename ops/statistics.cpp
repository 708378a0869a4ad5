// cov follows PyTorch's composite (aten Correlation.cpp): weighted mean per variable, centred rows,
// one matrix product with the weighted centred rows, divided by the normalization factor. x is seen
// as [variables, observations]; a 1-D x as [1, observations] and the result squeezed. corrcoef
// divides cov by the standard deviations on both sides and clips to [-1, 1].
#include "ops/statistics.h"

#include "core/autograd.h"
#include "core/type_promotion.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/diagonal.h"
#include "ops/elementwise.h"
#include "ops/mm.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

// w's checks; its minimum is read on the host (a device sync), as PyTorch's.
void check_weights(const Tensor& w, const char* name, int64_t observations, const Tensor& x) {
  MINIDL_CHECK(w.dim() <= 1, "cov: expected ", name, " with at most 1 dimension, got shape ", w.shape());
  MINIDL_CHECK(w.numel() == observations, "cov: expected ", name, " with one entry per observation (", observations,
               "), got ", w.numel());
  MINIDL_CHECK(w.device() == x.device(), "cov: expected ", name, " on the input's device ", x.device(), ", got ",
               w.device());
  if (observations > 0) {
    NoGradGuard no_grad;
    const double least = min(w.detach()).to(kFloat64).item<double>();
    MINIDL_CHECK(least >= 0, "cov: expected non-negative ", name, ", got a minimum of ", least);
  }
}

}  // namespace

Tensor cov(const Tensor& x, int64_t correction, const std::optional<Tensor>& fweights,
           const std::optional<Tensor>& aweights) {
  MINIDL_CHECK(x.dim() <= 2, "cov: expected an input with at most 2 dimensions ([variables, observations]), got shape ",
               x.shape());
  MINIDL_CHECK(x.dtype() != kBool, "cov: expected a numeric input, got bool");
  if (is_reduced_floating(x.dtype())) {  // in float32, rounded once (ops/reduce.h's rule for 16-bit statistics)
    const bool weighted = aweights.has_value() && aweights->defined();
    const DType out = weighted ? result_type({x, *aweights}) : x.dtype();
    return cov(x.to(kFloat32), correction, fweights, aweights).to(out);
  }
  Tensor in = x.dim() < 2 ? reshape(x, {1, x.numel()}) : x;
  if (!in.is_floating_point()) in = in.to(kFloat32);  // as PyTorch's true division of the mean
  const int64_t observations = in.size(1);
  const bool has_f = fweights.has_value() && fweights->defined();
  const bool has_a = aweights.has_value() && aweights->defined();
  Tensor w;
  if (has_f) {
    MINIDL_CHECK(is_integral(fweights->dtype()), "cov: expected integral fweights, got ", fweights->dtype());
    check_weights(*fweights, "fweights", observations, x);
    w = *fweights;
  }
  if (has_a) {
    MINIDL_CHECK(aweights->is_floating_point(), "cov: expected floating-point aweights, got ", aweights->dtype());
    check_weights(*aweights, "aweights", observations, x);
    w = has_f ? w * *aweights : *aweights;
  }
  Tensor w_sum, factor;
  double factor_value;
  if (w.defined()) {
    w_sum = sum(w);
    {
      NoGradGuard no_grad;
      MINIDL_CHECK(w_sum.detach().to(kFloat64).item<double>() != 0, "cov: expected weights with a nonzero sum, got 0");
    }
    factor = has_a && correction != 0 ? w_sum - sum(w * *aweights) * static_cast<double>(correction) / w_sum
                                      : w_sum - correction;
    NoGradGuard no_grad;
    factor_value = factor.detach().to(kFloat64).item<double>();  // host read, as PyTorch's check
  } else {
    w_sum = scalar_tensor(observations, kInt64, in.device());
    factor = scalar_tensor(observations - correction, kInt64, in.device());
    factor_value = static_cast<double>(observations - correction);
  }
  // Degrees of freedom <= 0: PyTorch warns and divides by 0.
  if (factor_value <= 0) factor = zeros({}, factor.dtype(), factor.device());
  const Tensor avg = sum(w.defined() ? in * w : in, {1}) / w_sum;
  const Tensor centred = in - unsqueeze(avg, 1);
  const Tensor c = mm(centred, (w.defined() ? centred * w : centred).t());
  return squeeze(c / factor);
}

Tensor corrcoef(const Tensor& x) {
  MINIDL_CHECK(x.dim() <= 2,
               "corrcoef: expected an input with at most 2 dimensions ([variables, observations]), got shape ", x.shape());
  if (is_reduced_floating(x.dtype())) return corrcoef(x.to(kFloat32)).to(x.dtype());
  Tensor c = cov(x);
  if (c.dim() == 0) return c / c;  // one variable: 1, or NaN where its variance is 0, inf or NaN
  const Tensor stddev = sqrt(diagonal(c));
  c = c / reshape(stddev, {-1, 1});
  c = c / reshape(stddev, {1, -1});
  return clamp(c, -1, 1);
}

}  // namespace minidl
