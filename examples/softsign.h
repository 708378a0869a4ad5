#pragma once
// A differentiable op defined outside minidl, the way minidl's own ops are: compute the forward, then
// record one tape entry whose closure maps the output's gradient to the input's.
#include <vector>

#include "minidl.h"

/// softsign(x) = x / (1 + |x|), with d/dx = 1 / (1 + |x|)^2.   Tensor y = softsign(x);
inline minidl::Tensor softsign(const minidl::Tensor& x) {
  using namespace minidl;
  Tensor denom, out;
  {
    // The ops that compute the forward stay off the tape: the entry below is the op's whole gradient.
    NoGradGuard no_grad;
    denom = abs(x) + 1.0;
    out = x / denom;
  }
  if (autograd::needs_recording({x})) {
    // Save only what backward needs; denom was made under NoGradGuard, so it holds no graph.
    autograd::record("softsign", out, {x}, [denom](const Tensor& grad, const std::vector<bool>& needs_grad) {
      return std::vector<Tensor>{needs_grad[0] ? grad / (denom * denom) : Tensor()};
    });
  }
  return out;
}
