#pragma once
// Tensors made from nothing: constants, ranges and random draws from the global generator.
#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// zeros({2, 3}), zeros({2, 3}, kFloat64, Device::cuda())
Tensor zeros(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
/// full({2}, 0.5)
Tensor full(const Shape& shape, double value, DType dtype = kFloat32, Device device = Device::cpu());
/// Sets every element of a contiguous tensor to `value`, in place; not recorded.   fill_(lr, 0.01);
void fill_(Tensor& t, double value);
/// A 0-d tensor holding `value` as a wrapped number: in type promotion it counts as the C++
/// scalar it came from (core/type_promotion.h), not as a tensor of `dtype`. The dtype defaults to
/// the scalar's own (float64, int64 or bool).   Tensor y = mul(x, scalar_tensor(0.5, x.dtype(), x.device()));
Tensor scalar_tensor(const Scalar& value, DType dtype, Device device = Device::cpu());
Tensor scalar_tensor(const Scalar& value, Device device = Device::cpu());
/// arange(5) = [0, 1, 2, 3, 4]; arange(1, 2, 0.25) = [1, 1.25, 1.5, 1.75]
Tensor arange(double end, DType dtype = kFloat32, Device device = Device::cpu());
Tensor arange(double start, double end, double step = 1, DType dtype = kFloat32, Device device = Device::cpu());
/// Uniform on [0, 1).
Tensor rand(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
/// Standard normal.
Tensor randn(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
/// Uniform on [low, high).
Tensor uniform(const Shape& shape, double low, double high, DType dtype = kFloat32, Device device = Device::cpu());

Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
/// `value` everywhere, in t's shape, dtype and device.   full_like(mask, 1.0)
Tensor full_like(const Tensor& t, double value);

}  // namespace minidl
