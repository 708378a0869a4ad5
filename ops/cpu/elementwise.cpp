// Elementwise kernels: Eigen array expressions on contiguous data (vectorized), a strided walk
// for broadcast or transposed operands.
#include <Eigen/Core>
#include <cmath>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/strided.h"

namespace minidl {

namespace {

template <class T>
using ConstArray = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
T apply_unary(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Relu: return x > T(0) ? x : T(0);
    case UnaryOp::Sigmoid: return T(1) / (T(1) + std::exp(-x));
    case UnaryOp::Tanh: return std::tanh(x);
  }
  return x;
}

template <class T>
T apply_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Pow: return static_cast<T>(std::pow(a, b));
    case BinaryOp::Eq: return a == b ? T(1) : T(0);
    case BinaryOp::ReluBackward: return b > T(0) ? a : T(0);
    case BinaryOp::SigmoidBackward: return a * b * (T(1) - b);
    case BinaryOp::TanhBackward: return a * (T(1) - b * b);
  }
  return a;
}

// Contiguous unary ops as Eigen expressions, so the hot ones (relu, exp) are SIMD.
template <class T>
void unary_contiguous(UnaryOp op, const T* x, T* out, int64_t n) {
  ConstArray<T> in(x, n);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> o(out, n);
  switch (op) {
    case UnaryOp::Neg: o = -in; return;
    case UnaryOp::Exp: o = in.exp(); return;
    case UnaryOp::Log: o = in.log(); return;
    case UnaryOp::Sqrt: o = in.sqrt(); return;
    case UnaryOp::Relu: o = in.max(T(0)); return;
    case UnaryOp::Sigmoid: o = T(1) / (T(1) + (-in).exp()); return;
    case UnaryOp::Tanh: o = in.tanh(); return;
  }
}

template <class T>
void binary_contiguous(BinaryOp op, const T* a, const T* b, T* out, int64_t n) {
  ConstArray<T> x(a, n), y(b, n);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> o(out, n);
  switch (op) {
    case BinaryOp::Add: o = x + y; return;
    case BinaryOp::Sub: o = x - y; return;
    case BinaryOp::Mul: o = x * y; return;
    case BinaryOp::Div: o = x / y; return;
    case BinaryOp::ReluBackward: o = (y > T(0)).select(x, T(0)); return;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = apply_binary(op, a[i], b[i]);
  }
}

// Splits a contiguous range into per-thread chunks, each handled by `chunk(begin, count)`.
template <class Chunk>
void parallel_chunks(int64_t n, Chunk&& chunk) {
  constexpr int64_t kGrain = 1 << 15;
  if (n <= kGrain) {
    chunk(0, n);
    return;
  }
  const int64_t pieces = (n + kGrain - 1) / kGrain;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < pieces; ++p) {
    int64_t begin = p * kGrain;
    chunk(begin, std::min(kGrain, n - begin));
  }
}

}  // namespace

void CpuKernels::unary(UnaryOp op, const Tensor& x, Tensor& out) {
  dispatch_all(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      MINIDL_CHECK(op == UnaryOp::Neg, "unary op needs a floating tensor, got int64");
    }
    const T* in = x.data<T>();
    T* o = out.data<T>();
    if (x.is_contiguous()) {
      if constexpr (std::is_floating_point_v<T>) {
        parallel_chunks(x.numel(), [&](int64_t begin, int64_t n) { unary_contiguous(op, in + begin, o + begin, n); });
      } else {
        for (int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = -in[i];
      }
      return;
    }
    cpu::for_each_row<2>(out.shape(), {&out.strides(), &x.strides()}, [&](auto off, int64_t n, auto inc) {
      for (int64_t i = 0; i < n; ++i) o[off[0] + i * inc[0]] = apply_unary(op, in[off[1] + i * inc[1]]);
    });
  });
}

void CpuKernels::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_all(a.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    T* o = out.data<T>();
    if (a.is_contiguous() && b.is_contiguous()) {
      parallel_chunks(out.numel(), [&](int64_t begin, int64_t n) { binary_contiguous(op, x + begin, y + begin, o + begin, n); });
      return;
    }
    cpu::for_each_row<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()}, [&](auto off, int64_t n, auto inc) {
      const T* xa = x + off[1];
      const T* yb = y + off[2];
      T* od = o + off[0];
      if (inc[1] == 1 && inc[2] == 0) {  // a row against a broadcast scalar: the bias-add shape
        const T s = *yb;
        for (int64_t i = 0; i < n; ++i) od[i] = apply_binary(op, xa[i], s);
      } else if (inc[1] == 1 && inc[2] == 1) {
        for (int64_t i = 0; i < n; ++i) od[i] = apply_binary(op, xa[i], yb[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) od[i * inc[0]] = apply_binary(op, xa[i * inc[1]], yb[i * inc[2]]);
      }
    });
  });
}

}  // namespace minidl
