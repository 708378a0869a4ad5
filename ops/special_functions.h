#pragma once
// The scalar special functions of UnaryOp (ops/kernels.h), shared by the CPU elementwise kernels and
// the CUDA special-function kernel (ops/cuda/special_math.cu): Eigen's implementations
// (unsupported/Eigen/SpecialFunctions, written for host and device alike), with PyTorch's values
// where the two differ. Eigen's polygamma is also the more accurate: PyTorch's trigamma is off by
// about 1e-9 relative in float64 (5e-10 at x = 1).
#include <cmath>

#if defined(__CUDACC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 20012  // Eigen's defaulted __host__ __device__ constructors
#endif
#include <unsupported/Eigen/SpecialFunctions>
#if defined(__CUDACC__)
#pragma nv_diagnostic pop
#endif

#include "core/half.h"

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

/// log|gamma(x)|; Eigen calls the reentrant lgamma_r on the host, which std::lgamma is not.
template <class T>
MINIDL_HOST_DEVICE T lgamma(T x) {
  return Eigen::numext::lgamma(x);
}

template <class T>
MINIDL_HOST_DEVICE T erfc(T x) {
  return Eigen::numext::erfc(x);
}

template <class T>
MINIDL_HOST_DEVICE T ndtri(T p) {
  return Eigen::numext::ndtri(p);
}

template <class T>
MINIDL_HOST_DEVICE T i0(T x) {
  return Eigen::numext::bessel_i0(x);
}
template <class T>
MINIDL_HOST_DEVICE T i0e(T x) {
  return Eigen::numext::bessel_i0e(x);
}
template <class T>
MINIDL_HOST_DEVICE T i1(T x) {
  return Eigen::numext::bessel_i1(x);
}
template <class T>
MINIDL_HOST_DEVICE T i1e(T x) {
  return Eigen::numext::bessel_i1e(x);
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

}  // namespace minidl::special_fn
