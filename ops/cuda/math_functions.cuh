#pragma once
// The device formulas of the math and activation members of UnaryOp / BinaryOp (ops/kernels.h) for
// the CUDA elementwise kernels (ops/cuda/elementwise.cu): the CPU's (ops/cpu/math_functions.h),
// with the single-precision function for float. The special functions run in a kernel of their own
// (ops/cuda/special_math.cu).
#include <cuda_runtime.h>

#include <type_traits>

#include "ops/kernels.h"

namespace minidl::cuda_math {

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

#define MINIDL_MATH_FN(name)                                                       \
  __device__ __forceinline__ float m_##name(float x) { return ::name##f(x); }      \
  __device__ __forceinline__ double m_##name(double x) { return ::name(x); }
MINIDL_MATH_FN(sin)
MINIDL_MATH_FN(cos)
MINIDL_MATH_FN(tan)
MINIDL_MATH_FN(asin)
MINIDL_MATH_FN(acos)
MINIDL_MATH_FN(atan)
MINIDL_MATH_FN(sinh)
MINIDL_MATH_FN(cosh)
MINIDL_MATH_FN(tanh)
MINIDL_MATH_FN(floor)
MINIDL_MATH_FN(ceil)
MINIDL_MATH_FN(trunc)
MINIDL_MATH_FN(nearbyint)
MINIDL_MATH_FN(rsqrt)
MINIDL_MATH_FN(log1p)
MINIDL_MATH_FN(expm1)
MINIDL_MATH_FN(log2)
MINIDL_MATH_FN(log10)
MINIDL_MATH_FN(erf)
MINIDL_MATH_FN(asinh)
MINIDL_MATH_FN(acosh)
MINIDL_MATH_FN(atanh)
MINIDL_MATH_FN(exp)
#undef MINIDL_MATH_FN
__device__ __forceinline__ float m_atan2(float a, float b) { return ::atan2f(a, b); }
__device__ __forceinline__ double m_atan2(double a, double b) { return ::atan2(a, b); }
__device__ __forceinline__ float m_fmod(float a, float b) { return ::fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b) { return ::fmod(a, b); }
__device__ __forceinline__ float m_hypot(float a, float b) { return ::hypotf(a, b); }
__device__ __forceinline__ double m_hypot(double a, double b) { return ::hypot(a, b); }
__device__ __forceinline__ float m_copysign(float a, float b) { return ::copysignf(a, b); }
__device__ __forceinline__ double m_copysign(double a, double b) { return ::copysign(a, b); }
__device__ __forceinline__ float m_nextafter(float a, float b) { return ::nextafterf(a, b); }
__device__ __forceinline__ double m_nextafter(double a, double b) { return ::nextafter(a, b); }
__device__ __forceinline__ float m_pow(float a, float b) { return ::powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return ::pow(a, b); }

template <class T>
__device__ __forceinline__ T m_sign(T x) {
  if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(x != T(0));
  } else {
    return static_cast<T>(T(0) < x) - static_cast<T>(x < T(0));  // 0 for NaN and both zeros
  }
}

template <class T>
__device__ __forceinline__ T m_gcd(T a, T b) {  // Euclid's, >= 0: std::gcd has no device form
  if constexpr (std::is_signed_v<T>) {
    a = a < 0 ? static_cast<T>(-a) : a;
    b = b < 0 ? static_cast<T>(-b) : b;
  }
  while (b != 0) {
    const T r = static_cast<T>(a % b);
    a = b;
    b = r;
  }
  return a;
}

template <class T>
__device__ __forceinline__ T m_round(T x, T decimals) {
  if (decimals == T(0)) return m_nearbyint(x);
  const bool negative = decimals < T(0);
  const T ten_pow = m_pow(T(10), negative ? -decimals : decimals);
  return negative ? m_nearbyint(x / ten_pow) * ten_pow : m_nearbyint(x * ten_pow) / ten_pow;
}

template <class T>
__device__ __forceinline__ T m_sigmoid(T x) {
  return T(1) / (T(1) + m_exp(-x));
}

template <class T>
__device__ __forceinline__ T m_clamp06(T x) {  // min(max(x, 0), 6), NaN passing
  return x != x ? x : x < T(0) ? T(0) : x > T(6) ? T(6) : x;
}

template <class T>
__device__ __forceinline__ T math_unary(UnaryOp op, T x, T scalar) {
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case UnaryOp::Neg: return static_cast<T>(-x);
      case UnaryOp::Sign: return m_sign(x);
      case UnaryOp::BitwiseNot: return static_cast<T>(~x);
      default: return x;  // refused by the op
    }
  } else {
    switch (op) {
      case UnaryOp::Sin: return m_sin(x);
      case UnaryOp::Cos: return m_cos(x);
      case UnaryOp::Tan: return m_tan(x);
      case UnaryOp::Asin: return m_asin(x);
      case UnaryOp::Acos: return m_acos(x);
      case UnaryOp::Atan: return m_atan(x);
      case UnaryOp::Sinh: return m_sinh(x);
      case UnaryOp::Cosh: return m_cosh(x);
      case UnaryOp::Floor: return m_floor(x);
      case UnaryOp::Ceil: return m_ceil(x);
      case UnaryOp::Trunc: return m_trunc(x);
      case UnaryOp::Round: return m_round(x, scalar);
      case UnaryOp::Sign: return m_sign(x);
      case UnaryOp::Rsqrt: return m_rsqrt(x);
      case UnaryOp::Reciprocal: return T(1) / x;
      case UnaryOp::Log1p: return m_log1p(x);
      case UnaryOp::Expm1: return m_expm1(x);
      case UnaryOp::Log2: return m_log2(x);
      case UnaryOp::Log10: return m_log10(x);
      case UnaryOp::Erf: return m_erf(x);
      case UnaryOp::Asinh: return m_asinh(x);
      case UnaryOp::Acosh: return m_acosh(x);
      case UnaryOp::Atanh: return m_atanh(x);
      case UnaryOp::Softplus: return x > scalar ? x : m_log1p(m_exp(x));
      case UnaryOp::Elu: return x > T(0) ? x : scalar * m_expm1(x);
      case UnaryOp::Selu: return T(kSeluScale) * (x > T(0) ? x : T(kSeluAlpha) * m_expm1(x));
      case UnaryOp::Mish: return x * m_tanh(m_log1p(m_exp(x)));
      case UnaryOp::Hardsigmoid: return m_clamp06(x + T(3)) / T(6);
      case UnaryOp::Hardswish: return x * m_clamp06(x + T(3)) / T(6);
      default: return x;  // the older ops are handled by the caller
    }
  }
}

template <class T>
__device__ __forceinline__ T math_binary(BinaryOp op, T a, T b, T scalar) {
  switch (op) {
    case BinaryOp::Maximum:
      if constexpr (std::is_floating_point_v<T>) {
        if (a != a) return a;
        if (b != b) return b;
      }
      return a > b ? a : b;
    case BinaryOp::Minimum:
      if constexpr (std::is_floating_point_v<T>) {
        if (a != a) return a;
        if (b != b) return b;
      }
      return a < b ? a : b;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case BinaryOp::Fmod: return b == 0 ? T(0) : static_cast<T>(a % b);  // b == 0 refused by the op
      case BinaryOp::BitwiseAnd: return static_cast<T>(a & b);
      case BinaryOp::BitwiseOr: return static_cast<T>(a | b);
      case BinaryOp::BitwiseXor: return static_cast<T>(a ^ b);
      case BinaryOp::Gcd: return m_gcd(a, b);
      default: return a;  // refused by the op
    }
  } else {
    switch (op) {
      case BinaryOp::Atan2: return m_atan2(a, b);
      case BinaryOp::Hypot: return m_hypot(a, b);
      case BinaryOp::Copysign: return m_copysign(a, b);
      case BinaryOp::Nextafter: return m_nextafter(a, b);
      case BinaryOp::Fmod: return m_fmod(a, b);
      case BinaryOp::SoftplusBackward: return b > scalar ? a : a * m_sigmoid(b);
      case BinaryOp::EluBackward: return b > T(0) ? a : a * scalar * m_exp(b);
      case BinaryOp::SeluBackward: return T(kSeluScale) * (b > T(0) ? a : a * T(kSeluAlpha) * m_exp(b));
      case BinaryOp::MishBackward: {
        const T t = m_tanh(m_log1p(m_exp(b)));
        return a * (t + b * m_sigmoid(b) * (T(1) - t * t));
      }
      case BinaryOp::HardsigmoidBackward: return b > T(-3) && b < T(3) ? a / T(6) : T(0);
      case BinaryOp::HardswishBackward: return b < T(-3) ? T(0) : b <= T(3) ? a * (b / T(3) + T(0.5)) : a;
      default: return a;  // the older ops are handled by the caller
    }
  }
}

}  // namespace minidl::cuda_math
