// Statistics of reduce.h built from other ops: var over all elements and with a correction, std,
// p-norms and logsumexp. Their gradients come from the ops they are made of, except the norms',
// which PyTorch defines at points where the composition has none (0 where the norm is 0).
#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "ops/autocast_policy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_dims.h"
#include "ops/view.h"

namespace minidl {

namespace {

using detail::reduced_shape;

// Sorted, wrapped dims; an empty list means every dim.
std::vector<int64_t> reduction_dims(const std::vector<int64_t>& dims, int64_t rank, const char* op) {
  return dims.empty() ? detail::all_dims(rank) : detail::normalize_dims(dims, rank, op);
}

int64_t count_over(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[static_cast<size_t>(d)];
  return n;
}

// -1, 0 or 1 in x's dtype: a constant of the backward formulas.
Tensor sign_of(const Tensor& x) { return sub(gt(x, 0).to(x.dtype()), lt(x, 0).to(x.dtype())); }

// The p-norm's gradient, as PyTorch defines it (norm_backward): g * x / n for p = 2, g * sign(x)
// for 1, 0 for 0, shared evenly among the elements with |x| == n for infinities, and
// g * sign(x) |x|^(p-1) / n^(p-1) otherwise; 0 wherever n is 0 (and at x == 0 for p < 1).
// Divisors are made safe before dividing, so that a second derivative sees no inf * 0 either.
Tensor norm_backward(const Tensor& g, const Tensor& x, const Tensor& n, double p, const std::vector<int64_t>& dims) {
  const Shape keep = reduced_shape(x.shape(), dims, true);
  Tensor gk = view(g, keep), nk = view(n, keep);
  if (p == 0) return zeros_like(x);
  if (p == 1) return mul(sign_of(x), gk);
  Tensor n_zero = eq(nk, 0);
  Tensor safe_n = where(n_zero, 1.0, nk);
  if (p == 2) return mul(x, where(n_zero, 0.0, div(gk, safe_n)));
  if (std::isinf(p)) {
    Tensor mask = eq(abs(x), nk).to(x.dtype());
    return mul(mul(sign_of(x), mask), div(gk, sum(mask, dims, true)));
  }
  Tensor a = abs(x);
  Tensor x_zero = eq(a, 0);
  Tensor scaled = mul(sign_of(x), pow(where(x_zero, 1.0, a), p - 1));
  if (p < 1) scaled = where(x_zero, 0.0, scaled);
  return mul(scaled, where(n_zero, 0.0, div(gk, pow(safe_n, p - 1))));
}

}  // namespace

Tensor var(const Tensor& x) { return var(x, std::vector<int64_t>{}, true, false); }

Tensor var(const Tensor& x, IntArrayRef dims, const std::optional<Scalar>& correction, bool keepdim) {
  autocast::ExcludeGuard one_op;  // one op for autocast, as PyTorch's: its sum must not widen it to float32
  MINIDL_CHECK(is_floating(x.dtype()), "var: expected a floating tensor, got ", x.dtype());
  if (is_reduced_floating(x.dtype())) return var(x.to(kFloat32), dims, correction, keepdim).to(x.dtype());
  const std::vector<int64_t> d = reduction_dims(dims, x.dim(), "var");
  const double c = correction ? correction->to_double() : 1.0;
  // As PyTorch: the divisor is clamped at 0, so too few elements give inf or NaN, not an error.
  const double divisor = std::max(0.0, static_cast<double>(count_over(x.shape(), d)) - c);
  Tensor centered = sub(x, mean(x, d, true));
  return div(sum(mul(centered, centered), d, keepdim), scalar_like(divisor, x));
}

// In float32 for a 16-bit x, so that the square root of the variance is rounded once too.
Tensor std(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  if (is_reduced_floating(x.dtype())) return std(x.to(kFloat32), dims, unbiased, keepdim).to(x.dtype());
  return sqrt(var(x, dims, unbiased, keepdim));
}

Tensor std(const Tensor& x) { return std(x, std::vector<int64_t>{}, true, false); }

Tensor std(const Tensor& x, IntArrayRef dims, const std::optional<Scalar>& correction, bool keepdim) {
  if (is_reduced_floating(x.dtype())) return std(x.to(kFloat32), dims, correction, keepdim).to(x.dtype());
  return sqrt(var(x, dims, correction, keepdim));
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return {var(x, dims, unbiased, keepdim), mean(x, dims, keepdim)};
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims,
                                    const std::optional<Scalar>& correction, bool keepdim) {
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::tuple<Tensor, Tensor> std_mean(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return {std(x, dims, unbiased, keepdim), mean(x, dims, keepdim)};
}

std::tuple<Tensor, Tensor> std_mean(const Tensor& x, IntArrayRef dims,
                                    const std::optional<Scalar>& correction, bool keepdim) {
  return {std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  MINIDL_CHECK(x.numel() > 0, "aminmax: expected a non-empty tensor, got shape ", x.shape());
  const std::vector<int64_t> dims = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
  // A 0-d x over dim 0 or -1, as PyTorch allows.
  if (x.dim() == 0) return {amin(x), amax(x)};
  return {amin(x, dims, keepdim), amax(x, dims, keepdim)};
}

Tensor norm(const Tensor& x, const Scalar& p) { return norm(x, p, {}, false); }

Tensor norm(const Tensor& x, const Scalar& p_in, IntArrayRef dims_in, bool keepdim) {
  MINIDL_AUTOCAST(norm, norm, x, p_in, dims_in, keepdim);
  MINIDL_CHECK(is_floating(x.dtype()), "norm: expected a floating tensor, got ", x.dtype(),
               " (convert it first, e.g. x.to(kFloat32))");
  if (is_reduced_floating(x.dtype())) return norm(x.to(kFloat32), p_in, dims_in, keepdim).to(x.dtype());
  const double p = p_in.to_double();
  MINIDL_CHECK(!std::isnan(p), "norm: the order p is NaN");
  const std::vector<int64_t> dims = reduction_dims(dims_in, x.dim(), "norm");
  Tensor out;
  {
    NoGradGuard no_grad;
    if (p == 2) {
      out = sqrt(sum(mul(x, x), dims, keepdim));
    } else if (p == 1) {
      out = sum(abs(x), dims, keepdim);
    } else if (p == 0) {
      out = sum(ne(x, 0).to(x.dtype()), dims, keepdim);
    } else if (std::isinf(p)) {
      MINIDL_CHECK(count_over(x.shape(), dims) > 0, "norm: the ", p, "-norm of an empty tensor (shape ", x.shape(),
                   ") is undefined: a maximum or minimum of nothing");
      out = p > 0 ? amax(abs(x), dims, keepdim) : amin(abs(x), dims, keepdim);
    } else {
      out = pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
    }
  }
  if (autograd::needs_recording({x})) {
    autograd::record("NormBackward1", out, {x}, {x, out},
                     [sx = x, so = out.detach(), p, dims](const Tensor& g, const std::vector<bool>&) {
                       return std::vector<Tensor>{norm_backward(g, sx, autograd::saved_output(so), p, dims)};
                     }, true);
  }
  return out;
}

Tensor linalg_vector_norm(const Tensor& x, const Scalar& ord, const std::optional<std::vector<int64_t>>& dim,
                          bool keepdim) {
  return norm(x, ord, dim ? *dim : std::vector<int64_t>{}, keepdim);
}

Tensor logsumexp(const Tensor& x_in, IntArrayRef dims_in, bool keepdim) {
  MINIDL_AUTOCAST(logsumexp, logsumexp, x_in, dims_in, keepdim);
  if (is_reduced_floating(x_in.dtype())) return logsumexp(x_in.to(kFloat32), dims_in, keepdim).to(x_in.dtype());
  Tensor x = is_floating(x_in.dtype()) ? x_in : x_in.to(kFloat32);
  const std::vector<int64_t> dims = reduction_dims(dims_in, x.dim(), "logsumexp");
  if (count_over(x.shape(), dims) == 0) return log(sum(exp(x), dims, keepdim));  // log 0 = -inf
  // The maximum is a constant of the formula (no gradient through it): log sum exp(x - m) + m is
  // logsumexp for any m, and m = max keeps every exp <= 1. An infinite m is replaced by 0, so that
  // all -inf gives -inf and +inf gives +inf rather than inf - inf.
  Tensor m;
  {
    NoGradGuard no_grad;
    m = amax(x, dims, true);
    m = where(eq(abs(m), INFINITY), 0.0, m);
  }
  Tensor s = log(sum(exp(sub(x, m)), dims, keepdim));
  return add(s, keepdim ? m : view(m, reduced_shape(x.shape(), dims, false)));
}

}  // namespace minidl
