#pragma once
// Numerical gradient checking: compares the tape's gradients with central differences, element by
// element of the full Jacobian, in float64.
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minidl {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  /// On failure: the worst element (input, flat index, output element, analytic vs numeric).
  std::string message;
  double worst_error = 0;  // largest |analytic - numeric| - (atol + rtol * |numeric|) seen
  explicit operator bool() const { return ok; }
};

/// Checks d f(inputs) / d inputs for every input that requires grad. Inputs must be float64.
///   auto r = gradcheck([](auto& in) { return tanh(in[0]); }, {randn({3, 4}, kFloat64).requires_grad_()});
///   EXPECT_TRUE(r) << r.message;
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs,
                          GradcheckOptions options = {});

}  // namespace minidl
