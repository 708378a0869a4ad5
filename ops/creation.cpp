#include "ops/creation.h"

#include <cmath>

#include "ops/kernels.h"

namespace minidl {

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  kernels_for(device).fill(t, value);
  return t;
}

void fill_(Tensor& t, double value) {
  MINIDL_CHECK(t.is_contiguous(), "fill_: expected a contiguous tensor, got shape ", t.shape(), " strides ", t.strides());
  kernels_for(t.device()).fill(t, value);
  t.bump_version();
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor arange(double end, DType dtype, Device device) { return arange(0, end, 1, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  MINIDL_CHECK(step != 0 && (end - start) / step >= 0, "arange: the step ", step, " never reaches ", end,
               " from ", start);
  auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  // Built on the host in double, then converted: ranges are small and made once.
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
  return Tensor::from_vector(values).to(dtype).to(device);
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device) {
  MINIDL_CHECK(low < high, "uniform: expected low < high, got [", low, ", ", high, ")");
  Tensor t = Tensor::empty(shape, dtype, device);
  kernels_for(device).uniform(t, low, high);
  return t;
}

Tensor rand(const Shape& shape, DType dtype, Device device) { return uniform(shape, 0, 1, dtype, device); }

Tensor randn(const Shape& shape, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  kernels_for(device).normal(t, 0, 1);
  return t;
}

Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }
Tensor scalar_tensor(const Scalar& value, DType dtype, Device device) {
  Tensor t = full({}, value.to_double(), dtype, device);
  t.impl().wrapped_number = true;
  return t;
}

Tensor scalar_tensor(const Scalar& value, Device device) { return scalar_tensor(value, value.dtype(), device); }

Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype(), t.device()); }

}  // namespace minidl
