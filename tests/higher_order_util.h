#pragma once
// gradgradcheck: second derivatives checked by finite differences of first derivatives.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "minidl.h"
#include "ops/gradcheck.h"

namespace minidl::testing {

/// Checks the derivatives of x -> d<v, f(x)>/dx (computed by autograd::grad with create_graph) against
/// central differences of that first derivative: f's second derivatives. Inputs float64.
inline GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     const std::vector<Tensor>& inputs, uint64_t seed = 7) {
  Tensor v;  // a fixed random weighting of f's output
  {
    NoGradGuard no_grad;
    std::vector<Tensor> probe;
    for (const Tensor& x : inputs) probe.push_back(x.detach());
    manual_seed(seed);
    v = randn(f(probe).shape(), kFloat64, inputs[0].device());
  }
  auto first = [f, v](const std::vector<Tensor>& in) {
    // gradcheck evaluates its function under NoGradGuard on detached copies: then the first
    // derivative is computed on fresh leaves, without history (only its value matters there).
    const bool differentiate = grad_mode_enabled() && in[0].requires_grad();
    std::vector<Tensor> xs = in;
    AutoGradMode enable_grad(true);
    if (!differentiate)
      for (Tensor& x : xs) x = x.detach().clone().requires_grad_();
    std::vector<Tensor> gs = autograd::grad({f(xs)}, xs, {v}, true, differentiate, true);
    std::vector<Tensor> flat;
    for (size_t i = 0; i < gs.size(); ++i)
      flat.push_back(gs[i].defined() ? gs[i].reshape({-1}) : zeros({xs[i].numel()}, kFloat64, xs[i].device()));
    // Keeps the result connected to the inputs even where the first derivative is constant.
    return add(cat(flat), mul(sum(xs[0]), 0.0));
  };
  return gradcheck(first, inputs);
}

}  // namespace minidl::testing
