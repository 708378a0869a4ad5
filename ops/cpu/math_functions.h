#pragma once
// The scalar formulas of the math and activation members of UnaryOp / BinaryOp (ops/kernels.h) for
// the CPU elementwise kernels (ops/cpu/elementwise.cpp), as PyTorch computes them. Integral T takes
// Neg, Sign and the bitwise ops; the op checks the rest before a kernel runs.
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>

#include "ops/kernels.h"
#include "ops/special_functions.h"

namespace minidl::cpu {

inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;

template <class T>
T sign_of(T x) {
  return static_cast<T>(T(0) < x) - static_cast<T>(x < T(0));  // 0 for NaN and both zeros
}

// torch.round(x, decimals): the scale is applied by multiplying for positive decimals and by dividing
// for negative ones, so that 10^-d, which has no exact binary value, never appears.
template <class T>
T round_decimals(T x, T decimals) {
  if (decimals == T(0)) return std::nearbyint(x);
  const bool negative = decimals < T(0);
  const T ten_pow = static_cast<T>(std::pow(T(10), negative ? -decimals : decimals));
  return negative ? std::nearbyint(x / ten_pow) * ten_pow : std::nearbyint(x * ten_pow) / ten_pow;
}

template <class T>
T sigmoid_of(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
T math_unary(UnaryOp op, T x, T scalar) {
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case UnaryOp::Neg: return static_cast<T>(-x);
      case UnaryOp::Sign: return sign_of(x);
      case UnaryOp::BitwiseNot: return static_cast<T>(~x);
      default: return x;  // refused by the op
    }
  } else {
    if (is_special_function(op)) return special_fn::apply(op, x, scalar);
    switch (op) {
      case UnaryOp::Sin: return std::sin(x);
      case UnaryOp::Cos: return std::cos(x);
      case UnaryOp::Tan: return std::tan(x);
      case UnaryOp::Asin: return std::asin(x);
      case UnaryOp::Acos: return std::acos(x);
      case UnaryOp::Atan: return std::atan(x);
      case UnaryOp::Sinh: return std::sinh(x);
      case UnaryOp::Cosh: return std::cosh(x);
      case UnaryOp::Floor: return std::floor(x);
      case UnaryOp::Ceil: return std::ceil(x);
      case UnaryOp::Trunc: return std::trunc(x);
      case UnaryOp::Round: return round_decimals(x, scalar);
      case UnaryOp::Sign: return sign_of(x);
      case UnaryOp::Rsqrt: return T(1) / std::sqrt(x);
      case UnaryOp::Reciprocal: return T(1) / x;
      case UnaryOp::Log1p: return std::log1p(x);
      case UnaryOp::Expm1: return std::expm1(x);
      case UnaryOp::Log2: return std::log2(x);
      case UnaryOp::Log10: return std::log10(x);
      case UnaryOp::Erf: return std::erf(x);
      case UnaryOp::Asinh: return std::asinh(x);
      case UnaryOp::Acosh: return std::acosh(x);
      case UnaryOp::Atanh: return std::atanh(x);
      case UnaryOp::Softplus: return x > scalar ? x : std::log1p(std::exp(x));
      case UnaryOp::Elu: return x > T(0) ? x : scalar * std::expm1(x);
      case UnaryOp::Selu: return T(kSeluScale) * (x > T(0) ? x : T(kSeluAlpha) * std::expm1(x));
      case UnaryOp::Mish: return x * std::tanh(std::log1p(std::exp(x)));
      case UnaryOp::Hardsigmoid: return std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
      case UnaryOp::Hardswish: return x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
      default: return x;  // the older ops are handled by the caller
    }
  }
}

template <class T>
T math_binary(BinaryOp op, T a, T b, T scalar) {
  switch (op) {
    case BinaryOp::Maximum:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
      }
      return a > b ? a : b;
    case BinaryOp::Minimum:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
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
      case BinaryOp::Gcd: return static_cast<T>(std::gcd(a, b));
      default: return a;  // refused by the op
    }
  } else {
    switch (op) {
      case BinaryOp::Atan2: return std::atan2(a, b);
      case BinaryOp::Fmod: return std::fmod(a, b);
      case BinaryOp::Hypot: return std::hypot(a, b);
      case BinaryOp::Copysign: return std::copysign(a, b);
      case BinaryOp::Nextafter: return std::nextafter(a, b);
      case BinaryOp::SoftplusBackward: return b > scalar ? a : a * sigmoid_of(b);
      case BinaryOp::EluBackward: return b > T(0) ? a : a * scalar * std::exp(b);
      case BinaryOp::SeluBackward: return T(kSeluScale) * (b > T(0) ? a : a * T(kSeluAlpha) * std::exp(b));
      case BinaryOp::MishBackward: {
        const T t = std::tanh(std::log1p(std::exp(b)));
        return a * (t + b * sigmoid_of(b) * (T(1) - t * t));
      }
      case BinaryOp::HardsigmoidBackward: return b > T(-3) && b < T(3) ? a / T(6) : T(0);
      case BinaryOp::HardswishBackward: return b < T(-3) ? T(0) : b <= T(3) ? a * (b / T(3) + T(0.5)) : a;
      default: return a;  // the older ops are handled by the caller
    }
  }
}

}  // namespace minidl::cpu
