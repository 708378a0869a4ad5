#pragma once
// A differentiable op defined outside minidl, the way minidl's own ops are: compute the forward, then
// record one tape entry whose closure maps the output's gradient to the input's.
#include <vector>

#include "minidl.h"

/// squareplus(x) = (x + sqrt(x^2 + 4)) / 2, a smooth ReLU, with d/dx = (1 + x / sqrt(x^2 + 4)) / 2.
///   Tensor y = squareplus(x);
inline minidl::Tensor squareplus(const minidl::Tensor& x) {
  using namespace minidl;
  Tensor root, out;
  {
    // The ops that compute the forward stay off the tape: the entry below is the op's whole gradient.
    NoGradGuard no_grad;
    root = sqrt(x * x + 4.0);
    out = (x + root) * 0.5;
  }
  if (autograd::needs_recording({x})) {
    // Save only what backward needs; x and root are held detached, so they keep no graph.
    autograd::record("squareplus", out, {x},
                     [xs = x.detach(), root](const Tensor& grad, const std::vector<bool>& needs_grad) {
                       return std::vector<Tensor>{needs_grad[0] ? grad * (xs / root + 1.0) * 0.5 : Tensor()};
                     });
  }
  return out;
}
