#pragma once
// GELU and its derivative on the device, exact (erf), tanh-approximated, and over 16-bit storage:
// the formulas of the elementwise kernels (elementwise.cu), shared with the products that apply the
// GELU in their epilogue (linear_gelu_sm90.cu), so both give the same bits.
#include "ops/cuda/common.cuh"

namespace minidl::cuda {

// GELU (exact and tanh-approximated) and its derivatives, the formulas of the CPU kernels.
__device__ __forceinline__ float d_erf(float x) { return erff(x); }
__device__ __forceinline__ double d_erf(double x) { return erf(x); }
constexpr double kSqrtHalf = 0.70710678118654752440;      // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;    // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;   // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;

template <class T>
__device__ __forceinline__ T d_gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + d_tanh(T(kSqrt2OverPi) * (x + T(kGeluTanhCubic) * x * x * x)));
}
template <class T>
__device__ __forceinline__ T d_gelu_grad(T x) {
  return T(0.5) * (T(1) + d_erf(x * T(kSqrtHalf))) + x * d_exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
}
template <class T>
__device__ __forceinline__ T d_gelu_tanh_grad(T x) {
  const T t = d_tanh(T(kSqrt2OverPi) * (x + T(kGeluTanhCubic) * x * x * x));
  return T(0.5) * (T(1) + t) +
         T(0.5) * x * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * kGeluTanhCubic) * x * x);
}
// GELU over 16-bit storage: Phi(x) from erfc(z) = t exp(P(t) - z^2), z = |x| / sqrt(2),
// t = 1 / (1 + z / 2), P of degree 8 (scripts/fit_gelu_cdf.py; 2.5e-7 relative to erfc for z up to 10),
// with the reciprocal and exp2 of the special-function unit. erff costs about twice the instructions
// (two branches, and a warp of mixed signs runs both): GELU over bf16 [16384, 1536] was bound by its
// arithmetic. Phi of a negative x comes straight from erfc, not from 1 + erf(x), whose cancellation
// costs float32 most of its digits in the tail: in a float32 emulation (scripts/fit_gelu_cdf.py)
// over normal inputs of standard deviation 2, 0.002% of the bf16 outputs differ from the correctly
// rounded GELU, against 1.2% with 0.5 x (1 + erff(x / sqrt 2)). float32 and float64 keep erf,
// PyTorch's formula.
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float exp2_approx(float x) {  // 0 below 2^-126
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
constexpr double kLog2e = 1.44269504088896340736;
constexpr double kLn2 = 0.69314718055994530942;

__device__ __forceinline__ float normal_cdf_16bit(float x) {
  // The fit's coefficients, times log2(e), with ln 2 taken from the first: then
  // Phi(-|x|) = erfc(z) / 2 = t 2^(p(t) - log2(e) z^2).
  constexpr float kFit[9] = {float((-1.265185669e+00 - kLn2) * kLog2e), float(9.928496493e-01 * kLog2e),
                             float(4.402657229e-01 * kLog2e),           float(-2.403593379e-01 * kLog2e),
                             float(8.628826987e-01 * kLog2e),           float(-1.797548562e+00 * kLog2e),
                             float(1.489086882e+00 * kLog2e),           float(-5.620479952e-01 * kLog2e),
                             float(8.005644403e-02 * kLog2e)};
  const float t = rcp_approx(fmaf(fabsf(x), float(0.5 * kSqrtHalf), 1.f));
  float p = kFit[8];
#pragma unroll
  for (int k = 7; k >= 0; --k) p = fmaf(p, t, kFit[k]);
  const float e = exp2_approx(fmaf(x * x, float(-0.5 * kLog2e), p));
  return x >= 0.f ? fmaf(-t, e, 1.f) : t * e;  // Phi(-|x|) = t e; NaN takes the second: NaN
}
__device__ __forceinline__ float normal_density_16bit(float x) {
  return exp2_approx(x * x * float(-0.5 * kLog2e)) * float(kInvSqrt2Pi);
}
__device__ __forceinline__ float gelu_16bit(float x) { return x * normal_cdf_16bit(x); }
__device__ __forceinline__ float gelu_grad_16bit(float x) {
  return fmaf(x, normal_density_16bit(x), normal_cdf_16bit(x));
}

// gelu(x) and g * gelu'(x) from one erf (or tanh, or 16-bit storage's CDF): the formulas of
// unary_one and binary_one term for term, so the output has the forward's bits. Sharing the erf
// matters: with two, the backward of bf16 [16384, 1536] was bound by its arithmetic (65 us on an
// H200, against 52 for Triton's).
template <bool kTanh, bool kSixteenBit = false, class F>
__device__ __forceinline__ void gelu_with_grad(F x, F& y, F& g) {
  if constexpr (kSixteenBit && !kTanh) {
    const float cdf = normal_cdf_16bit(x);
    y = x * cdf;
    g *= fmaf(x, normal_density_16bit(x), cdf);
  } else if constexpr (kTanh) {
    const F t = d_tanh(F(kSqrt2OverPi) * (x + F(kGeluTanhCubic) * x * x * x));
    y = F(0.5) * x * (F(1) + t);
    g *= F(0.5) * (F(1) + t) + F(0.5) * x * (F(1) - t * t) * F(kSqrt2OverPi) * (F(1) + F(3 * kGeluTanhCubic) * x * x);
  } else {
    const F e = d_erf(x * F(kSqrtHalf));
    y = F(0.5) * x * (F(1) + e);
    g *= F(0.5) * (F(1) + e) + x * d_exp(F(-0.5) * x * x) * F(kInvSqrt2Pi);
  }
}

}  // namespace minidl::cuda
