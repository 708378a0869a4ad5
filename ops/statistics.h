#pragma once
// Covariance and correlation matrices, as torch.cov and torch.corrcoef: composed of sums, a matrix
// product and elementwise ops, so differentiable (in x and in aweights) wherever those run.
#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// The covariance matrix of the variables in the rows of x ([variables, observations]; a 1-D x is
/// one variable, giving a 0-d result, as PyTorch squeezes): sum_i w_i (x_i - mean)(x_i - mean)^T
/// divided by sum(w) - correction (1: Bessel's, 0: the plain mean), with w = fweights * aweights:
/// fweights integral observation counts, aweights floating observation weights, both 1-D of the
/// observations' length and non-negative. With aweights the divisor is sum(w) - correction *
/// sum(w * aweights) / sum(w). A divisor <= 0 gives infinities or NaN, as PyTorch's (which also
/// warns). Integral x computes in float32. The weights are checked on the host (a device sync).
///   cov(x), cov(x, 0), cov(x, 1, counts, {})
Tensor cov(const Tensor& x, int64_t correction = 1, const std::optional<Tensor>& fweights = std::nullopt,
           const std::optional<Tensor>& aweights = std::nullopt);
/// The Pearson correlation coefficients of the rows of x: cov(x) divided by the outer product of
/// the standard deviations, clipped to [-1, 1]; a 1-D x gives cov / cov (1, or NaN for a constant).
///   corrcoef(x)
Tensor corrcoef(const Tensor& x);

}  // namespace minidl
