#pragma once
// Tensors made from nothing: constants, ranges and random draws from the default generator.
// Sizes are an IntArrayRef: a braced list, a Shape or one integer (zeros({2, 3}), zeros(5)).
// Options are libtorch's TensorOptions, implicit from a DType, a Device or a DeviceType; the older
// (size, dtype, device) forms stay.
#include "core/scalar.h"
#include <optional>

#include "core/tensor.h"
#include "core/tensor_options.h"
#include "ops/tensor_data.h"

namespace minidl {

/// Uninitialized memory.   empty({2, 3}), empty(batch.size(0), kCUDA)
Tensor empty(IntArrayRef size, TensorOptions options = {});
/// zeros({2, 3}), zeros({2, 3}, kFloat64), zeros(4, TensorOptions().dtype(kInt64).device(kCUDA))
Tensor zeros(IntArrayRef size, TensorOptions options = {});
Tensor zeros(IntArrayRef size, DType dtype, Device device = Device::cpu());
Tensor ones(IntArrayRef size, TensorOptions options = {});
Tensor ones(IntArrayRef size, DType dtype, Device device = Device::cpu());
/// `value` everywhere. Without a dtype it is inferred from the value, as libtorch's: full({2}, 0.5)
/// is float32, full({2}, 7) int64, full({2}, true) bool.
Tensor full(IntArrayRef size, const Scalar& value, TensorOptions options = {});
Tensor full(IntArrayRef size, const Scalar& value, DType dtype, Device device = Device::cpu());
/// The n x m identity (m defaults to n).   eye(3), eye(2, 4, kFloat64)
Tensor eye(int64_t n, TensorOptions options = {});
Tensor eye(int64_t n, int64_t m, TensorOptions options = {});

/// Sets every element to `value` in place, through any view (strided destinations); not recorded,
/// bumps the version counter.   fill_(lr, 0.01);  x.slice(0, 0, 4, 2).fill_(3);
Tensor& fill_(Tensor& t, const Scalar& value);
/// Sets each one-element tensor scalars[i] (all on one device, any dtypes) to values[i], in one
/// launch on cuda where they fit in one: the few host numbers a captured step reads, such as its
/// learning rates, written before a replay.   fill_scalars_({&lr_a, &lr_b}, {1e-3, 5e-4});
void fill_scalars_(const std::vector<Tensor*>& scalars, const std::vector<double>& values);
/// A 0-d tensor holding `value` as a wrapped number: in type promotion it counts as the C++
/// scalar it came from (core/type_promotion.h), not as a tensor of `dtype`. The dtype defaults to
/// the scalar's own (float64, int64 or bool).   Tensor y = mul(x, scalar_tensor(0.5, x.dtype(), x.device()));
Tensor scalar_tensor(const Scalar& value, DType dtype, Device device = Device::cpu());
Tensor scalar_tensor(const Scalar& value, Device device = Device::cpu());

/// [start, end) by step. Integer bounds and step give int64, any floating one float32, unless the
/// options say otherwise (libtorch): arange(5) = [0, 1, 2, 3, 4] (int64);
/// arange(1, 2, 0.25) = [1, 1.25, 1.5, 1.75] (float32); arange(5, kFloat64).
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options = {});
Tensor arange(const Scalar& end, DType dtype, Device device);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, DType dtype, Device device);
/// `steps` evenly spaced values from start to end, both included (float32 by default).
///   linspace(0, 1, 5) = [0, 0.25, 0.5, 0.75, 1]
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
/// base ** linspace(start, end, steps).   logspace(0, 2, 3) = [1, 10, 100]
Tensor logspace(double start, double end, int64_t steps, double base = 10.0, TensorOptions options = {});

/// Uniform on [0, 1).   rand({2, 3}), rand(4, kCUDA)
Tensor rand(IntArrayRef size, TensorOptions options = {});
Tensor rand(IntArrayRef size, DType dtype, Device device = Device::cpu());
/// Standard normal.
Tensor randn(IntArrayRef size, TensorOptions options = {});
Tensor randn(IntArrayRef size, DType dtype, Device device = Device::cpu());
/// Uniform on [low, high).
Tensor uniform(const Shape& shape, double low, double high, DType dtype = kFloat32, Device device = Device::cpu());
/// Uniform integers in [low, high) (low defaults to 0), int64 unless the options say otherwise.
///   randint(10, {3}), randint(-2, 3, {2, 2})
Tensor randint(int64_t high, IntArrayRef size, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions options = {});
/// A random permutation of 0..n-1 (int64 unless the options say otherwise).   randperm(5)
Tensor randperm(int64_t n, TensorOptions options = {});
/// Normal with the given mean and standard deviation.   normal(2.0, 0.5, {100})
Tensor normal(double mean, double std, IntArrayRef size, TensorOptions options = {});
/// 1 with probability p (elementwise from the floating tensor p), else 0, in p's dtype.
///   bernoulli(full({4}, 0.3))
Tensor bernoulli(const Tensor& p);
/// 1 with probability p, else 0, in x's shape, dtype and device.   bernoulli(x, 0.5)
Tensor bernoulli(const Tensor& x, double p);

/// In place, through any view: uniform on [from, to), normal(mean, std), bernoulli(p). Not recorded;
/// each bumps the version counter.   w.uniform_(-0.1, 0.1)
Tensor& uniform_(Tensor& t, double from = 0, double to = 1);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1);
Tensor& bernoulli_(Tensor& t, double p = 0.5);
/// bernoulli_ with a probability per element (p broadcast to t).   mask.bernoulli_(keep_probs)
Tensor& bernoulli_(Tensor& t, const Tensor& p);
/// Integers uniform on [from, to) in t's dtype (to: one past the largest; PyTorch's random_). Without
/// `to`: [0, to); without either: [0, 2^mantissa digits] for floating t, the dtype's range for integers
/// (up to 2^52 for int64).   ids.random_(0, vocab)
Tensor& random_(Tensor& t, int64_t from, std::optional<int64_t> to);
Tensor& random_(Tensor& t, int64_t to);
Tensor& random_(Tensor& t);
/// In place, as PyTorch's (floating t; geometric_ any arithmetic dtype), each from a uniform draw in
/// float64 by its inverse CDF: exponential with rate lambd; geometric, the trial of the first
/// success (1, 2, ...) at probability p; exp of a normal(mean, std); Cauchy around median with
/// scale sigma.   noise.exponential_(2.0)
Tensor& exponential_(Tensor& t, double lambd = 1);
Tensor& geometric_(Tensor& t, double p);
Tensor& log_normal_(Tensor& t, double mean = 1, double std = 2);
Tensor& cauchy_(Tensor& t, double median = 0, double sigma = 1);

/// Like t: its shape, and its dtype and device unless the options set them.   zeros_like(x, kInt64)
Tensor zeros_like(const Tensor& t, TensorOptions options = {});
Tensor ones_like(const Tensor& t, TensorOptions options = {});
Tensor empty_like(const Tensor& t, TensorOptions options = {});
/// `value` everywhere, in t's shape, dtype and device.   full_like(mask, 1.0)
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions options = {});
Tensor rand_like(const Tensor& t, TensorOptions options = {});
Tensor randn_like(const Tensor& t, TensorOptions options = {});
/// Uniform integers in [low, high) (low defaults to 0) in t's shape, and its dtype and device unless
/// the options set them.   randint_like(labels, 10)
Tensor randint_like(const Tensor& t, int64_t high, TensorOptions options = {});
Tensor randint_like(const Tensor& t, int64_t low, int64_t high, TensorOptions options = {});

}  // namespace minidl
