// Random factories and in-place random fills. Every draw comes from the calling thread's default
// generator (core/random.h) through the uniform and normal kernels (cuRAND Philox on CUDA), so
// manual_seed repeats them; the integer and Bernoulli draws are built from those two.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/math.h"

namespace minidl {

namespace {

Tensor with_options(Tensor t, const TensorOptions& options) {
  if (options.requires_grad()) t.requires_grad_();
  return t;
}

// Runs `draw` on t directly when the kernel can write it (contiguous), else on a contiguous
// buffer that is then copied into the view's elements.
template <class Draw>
Tensor& fill_random_(Tensor& t, const char* name, Draw draw) {
  MINIDL_CHECK(!(grad_mode_enabled() && t.requires_grad() && t.is_leaf()), name,
               ": a leaf Variable that requires grad is being used in an in-place operation; do it under "
               "NoGradGuard (as torch.no_grad())");
  if (t.is_contiguous()) {
    draw(t);
  } else {
    Tensor buffer = Tensor::empty(t.shape(), t.dtype(), t.device());
    draw(buffer);
    kernels_for(t.device()).copy(buffer, t);
  }
  t.bump_version();
  return t;
}

}  // namespace

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device) {
  MINIDL_CHECK(low < high, "uniform: expected low < high, got [", low, ", ", high, ")");
  Tensor t = Tensor::empty(shape, dtype, device);
  kernels_for(device).uniform(t, low, high);
  return t;
}

Tensor rand(IntArrayRef size, DType dtype, Device device) { return uniform(size, 0, 1, dtype, device); }

Tensor randn(IntArrayRef size, DType dtype, Device device) {
  Tensor t = Tensor::empty(size, dtype, device);
  kernels_for(device).normal(t, 0, 1);
  return t;
}

Tensor rand(IntArrayRef size, TensorOptions options) {
  return with_options(rand(size, options.dtype(), options.device()), options);
}
Tensor randn(IntArrayRef size, TensorOptions options) {
  return with_options(randn(size, options.dtype(), options.device()), options);
}

Tensor randint(int64_t high, IntArrayRef size, TensorOptions options) { return randint(0, high, size, options); }

Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions options) {
  MINIDL_CHECK(low < high, "randint: expected low < high, got low = ", low, " and high = ", high);
  // floor(u * (high - low)) for u uniform on [0, 1) in float64 is uniform on the integers below
  // high - low (exact for ranges up to 2^52); the conversion to int64 truncates, which for these
  // non-negative values is the floor.
  Tensor t;
  {
    NoGradGuard no_grad;
    Tensor u = uniform(size, 0, static_cast<double>(high - low), kFloat64, options.device());
    t = u.to(kInt64);
    if (low != 0) add_(t, low);
    t = t.to(options.dtype_or(kInt64));
  }
  return with_options(t, options);
}

Tensor randperm(int64_t n, TensorOptions options) {
  MINIDL_CHECK(n >= 0, "randperm: expected a non-negative n, got ", n);
  // Sorting n uniform keys gives every order with equal probability; the keys come from the
  // default generator, so manual_seed repeats the permutation on any device.
  const std::vector<double> keys = uniform({n}, 0, 1, kFloat64).to_vector<double>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  Tensor t = Tensor::from_vector(order).to(options.dtype_or(kInt64)).to(options.device());
  return with_options(t, options);
}

Tensor normal(double mean, double std, IntArrayRef size, TensorOptions options) {
  MINIDL_CHECK(std >= 0, "normal: expected std >= 0, got ", std);
  Tensor t = Tensor::empty(size, options.dtype(), options.device());
  kernels_for(t.device()).normal(t, mean, std);
  return with_options(t, options);
}

Tensor bernoulli(const Tensor& p) {
  MINIDL_CHECK(is_floating(p.dtype()), "bernoulli: expected a floating tensor of probabilities, got ", p.dtype());
  NoGradGuard no_grad;  // a draw: no gradient, as in PyTorch
  return lt(uniform(p.shape(), 0, 1, p.dtype(), p.device()), p).to(p.dtype());
}

Tensor bernoulli(const Tensor& x, double p) {
  MINIDL_CHECK(p >= 0 && p <= 1, "bernoulli: expected 0 <= p <= 1, got ", p);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  return bernoulli_(out, p);
}

Tensor& uniform_(Tensor& t, double from, double to) {
  MINIDL_CHECK(from <= to, "uniform_: expected from <= to, got from = ", from, " and to = ", to);
  return fill_random_(t, "uniform_", [&](Tensor& dst) {
    if (from == to) {
      kernels_for(dst.device()).fill(dst, from);
    } else {
      kernels_for(dst.device()).uniform(dst, from, to);
    }
  });
}

Tensor& normal_(Tensor& t, double mean, double std) {
  MINIDL_CHECK(std >= 0, "normal_: expected std >= 0, got ", std);
  return fill_random_(t, "normal_", [&](Tensor& dst) { kernels_for(dst.device()).normal(dst, mean, std); });
}

Tensor& bernoulli_(Tensor& t, double p) {
  MINIDL_CHECK(p >= 0 && p <= 1, "bernoulli_: expected 0 <= p <= 1, got ", p);
  return fill_random_(t, "bernoulli_", [&](Tensor& dst) {
    NoGradGuard no_grad;
    Tensor draw = lt(uniform(dst.shape(), 0, 1, kFloat64, dst.device()), p);
    kernels_for(dst.device()).copy(draw, dst);
  });
}

Tensor& bernoulli_(Tensor& t, const Tensor& p) {
  MINIDL_CHECK(p.defined() && is_floating(p.dtype()), "bernoulli_: expected a floating probability tensor, got ",
               p.defined() ? dtype_name(p.dtype()) : "an undefined tensor");
  MINIDL_CHECK(broadcasts_to(p.shape(), t.shape()), "bernoulli_: expected probabilities that broadcast to ",
               t.shape(), ", got shape ", p.shape());
  return fill_random_(t, "bernoulli_", [&](Tensor& dst) {
    NoGradGuard no_grad;
    const Tensor probs = p.detach().to(dst.device(), kFloat64);
    Tensor draw = lt(uniform(dst.shape(), 0, 1, kFloat64, dst.device()), probs);
    kernels_for(dst.device()).copy(draw, dst);
  });
}

namespace {

// Fills t from draws of u, uniform on [0, 1) in float64, through `transform` (inverse CDF sampling),
// rounding once into t's dtype.
template <class Transform>
Tensor& fill_from_uniform_(Tensor& t, const char* name, bool floating_only, Transform transform) {
  MINIDL_CHECK(!floating_only || is_floating(t.dtype()), name, ": expected a floating tensor, got ", t.dtype());
  return fill_random_(t, name, [&](Tensor& dst) {
    NoGradGuard no_grad;
    const Tensor draw = transform(uniform(dst.shape(), 0, 1, kFloat64, dst.device()));
    kernels_for(dst.device()).copy(draw.to(dst.dtype()), dst);
  });
}

}  // namespace

Tensor& exponential_(Tensor& t, double lambd) {
  MINIDL_CHECK(lambd > 0, "exponential_: expected lambd > 0, got ", lambd);
  return fill_from_uniform_(t, "exponential_", true, [&](const Tensor& u) { return log1p(-u) * (-1 / lambd); });
}

Tensor& geometric_(Tensor& t, double p) {
  MINIDL_CHECK(p > 0 && p < 1, "geometric_: expected 0 < p < 1, got ", p);
  MINIDL_CHECK(t.dtype() != kBool, "geometric_: expected a floating or integral tensor, got bool");
  // The number of trials to the first success: ceil(log(1 - u) / log(1 - p)), at least 1.
  return fill_from_uniform_(t, "geometric_", false, [&](const Tensor& u) {
    return clamp(ceil(log1p(-u) / std::log1p(-p)), Scalar(1.0));
  });
}

Tensor& log_normal_(Tensor& t, double mean, double std) {
  MINIDL_CHECK(std > 0, "log_normal_: expected std > 0, got ", std);
  MINIDL_CHECK(is_floating(t.dtype()), "log_normal_: expected a floating tensor, got ", t.dtype());
  return fill_random_(t, "log_normal_", [&](Tensor& dst) {
    NoGradGuard no_grad;
    Tensor draw = Tensor::empty(dst.shape(), kFloat64, dst.device());
    kernels_for(dst.device()).normal(draw, mean, std);
    kernels_for(dst.device()).copy(exp(draw).to(dst.dtype()), dst);
  });
}

Tensor& cauchy_(Tensor& t, double median, double sigma) {
  MINIDL_CHECK(sigma > 0, "cauchy_: expected sigma > 0, got ", sigma);
  return fill_from_uniform_(t, "cauchy_", true, [&](const Tensor& u) { return tan((u - 0.5) * M_PI) * sigma + median; });
}

namespace {

// The largest value random_() draws by default: 2^digits for floating dtypes (every integer up to it
// is exact), the dtype's largest for integers, int64's capped at 2^52 (the uniform's exact range).
int64_t default_random_bound(DType dtype) {
  switch (dtype) {
    case kBool: return 1;
    case kUInt8: return 255;
    case kInt8: return 127;
    case kInt32: return 2147483647;
    case kInt64: return int64_t(1) << 52;
    case kFloat16: return int64_t(1) << 11;
    case kBFloat16: return int64_t(1) << 8;
    case kFloat32: return int64_t(1) << 24;
    default: return int64_t(1) << 53;
  }
}

}  // namespace

Tensor& random_(Tensor& t, int64_t from, std::optional<int64_t> to) {
  const int64_t end = to ? *to : default_random_bound(t.dtype()) + 1;
  MINIDL_CHECK(from < end, "random_: expected from < to, got from = ", from, " and to = ", end);
  MINIDL_CHECK(end - from <= (int64_t(1) << 52), "random_: expected a range of at most 2^52 values, got [", from,
               ", ", end, ")");
  return fill_random_(t, "random_", [&](Tensor& dst) {
    NoGradGuard no_grad;
    const Tensor draw = randint(from, end, dst.shape(), TensorOptions().dtype(kInt64).device(dst.device()));
    kernels_for(dst.device()).copy(draw.to(dst.dtype()), dst);
  });
}

Tensor& random_(Tensor& t, int64_t to) { return random_(t, 0, to); }

Tensor& random_(Tensor& t) { return random_(t, 0, std::nullopt); }

Tensor rand_like(const Tensor& t, TensorOptions options) {
  return rand(t.shape(), options.dtype(options.dtype_or(t.dtype()))
                             .device(options.has_device() ? options.device() : t.device()));
}
Tensor randint_like(const Tensor& t, int64_t high, TensorOptions options) { return randint_like(t, 0, high, options); }
Tensor randint_like(const Tensor& t, int64_t low, int64_t high, TensorOptions options) {
  return randint(low, high, t.shape(), options.dtype(options.dtype_or(t.dtype()))
                                           .device(options.has_device() ? options.device() : t.device()));
}
Tensor randn_like(const Tensor& t, TensorOptions options) {
  return randn(t.shape(), options.dtype(options.dtype_or(t.dtype()))
                              .device(options.has_device() ? options.device() : t.device()));
}

}  // namespace minidl
