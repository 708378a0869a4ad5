#pragma once
// Helpers of the float64 tests: tensors from values and back, random leaves, and gradcheck's
// verdict as an expectation that names what was checked.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "minidl.h"
#include "ops/gradcheck.h"

namespace minidl::testing {

/// A float64 tensor of `v` (1-D unless `shape` is given).
inline Tensor f64(const std::vector<double>& v, Shape shape = {}) { return Tensor::from_vector<double>(v, shape); }

/// t's elements as float64, in row-major order (any layout, any device).
inline std::vector<double> values(const Tensor& t) {
  return t.detach().to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>();
}

/// A leaf of standard normal values that requires grad: drawn on the CPU, then moved to `device`.
inline Tensor leaf(const Shape& shape, Device device = Device::cpu(), DType dtype = kFloat64) {
  Tensor t = randn(shape, dtype);
  return (device.is_cpu() ? t : t.to(device)).requires_grad_();
}

/// Expects f's gradients at `inputs` to match central differences.
inline void expect_gradcheck(const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                             std::vector<Tensor> inputs, GradcheckOptions options = {}) {
  GradcheckResult r = gradcheck(f, std::move(inputs), options);
  EXPECT_TRUE(r) << what << ": " << r.message;
}

}  // namespace minidl::testing
