#include "ops/creation.h"

#include <cmath>

#include "core/autograd.h"
#include "ops/kernels.h"
#include "ops/view.h"

namespace minidl {

namespace {

// requires_grad is the one option a factory applies after making its tensor.
Tensor with_options(Tensor t, const TensorOptions& options) {
  if (options.requires_grad()) t.requires_grad_();
  return t;
}

// A scalar's own dtype as a factory infers it (libtorch): bool, int64, or the default float.
DType inferred_dtype(const Scalar& value) {
  if (value.is_boolean()) return kBool;
  return value.is_integral() ? kInt64 : kFloat32;
}

// The options of a *_like factory: t's dtype and device unless the options set them.
TensorOptions like(const Tensor& t, const TensorOptions& options) {
  return options.dtype(options.dtype_or(t.dtype()))
      .device(options.has_device() ? options.device() : t.device());
}

}  // namespace

Tensor empty(IntArrayRef size, TensorOptions options) {
  return with_options(Tensor::empty(size, options.dtype(), options.device()), options);
}

Tensor full(IntArrayRef size, const Scalar& value, DType dtype, Device device) {
  Tensor t = Tensor::empty(size, dtype, device);
  kernels_for(device).fill(t, value.to_double());
  return t;
}

Tensor full(IntArrayRef size, const Scalar& value, TensorOptions options) {
  return with_options(full(size, value, options.dtype_or(inferred_dtype(value)), options.device()), options);
}

Tensor zeros(IntArrayRef size, DType dtype, Device device) { return full(size, 0, dtype, device); }
Tensor ones(IntArrayRef size, DType dtype, Device device) { return full(size, 1, dtype, device); }
Tensor zeros(IntArrayRef size, TensorOptions options) {
  return with_options(zeros(size, options.dtype(), options.device()), options);
}
Tensor ones(IntArrayRef size, TensorOptions options) {
  return with_options(ones(size, options.dtype(), options.device()), options);
}

Tensor eye(int64_t n, TensorOptions options) { return eye(n, n, options); }

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  MINIDL_CHECK(n >= 0 && m >= 0, "eye: expected non-negative sizes, got n = ", n, " and m = ", m);
  Tensor t = zeros({n, m}, options.dtype(), options.device());
  // The diagonal is the strided view that steps one row and one column at a time.
  Tensor diagonal = Tensor::make_view(t, {std::min(n, m)}, {m + 1}, 0);
  fill_(diagonal, 1);
  return with_options(t, options);
}

Tensor& fill_(Tensor& t, const Scalar& value) {
  if (t.is_contiguous()) {
    kernels_for(t.device()).fill(t, value.to_double());
  } else {  // a strided view: copy a broadcast value into exactly its elements
    NoGradGuard no_grad;
    kernels_for(t.device()).copy(expand(full({}, value, t.dtype(), t.device()), t.shape()), t);
  }
  t.bump_version();
  return t;
}

void fill_scalars_(const std::vector<Tensor*>& scalars, const std::vector<double>& values) {
  MINIDL_CHECK(scalars.size() == values.size(), "fill_scalars_: expected one value per tensor, got ", values.size(),
               " values for ", scalars.size(), " tensors");
  if (scalars.empty()) return;
  const Device device = scalars[0]->device();
  for (const Tensor* t : scalars) {
    MINIDL_CHECK(t->numel() == 1 && t->device() == device, "fill_scalars_: expected one-element tensors on ", device,
                 ", got one of shape ", t->shape(), " on ", t->device());
  }
  kernels_for(device).fill_scalars(scalars, values);
  for (Tensor* t : scalars) t->bump_version();
}

Tensor scalar_tensor(const Scalar& value, DType dtype, Device device) {
  Tensor t = full({}, value, dtype, device);
  t.impl().wrapped_number = true;
  return t;
}

Tensor scalar_tensor(const Scalar& value, Device device) { return scalar_tensor(value, value.dtype(), device); }

Tensor arange(const Scalar& end, TensorOptions options) { return arange(0, end, 1, options); }
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options) { return arange(start, end, 1, options); }
Tensor arange(const Scalar& end, DType dtype, Device device) { return arange(0, end, 1, dtype, device); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  const bool integral = !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  return with_options(arange(start, end, step, options.dtype_or(integral ? kInt64 : kFloat32), options.device()),
                      options);
}

Tensor arange(const Scalar& start_s, const Scalar& end_s, const Scalar& step_s, DType dtype, Device device) {
  const double start = start_s.to_double(), end = end_s.to_double(), step = step_s.to_double();
  MINIDL_CHECK(step != 0 && (end - start) / step >= 0, "arange: the step ", step, " never reaches ", end,
               " from ", start);
  auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  MINIDL_CHECK(dtype != kBool, "arange: expected a numeric dtype, got bool");
  // Made on the device in double, then converted: no copy from the host, which a CUDA graph capture
  // refuses (positions, causal masks and tril/triu are made inside captured steps).
  Tensor out = Tensor::empty({n}, dtype, device);
  kernels_for(device).arange(out, start, step);
  return out;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  MINIDL_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  std::vector<double> values(static_cast<size_t>(steps));
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
  // From both ends toward the middle, as PyTorch: the last value is exactly `end`.
  for (int64_t i = 0; i < steps; ++i)
    values[i] = i < steps / 2 || steps == 1 ? start + step * static_cast<double>(i)
                                             : end - step * static_cast<double>(steps - 1 - i);
  return with_options(Tensor::from_vector(values).to(options.dtype()).to(options.device()), options);
}

Tensor logspace(double start, double end, int64_t steps, double base, TensorOptions options) {
  MINIDL_CHECK(steps >= 0, "logspace: number of steps must be non-negative, got ", steps);
  std::vector<double> values = linspace(start, end, steps, kFloat64).to_vector<double>();
  for (double& v : values) v = std::pow(base, v);
  return with_options(Tensor::from_vector(values).to(options.dtype()).to(options.device()), options);
}

Tensor zeros_like(const Tensor& t, TensorOptions options) { return zeros(t.shape(), like(t, options)); }
Tensor ones_like(const Tensor& t, TensorOptions options) { return ones(t.shape(), like(t, options)); }
Tensor empty_like(const Tensor& t, TensorOptions options) { return empty(t.shape(), like(t, options)); }
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions options) {
  return full(t.shape(), value, like(t, options));
}

}  // namespace minidl
