// Elementwise kernels: Eigen array expressions on contiguous data (vectorized), a strided walk
// for broadcast or transposed operands.
#include <algorithm>
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/math_functions.h"
#include "ops/cpu/strided.h"

namespace minidl {

namespace {

template <class T>
using ConstArray = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// GELU, its tanh approximation and SiLU with their derivatives, as PyTorch computes them.
template <class T>
T gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
}
template <class T>
T gelu_grad(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
  const T pdf = std::exp(T(-0.5) * x * x) * T(0.5 * M_2_SQRTPI * M_SQRT1_2);
  return cdf + x * pdf;
}
template <class T>
T gelu_tanh(T x) {
  const T inner = T(M_SQRT2 * M_2_SQRTPI * 0.5) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + std::tanh(inner));
}
template <class T>
T gelu_tanh_grad(T x) {
  const T k = T(M_SQRT2 * M_2_SQRTPI * 0.5);
  const T t = std::tanh(k * (x + T(0.044715) * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * x * x);
}
template <class T>
T silu_grad(T x) {
  const T s = T(1) / (T(1) + std::exp(-x));
  return s * (T(1) + x * (T(1) - s));
}

template <class T>
T apply_unary(UnaryOp op, T x, T scalar) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Relu: return x > T(0) || std::isnan(x) ? x : T(0);  // NaN passes, as in PyTorch
    case UnaryOp::Sigmoid: return T(1) / (T(1) + std::exp(-x));
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::LeakyRelu: return x > T(0) ? x : x * scalar;
    case UnaryOp::Gelu:
      if constexpr (std::is_floating_point_v<T>) return gelu(x);
      break;
    case UnaryOp::GeluTanh:
      if constexpr (std::is_floating_point_v<T>) return gelu_tanh(x);
      break;
    case UnaryOp::Silu:
      if constexpr (std::is_floating_point_v<T>) return x / (T(1) + std::exp(-x));
      break;
    default: return cpu::math_unary(op, x, scalar);
  }
  return x;
}

// Python's // and %: the quotient rounds toward negative infinity and the remainder takes the
// divisor's sign. Floats go through fmod, as PyTorch's div_floor does, so that the two agree with
// each other exactly (a == floor_divide(a, b) * b + remainder(a, b) up to rounding).
template <class T>
T floor_divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  } else {
    if (b == T(0)) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    const T floored = std::floor(div);
    return div - floored > T(0.5) ? floored + T(1) : floored;
  }
}
template <class T>
T remainder(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else {
    const T r = std::fmod(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
  }
}

template <class T>
T apply_binary(BinaryOp op, T a, T b, T scalar) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Pow: return static_cast<T>(std::pow(a, b));
    case BinaryOp::FloorDivide: return floor_divide(a, b);
    case BinaryOp::Remainder: return remainder(a, b);
    case BinaryOp::Eq: return a == b ? T(1) : T(0);
    case BinaryOp::ReluBackward: return b > T(0) ? a : T(0);
    case BinaryOp::SigmoidBackward: return a * b * (T(1) - b);
    case BinaryOp::TanhBackward: return a * (T(1) - b * b);
    case BinaryOp::LeakyReluBackward: return b > T(0) ? a : a * scalar;
    case BinaryOp::GeluBackward:
      if constexpr (std::is_floating_point_v<T>) return a * gelu_grad(b);
      break;
    case BinaryOp::GeluTanhBackward:
      if constexpr (std::is_floating_point_v<T>) return a * gelu_tanh_grad(b);
      break;
    case BinaryOp::SiluBackward:
      if constexpr (std::is_floating_point_v<T>) return a * silu_grad(b);
      break;
    default: return cpu::math_binary(op, a, b, scalar);
  }
  return a;
}

// Contiguous unary ops as Eigen expressions, so the hot ones (relu, exp) are SIMD.
template <class T>
void unary_contiguous(UnaryOp op, const T* x, T* out, int64_t n, T scalar) {
  ConstArray<T> in(x, n);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> o(out, n);
  switch (op) {
    case UnaryOp::Neg: o = -in; return;
    case UnaryOp::Exp: o = in.exp(); return;
    case UnaryOp::Log: o = in.log(); return;
    case UnaryOp::Sqrt:
      // Eigen's packet sqrt for double (-march=native) turns +inf into NaN; std::sqrt does not.
      if constexpr (std::is_same_v<T, double>) {
        for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(x[i]);
      } else {
        o = in.sqrt();
      }
      return;
    case UnaryOp::Relu: o = (in < T(0)).select(T(0), in); return;  // NaN passes, as in PyTorch
    case UnaryOp::Sigmoid: o = T(1) / (T(1) + (-in).exp()); return;
    case UnaryOp::Tanh: o = in.tanh(); return;
    case UnaryOp::LeakyRelu: o = (in > T(0)).select(in, in * scalar); return;
    case UnaryOp::Silu: o = in / (T(1) + (-in).exp()); return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = apply_unary(op, x[i], scalar);
      return;
  }
}

template <class T>
void binary_contiguous(BinaryOp op, const T* a, const T* b, T* out, int64_t n, T scalar) {
  ConstArray<T> x(a, n), y(b, n);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> o(out, n);
  switch (op) {
    case BinaryOp::Add: o = x + y; return;
    case BinaryOp::Sub: o = x - y; return;
    case BinaryOp::Mul: o = x * y; return;
    case BinaryOp::Div: o = x / y; return;
    case BinaryOp::ReluBackward: o = (y > T(0)).select(x, T(0)); return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = apply_binary(op, a[i], b[i], scalar);
  }
}

// A contiguous operand against one value (x * 2.0, x + bias of a single element): vectorized, with
// the op chosen once rather than per element.
template <class T>
void binary_scalar(BinaryOp op, const T* a, T b, bool scalar_on_left, T* out, int64_t n, T scalar) {
  ConstArray<T> x(a, n);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> o(out, n);
  switch (op) {
    case BinaryOp::Add: o = x + b; return;
    case BinaryOp::Mul: o = x * b; return;
    case BinaryOp::Sub:
      if (scalar_on_left) o = b - x;
      else o = x - b;
      return;
    case BinaryOp::Div:
      if (scalar_on_left) o = b / x;
      else o = x / b;
      return;
    default:
      for (int64_t i = 0; i < n; ++i)
        out[i] = scalar_on_left ? apply_binary(op, b, a[i], scalar) : apply_binary(op, a[i], b, scalar);
  }
}

// Splits a contiguous range into chunks of kParallelGrain elements, each handled by
// `chunk(begin, count)`: the chunks follow the size alone, not the thread count.
template <class Chunk>
void parallel_chunks(int64_t n, Chunk&& chunk) {
  if (n <= kParallelGrain) {
    chunk(0, n);
    return;
  }
  const int64_t pieces = (n + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < pieces; ++p) {
    int64_t begin = p * kParallelGrain;
    chunk(begin, std::min(kParallelGrain, n - begin));
  }
}

// bfloat16 / float16: each element widened to float, computed by the float formulas, rounded once
// at the store. Contiguous chunks go through a float buffer so the float Eigen expressions apply.
template <class T>
void widen_chunk(const T* in, int64_t n, std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(in[i]);
}

template <class T>
void unary_16bit(UnaryOp op, const Tensor& x, Tensor& out, float scalar) {
  const T* in = x.data<T>();
  T* o = out.data<T>();
  if (x.is_contiguous() && out.is_contiguous()) {
    parallel_chunks(x.numel(), [&](int64_t begin, int64_t n) {
      std::vector<float> buf;
      widen_chunk(in + begin, n, buf);
      unary_contiguous<float>(op, buf.data(), buf.data(), n, scalar);
      for (int64_t i = 0; i < n; ++i) o[begin + i] = T(buf[static_cast<size_t>(i)]);
    });
    return;
  }
  cpu::for_each_row<2>(out.shape(), {&out.strides(), &x.strides()}, [&](auto off, int64_t n, auto inc) {
    for (int64_t i = 0; i < n; ++i)
      o[off[0] + i * inc[0]] = T(apply_unary<float>(op, static_cast<float>(in[off[1] + i * inc[1]]), scalar));
  });
}

template <class T>
void binary_16bit(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, float scalar) {
  const T* x = a.data<T>();
  const T* y = b.data<T>();
  T* o = out.data<T>();
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous() && a.numel() == out.numel() &&
      b.numel() == out.numel()) {
    parallel_chunks(out.numel(), [&](int64_t begin, int64_t n) {
      std::vector<float> bx, by;
      widen_chunk(x + begin, n, bx);
      widen_chunk(y + begin, n, by);
      binary_contiguous<float>(op, bx.data(), by.data(), bx.data(), n, scalar);
      for (int64_t i = 0; i < n; ++i) o[begin + i] = T(bx[static_cast<size_t>(i)]);
    });
    return;
  }
  cpu::for_each_row<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()}, [&](auto off, int64_t n, auto inc) {
    for (int64_t i = 0; i < n; ++i)
      o[off[0] + i * inc[0]] = T(apply_binary<float>(op, static_cast<float>(x[off[1] + i * inc[1]]),
                                                     static_cast<float>(y[off[2] + i * inc[2]]), scalar));
  });
}

}  // namespace

void CpuKernels::unary(UnaryOp op, const Tensor& x, Tensor& out, double scalar) {
  if (is_reduced_floating(x.dtype())) {
    dispatch_16bit(x.dtype(), [&](auto tag) { unary_16bit<decltype(tag)>(op, x, out, static_cast<float>(scalar)); });
    return;
  }
  dispatch_all(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      MINIDL_CHECK(op == UnaryOp::Neg || op == UnaryOp::Sign || op == UnaryOp::BitwiseNot,
                   "unary op needs a floating tensor, got ", x.dtype());
    }
    const T* in = x.data<T>();
    T* o = out.data<T>();
    if (x.is_contiguous()) {
      if constexpr (std::is_floating_point_v<T>) {
        parallel_chunks(x.numel(), [&](int64_t begin, int64_t n) {
          unary_contiguous(op, in + begin, o + begin, n, static_cast<T>(scalar));
        });
      } else {
        for (int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = apply_unary(op, in[i], T(0));
      }
      return;
    }
    cpu::for_each_row<2>(out.shape(), {&out.strides(), &x.strides()}, [&](auto off, int64_t n, auto inc) {
      for (int64_t i = 0; i < n; ++i)
        o[off[0] + i * inc[0]] = apply_unary(op, in[off[1] + i * inc[1]], static_cast<T>(scalar));
    });
  });
}

void CpuKernels::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, double scalar_arg) {
  if (is_reduced_floating(a.dtype())) {
    dispatch_16bit(a.dtype(),
                   [&](auto tag) { binary_16bit<decltype(tag)>(op, a, b, out, static_cast<float>(scalar_arg)); });
    return;
  }
  dispatch_all(a.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    const T scalar = static_cast<T>(scalar_arg);
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    T* o = out.data<T>();
    if (a.is_contiguous() && b.is_contiguous()) {
      parallel_chunks(out.numel(), [&](int64_t begin, int64_t n) {
        binary_contiguous(op, x + begin, y + begin, o + begin, n, scalar);
      });
      return;
    }
    // Operands arrive broadcast to the output's shape: a single value is a view whose strides are all 0.
    auto one_value = [](const Tensor& t) {
      return std::all_of(t.strides().begin(), t.strides().end(), [](int64_t st) { return st == 0; });
    };
    if (out.is_contiguous() && ((a.is_contiguous() && one_value(b)) || (b.is_contiguous() && one_value(a)))) {
      const bool left = !(a.is_contiguous() && one_value(b));
      const T* big = left ? y : x;
      const T value = left ? *x : *y;
      parallel_chunks(out.numel(), [&](int64_t begin, int64_t n) {
        binary_scalar(op, big + begin, value, left, o + begin, n, scalar);
      });
      return;
    }
    cpu::for_each_row<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()}, [&](auto off, int64_t n, auto inc) {
      const T* xa = x + off[1];
      const T* yb = y + off[2];
      T* od = o + off[0];
      if (inc[1] == 1 && inc[2] == 0) {  // a row against a broadcast scalar: the bias-add shape
        const T s = *yb;
        for (int64_t i = 0; i < n; ++i) od[i] = apply_binary(op, xa[i], s, scalar);
      } else if (inc[1] == 1 && inc[2] == 1) {
        for (int64_t i = 0; i < n; ++i) od[i] = apply_binary(op, xa[i], yb[i], scalar);
      } else {
        for (int64_t i = 0; i < n; ++i) od[i * inc[0]] = apply_binary(op, xa[i * inc[1]], yb[i * inc[2]], scalar);
      }
    });
  });
}

}  // namespace minidl
