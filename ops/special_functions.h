#pragma once
// The scalar special functions of UnaryOp (ops/kernels.h), shared by the CPU elementwise kernels and
// the CUDA special-function kernel (ops/cuda/special_math.cu): Eigen's implementations
// (unsupported/Eigen/SpecialFunctions, written for host and device alike), with PyTorch's values
// where the two differ. Eigen's polygamma is also the more accurate: PyTorch's trigamma is off by
// about 1e-9 relative in float64 (5e-10 at x = 1).
#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 20012  // Eigen's defaulted __host__ __device__ constructors
#endif
#include <unsupported/Eigen/SpecialFunctions>
#if defined(__CUDACC__)
#pragma nv_diagnostic pop
#endif

#include "core/half.h"
#include "ops/special_unary.h"

namespace minidl::special_fn {

/// digamma, with PyTorch's poles: -inf at +0 and +inf at -0 (Eigen gives NaN there), NaN at the
/// negative integers.
template <class T>
MINIDL_HOST_DEVICE T digamma(T x) {
  if (x == T(0)) return T(1) / x < T(0) ? T(INFINITY) : T(-INFINITY);
  return Eigen::numext::digamma(x);
}

/// The n-th derivative of digamma (n a whole number >= 0).
template <class T>
MINIDL_HOST_DEVICE T polygamma(T n, T x) {
  return n == T(0) ? digamma(x) : Eigen::numext::polygamma(n, x);
}

/// erfinv on the host, in double (CUDA has its own erfinv). Eigen's inverse normal CDF at
/// (1 - |y|) / 2 gives erfinv(-|y|); 1 - |y| is exact for |y| >= 1/2, and below that, where the
/// rounding of 1 - |y| would cost small arguments their relative precision, two Newton steps on
/// erf restore it (erf is well conditioned there).
inline double erfinv_host(double y) {
  if (!(y >= -1 && y <= 1)) return NAN;  // NaN too
  if (y == 0 || y == 1 || y == -1) return y == 0 ? y : y * INFINITY;
  const double a = -std::fabs(y);
  double x = Eigen::numext::ndtri((1 + a) / 2) * M_SQRT1_2;
  if (a > -0.5)
    for (int step = 0; step < 2; ++step) x -= (std::erf(x) - a) / (M_2_SQRTPI * std::exp(-x * x));
  return y < 0 ? x : -x;
}

/// erfinv: CUDA's own on the device, erfinv_host on the host.
template <class T>
MINIDL_HOST_DEVICE T erfinv(T y) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return ::erfinvf(y);
  else return ::erfinv(y);
#else
  return static_cast<T>(erfinv_host(static_cast<double>(y)));
#endif
}

/// op(x) for the special functions of UnaryOp (is_special_function, ops/special_unary.h); scalar is
/// polygamma's order.
template <class T>
MINIDL_HOST_DEVICE T apply(UnaryOp op, T x, T scalar) {
  switch (op) {
    case UnaryOp::Erfc: return Eigen::numext::erfc(x);
    case UnaryOp::Erfinv: return erfinv(x);
    case UnaryOp::Lgamma: return Eigen::numext::lgamma(x);  // lgamma_r on the host: std::lgamma is not reentrant
    case UnaryOp::Digamma: return digamma(x);
    case UnaryOp::Polygamma: return polygamma(scalar, x);
    case UnaryOp::Ndtri: return Eigen::numext::ndtri(x);
    case UnaryOp::I0: return Eigen::numext::bessel_i0(x);
    case UnaryOp::I0e: return Eigen::numext::bessel_i0e(x);
    case UnaryOp::I1: return Eigen::numext::bessel_i1(x);
    case UnaryOp::I1e: return Eigen::numext::bessel_i1e(x);
    default: return x;  // not a special function
  }
}

}  // namespace minidl::special_fn
