// Elementwise kernels: a flat grid-stride loop when every operand is contiguous, otherwise one
// strided kernel that decodes each output index into operand offsets (broadcast axes have stride 0).
// The op is a runtime switch, uniform across the grid, so one kernel per dtype serves every op.
#include "ops/cuda/common.cuh"
#include "ops/cuda/math_functions.cuh"
#include "ops/cuda/special_math.h"

namespace minidl {

namespace {

using namespace cuda;

// GELU (exact and tanh-approximated) and SiLU derivatives, the formulas of the CPU kernels.
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

template <class T>
__device__ __forceinline__ T d_silu_grad(T x) {
  const T s = T(1) / (T(1) + d_exp(-x));
  return s * (T(1) + x * (T(1) - s));
}

template <class T>
__device__ __forceinline__ T apply_unary(UnaryOp op, T x, T scalar) {
  if constexpr (std::is_integral_v<T>) {
    return cuda_math::math_unary(op, x, scalar);  // Neg, Sign, BitwiseNot (checked on the host)
  } else {
    switch (op) {
      case UnaryOp::Neg: return -x;
      case UnaryOp::Exp: return d_exp(x);
      case UnaryOp::Log: return d_log(x);
      case UnaryOp::Sqrt: return d_sqrt(x);
      case UnaryOp::Relu: return x > T(0) || d_isnan(x) ? x : T(0);  // NaN passes, as in PyTorch
      case UnaryOp::Sigmoid: return T(1) / (T(1) + d_exp(-x));
      case UnaryOp::Tanh: return d_tanh(x);
      case UnaryOp::LeakyRelu: return x > T(0) ? x : x * scalar;
      case UnaryOp::Gelu: return T(0.5) * x * (T(1) + d_erf(x * T(kSqrtHalf)));
      case UnaryOp::GeluTanh: return d_gelu_tanh(x);
      case UnaryOp::Silu: return x / (T(1) + d_exp(-x));
      default: return cuda_math::math_unary(op, x, scalar);
    }
    return x;
  }
}

// Python's // and %, as the CPU kernels compute them (ops/cpu/elementwise.cpp).
template <class T>
__device__ __forceinline__ T d_floor_divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return T(0);  // refused on the host; no trap on the GPU
    const T q = a / b;
    if constexpr (std::is_unsigned_v<T>) return q;  // no signs to differ
    else return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  } else {
    if (b == T(0)) return a / b;
    T mod = fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div == T(0)) return copysign(T(0), a / b);
    const T floored = floor(div);
    return div - floored > T(0.5) ? floored + T(1) : floored;
  }
}
template <class T>
__device__ __forceinline__ T d_remainder(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return T(0);
    const T r = a % b;
    if constexpr (std::is_unsigned_v<T>) return r;
    else return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else {
    const T r = fmod(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
  }
}

template <class T>
__device__ __forceinline__ T apply_binary(BinaryOp op, T a, T b, T scalar) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div:
      if constexpr (std::is_integral_v<T>) return b == 0 ? T(0) : a / b;  // no trap on the GPU
      else return a / b;
    case BinaryOp::Pow:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(pow(static_cast<double>(a), static_cast<double>(b)));
      else return d_pow(a, b);
    case BinaryOp::FloorDivide: return d_floor_divide(a, b);
    case BinaryOp::Remainder: return d_remainder(a, b);
    case BinaryOp::Eq: return a == b ? T(1) : T(0);
    case BinaryOp::ReluBackward: return b > T(0) ? a : T(0);
    case BinaryOp::SigmoidBackward: return a * b * (T(1) - b);
    case BinaryOp::TanhBackward: return a * (T(1) - b * b);
    case BinaryOp::LeakyReluBackward: return b > T(0) ? a : a * scalar;
    case BinaryOp::GeluBackward:
      if constexpr (std::is_floating_point_v<T>) return a * d_gelu_grad(b);
      break;
    case BinaryOp::GeluTanhBackward:
      if constexpr (std::is_floating_point_v<T>) return a * d_gelu_tanh_grad(b);
      break;
    case BinaryOp::SiluBackward:
      if constexpr (std::is_floating_point_v<T>) return a * d_silu_grad(b);
      break;
    default: return cuda_math::math_binary(op, a, b, scalar);
  }
  return a;
}

// Every kernel computes in compute_t<T> (float for the 16-bit types) and rounds once at the store.
template <class T>
using C = compute_t<T>;

template <class T>
__device__ __forceinline__ T unary_one(UnaryOp op, T x, C<T> scalar) {
  if constexpr (is_16bit_float_v<T>)
    if (op == UnaryOp::Gelu) return static_cast<T>(gelu_16bit(static_cast<float>(x)));
  return static_cast<T>(apply_unary<C<T>>(op, static_cast<C<T>>(x), scalar));
}
template <class T>
__device__ __forceinline__ T binary_one(BinaryOp op, T a, T b, C<T> scalar) {
  if constexpr (is_16bit_float_v<T>)
    if (op == BinaryOp::GeluBackward)
      return static_cast<T>(static_cast<float>(a) * gelu_grad_16bit(static_cast<float>(b)));
  return static_cast<T>(apply_binary<C<T>>(op, static_cast<C<T>>(a), static_cast<C<T>>(b), scalar));
}

template <class T>
__global__ void unary_flat(UnaryOp op, const T* x, T* out, int64_t n, C<T> scalar) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = unary_one(op, x[i], scalar);
}

// The op as a template constant (kOp >= 0) or read at run time (kOp = -1). The hot ops of a
// transformer's MLP (GELU and its gradient) get kernels of their own, which hold only their formula:
// the run-time kernels switch over every op for each element (on an H100, GELU over bf16
// [16384, 1536] took 71 us forward and 68 backward, several times its memory time).
template <int kOp, class Op>
__device__ __forceinline__ Op op_of(Op op) {
  return kOp < 0 ? op : static_cast<Op>(kOp);
}

// Calls launch(std::integral_constant<int, K>{}) with K the op for the ops that have their own
// kernels, else -1.
template <class Launch>
void with_constant_op(UnaryOp op, Launch&& launch) {
  switch (op) {
    case UnaryOp::Gelu: return launch(std::integral_constant<int, int(UnaryOp::Gelu)>{});
    case UnaryOp::GeluTanh: return launch(std::integral_constant<int, int(UnaryOp::GeluTanh)>{});
    default: return launch(std::integral_constant<int, -1>{});
  }
}
template <class Launch>
void with_constant_op(BinaryOp op, Launch&& launch) {
  switch (op) {
    case BinaryOp::GeluBackward: return launch(std::integral_constant<int, int(BinaryOp::GeluBackward)>{});
    case BinaryOp::GeluTanhBackward: return launch(std::integral_constant<int, int(BinaryOp::GeluTanhBackward)>{});
    default: return launch(std::integral_constant<int, -1>{});
  }
}

// 16-bit contiguous operands, V elements (16 bytes) per load and store; the caller does the tail.
// An op of its own (kOp >= 0: GELU) takes two packs a thread, i and i + stride, both loaded before
// either is computed.
template <int kOp>
constexpr int kPacksPerThread = kOp >= 0 ? 2 : 1;

template <class T, int V, int kOp = -1>
__global__ void unary_flat_vec(UnaryOp op_arg, const T* x, T* out, int64_t packs, C<T> scalar) {
  const UnaryOp op = op_of<kOp>(op_arg);
  constexpr int P = kPacksPerThread<kOp>;
  const auto* in = reinterpret_cast<const VecPack<T, V>*>(x);
  auto* o = reinterpret_cast<VecPack<T, V>*>(out);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs; i += P * stride) {
    VecPack<T, V> p[P];
#pragma unroll
    for (int j = 0; j < P; ++j)
      if (i + j * stride < packs) p[j] = in[i + j * stride];
#pragma unroll
    for (int j = 0; j < P; ++j) {
      if (i + j * stride >= packs) continue;
#pragma unroll
      for (int k = 0; k < V; ++k) p[j].v[k] = unary_one(op, p[j].v[k], scalar);
      o[i + j * stride] = p[j];
    }
  }
}

template <class T, class Index>
__global__ void unary_strided(UnaryOp op, const T* x, T* out, Strided<2> m, Index n, C<T> scalar) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index off[2];
    strided_offsets(m, i, off);
    out[off[0]] = unary_one(op, x[off[1]], scalar);
  }
}

template <class T>
__global__ void binary_flat(BinaryOp op, const T* a, const T* b, T* out, int64_t n, C<T> scalar) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = binary_one(op, a[i], b[i], scalar);
}

template <class T, int V, int kOp = -1>
__global__ void binary_flat_vec(BinaryOp op_arg, const T* a, const T* b, T* out, int64_t packs, C<T> scalar) {
  const BinaryOp op = op_of<kOp>(op_arg);
  const auto* pa = reinterpret_cast<const VecPack<T, V>*>(a);
  const auto* pb = reinterpret_cast<const VecPack<T, V>*>(b);
  auto* o = reinterpret_cast<VecPack<T, V>*>(out);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs; i += int64_t(gridDim.x) * blockDim.x) {
    VecPack<T, V> x = pa[i];
    const VecPack<T, V> y = pb[i];
#pragma unroll
    for (int k = 0; k < V; ++k) x.v[k] = binary_one(op, x.v[k], y.v[k], scalar);
    o[i] = x;
  }
}

template <class T, class Index>
__global__ void binary_strided(BinaryOp op, const T* a, const T* b, T* out, Strided<3> m, Index n, C<T> scalar) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index off[3];
    strided_offsets(m, i, off);
    out[off[0]] = binary_one(op, a[off[1]], b[off[2]], scalar);
  }
}

// A broadcast walk (the bias add: a contiguous x plus a bias repeated along rows or channels) for
// 16-bit and float32 operands, V (8, 4 or 2) consecutive innermost elements per thread: an operand that steps by
// 1 along the innermost dim is read as one VecPack, one that steps by 0 (broadcast) as one value.
// The host checks that the innermost size is a multiple of V and that each stepping operand's packs
// are aligned.
template <class T, int V, class Index>
__global__ void binary_strided_vec(BinaryOp op, const T* a, const T* b, T* out, Strided<3> m, Index packs,
                                   C<T> scalar) {
  const bool a_steps = m.stride[1][0] == 1, b_steps = m.stride[2][0] == 1;
  for (Index p = blockIdx.x * Index(blockDim.x) + threadIdx.x; p < packs; p += Index(gridDim.x) * blockDim.x) {
    Index off[3];
    strided_offsets(m, p * Index(V), off);
    VecPack<T, V> x, y;
    if (a_steps) {
      x = *reinterpret_cast<const VecPack<T, V>*>(a + off[1]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) x.v[k] = a[off[1]];
    }
    if (b_steps) {
      y = *reinterpret_cast<const VecPack<T, V>*>(b + off[2]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) y.v[k] = b[off[2]];
    }
#pragma unroll
    for (int k = 0; k < V; ++k) x.v[k] = binary_one(op, x.v[k], y.v[k], scalar);
    *reinterpret_cast<VecPack<T, V>*>(out + off[0]) = x;
  }
}

// Whether binary_strided_vec<V> can run this walk (see there).
template <class T>
bool vectorizable(const Strided<3>& m, int V, const T* a, const T* b, const T* out) {
  if (m.rank == 0 || m.size[0] % V != 0 || m.stride[0][0] != 1) return false;
  const T* base[3] = {out, a, b};
  for (int k = 0; k < 3; ++k) {
    const int64_t step = m.stride[k][0];
    if (step == 0) continue;
    if (step != 1 || !aligned_to(int64_t(sizeof(T)) * V, {base[k]})) return false;
    for (int d = 1; d < m.rank; ++d)
      if (m.stride[k][d] % V != 0) return false;
  }
  return true;
}

constexpr int kVec16 = 8;  // 16-bit elements per 16-byte VecPack

// Runs binary_strided_vec<V> where the walk allows it (true), else leaves it to the caller (false).
template <class T, int V>
bool binary_strided_vec_if(BinaryOp op, const T* a, const T* b, T* out, const Strided<3>& m, int64_t n,
                           compute_t<T> scalar, cudaStream_t stream) {
  if (!vectorizable(m, V, a, b, out)) return false;
  const int64_t packs = n / V;
  if (fits_32bit(m, n)) {
    const auto count = static_cast<uint32_t>(packs);
    binary_strided_vec<T, V, uint32_t><<<blocks_for(packs), kThreads, 0, stream>>>(op, a, b, out, m, count, scalar);
  } else {
    binary_strided_vec<T, V, int64_t><<<blocks_for(packs), kThreads, 0, stream>>>(op, a, b, out, m, packs, scalar);
  }
  CUDA_LAUNCH_CHECK(binary_strided_vec);
  return true;
}

// `out` may alias `x` or `a` (in-place ops): each thread reads its element before it writes the same
// element, so the pointers carry no __restrict__ and aliasing stays correct.

// out = wide + float(narrow), 8 elements a thread (16 bytes of narrow, 32 of wide and out).
template <class N>
__global__ void add_widening_vec(const float* __restrict__ wide, const N* __restrict__ narrow, float* __restrict__ out,
                                 int64_t packs) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs; i += int64_t(gridDim.x) * blockDim.x) {
    const VecPack<N, 8> n = reinterpret_cast<const VecPack<N, 8>*>(narrow)[i];
    const float4* w = reinterpret_cast<const float4*>(wide) + 2 * i;
    float4 lo = w[0], hi = w[1];
    lo.x += static_cast<float>(n.v[0]), lo.y += static_cast<float>(n.v[1]);
    lo.z += static_cast<float>(n.v[2]), lo.w += static_cast<float>(n.v[3]);
    hi.x += static_cast<float>(n.v[4]), hi.y += static_cast<float>(n.v[5]);
    hi.z += static_cast<float>(n.v[6]), hi.w += static_cast<float>(n.v[7]);
    float4* o = reinterpret_cast<float4*>(out) + 2 * i;
    o[0] = lo, o[1] = hi;
  }
}

template <class N>
__global__ void add_widening_flat(const float* wide, const N* narrow, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = wide[i] + static_cast<float>(narrow[i]);
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

template <class T, int V, bool kTanh>
__device__ __forceinline__ void gelu_with_grad_pack(const VecPack<T, V>& x, VecPack<T, V>& g, VecPack<T, V>& y) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    C<T> yk, gk = static_cast<C<T>>(g.v[k]);
    gelu_with_grad<kTanh, is_16bit_float_v<T>>(static_cast<C<T>>(x.v[k]), yk, gk);
    y.v[k] = static_cast<T>(yk);
    g.v[k] = static_cast<T>(gk);
  }
}

// output = gelu(input), grad *= gelu'(input) (grad = gelu'(input) where kGradIsOne: the derivative
// itself, grad not read): V elements a thread (16 bytes of each operand), the input read once for
// both, and two packs a thread in flight (i and i + stride). The caller does the tail.
template <class T, int V, bool kTanh, bool kGradIsOne = false>
__global__ void gelu_backward_with_output_vec(const T* __restrict__ input, T* __restrict__ grad,
                                              T* __restrict__ output, int64_t packs) {
  const auto* in = reinterpret_cast<const VecPack<T, V>*>(input);
  auto* gr = reinterpret_cast<VecPack<T, V>*>(grad);
  auto* out = reinterpret_cast<VecPack<T, V>*>(output);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const auto grad_at = [&](int64_t i) {
    if constexpr (kGradIsOne) {
      VecPack<T, V> one;
#pragma unroll
      for (int k = 0; k < V; ++k) one.v[k] = T(1);
      return one;
    } else {
      return gr[i];
    }
  };
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs; i += 2 * stride) {
    const int64_t j = i + stride;
    const bool second = j < packs;
    const VecPack<T, V> x0 = in[i];
    VecPack<T, V> g0 = grad_at(i), x1, g1, y0, y1;
    if (second) x1 = in[j], g1 = grad_at(j);
    gelu_with_grad_pack<T, V, kTanh>(x0, g0, y0);
    out[i] = y0;
    gr[i] = g0;
    if (second) {
      gelu_with_grad_pack<T, V, kTanh>(x1, g1, y1);
      out[j] = y1;
      gr[j] = g1;
    }
  }
}

template <class T, bool kTanh, bool kGradIsOne = false>
__global__ void gelu_backward_with_output_flat(const T* input, T* grad, T* output, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    C<T> y, g = kGradIsOne ? C<T>(1) : static_cast<C<T>>(grad[i]);
    gelu_with_grad<kTanh, is_16bit_float_v<T>>(static_cast<C<T>>(input[i]), y, g);
    output[i] = static_cast<T>(y);
    grad[i] = static_cast<T>(g);
  }
}

// gelu_backward_with_output's kernels on `stream`, or gelu_with_derivative's (grad_is_one).
void launch_gelu_with_grad(const char* op, bool tanh, bool grad_is_one, const Tensor& input, Tensor& grad,
                           Tensor& output, cudaStream_t stream_) {
  MINIDL_CHECK(input.is_contiguous() && grad.is_contiguous() && output.is_contiguous() &&
                   grad.shape() == input.shape() && output.shape() == input.shape() &&
                   grad.dtype() == input.dtype() && output.dtype() == input.dtype(),
               op, ": expected contiguous tensors of one shape and dtype, got ", input.shape(), " ", input.dtype(),
               ", ", grad.shape(), " ", grad.dtype(), ", ", output.shape(), " ", output.dtype());
  const int64_t n = input.numel();
  if (n == 0) return;
  dispatch_floating_and_half(input.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = 16 / static_cast<int>(sizeof(T));
    const T* x = ptr<const T>(input);
    T* g = ptr<T>(grad);
    T* y = ptr<T>(output);
    auto launch = [&](auto approximate, auto one) {
      constexpr bool kTanh = decltype(approximate)::value, kOne = decltype(one)::value;
      int64_t done = 0;
      if (aligned_to(16, {x, g, y}) && n >= V) {
        const int64_t packs = n / V;
        gelu_backward_with_output_vec<T, V, kTanh, kOne>
            <<<blocks_for((packs + 1) / 2), kThreads, 0, stream_>>>(x, g, y, packs);
        CUDA_LAUNCH_CHECK(gelu_backward_with_output_vec);
        done = packs * V;
      }
      if (done < n) {
        gelu_backward_with_output_flat<T, kTanh, kOne>
            <<<blocks_for(n - done), kThreads, 0, stream_>>>(x + done, g + done, y + done, n - done);
        CUDA_LAUNCH_CHECK(gelu_backward_with_output_flat);
      }
    };
    if (tanh && grad_is_one) launch(std::true_type{}, std::true_type{});
    else if (tanh) launch(std::true_type{}, std::false_type{});
    else if (grad_is_one) launch(std::false_type{}, std::true_type{});
    else launch(std::false_type{}, std::false_type{});
  });
}

}  // namespace

void CudaKernels::gelu_backward_with_output(bool tanh, const Tensor& input, Tensor& grad, Tensor& output) {
  cuda::DeviceGuard guard(device_);
  launch_gelu_with_grad("gelu_backward_with_output", tanh, false, input, grad, output, stream_);
}

void CudaKernels::gelu_with_derivative(bool tanh, const Tensor& input, Tensor& output, Tensor& derivative) {
  cuda::DeviceGuard guard(device_);
  launch_gelu_with_grad("gelu_with_derivative", tanh, true, input, derivative, output, stream_);
}

Tensor CudaKernels::add_widening(const Tensor& wide, const Tensor& narrow) {
  const int64_t n = wide.numel();
  if (wide.dtype() != kFloat32 || !is_reduced_floating(narrow.dtype()) || narrow.shape() != wide.shape() ||
      !wide.is_contiguous() || !narrow.is_contiguous())
    return Tensor();
  Tensor out = Tensor::empty(wide.shape(), kFloat32, wide.device());
  if (n == 0) return out;
  cuda::DeviceGuard guard(device_);
  dispatch_floating_and_half(narrow.dtype(), "add_widening", [&](auto tag) {
    using N = decltype(tag);
    if constexpr (is_16bit_float_v<N>) {
      const float* w = ptr<const float>(wide);
      const N* a = ptr<const N>(narrow);
      float* o = ptr<float>(out);
      int64_t done = 0;
      if (aligned_to(32, {w, o}) && aligned_to(16, {a})) {
        const int64_t packs = n / 8;
        if (packs > 0) {
          add_widening_vec<N><<<blocks_for(packs), kThreads, 0, stream_>>>(w, a, o, packs);
          CUDA_LAUNCH_CHECK(add_widening_vec);
        }
        done = packs * 8;
      }
      if (done < n) {
        add_widening_flat<N><<<blocks_for(n - done), kThreads, 0, stream_>>>(w + done, a + done, o + done, n - done);
        CUDA_LAUNCH_CHECK(add_widening_flat);
      }
    }
  });
  return out;
}

void CudaKernels::unary(UnaryOp op, const Tensor& x, Tensor& out, double scalar_arg) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  if (is_special_function(op)) {
    Tensor src = x;
    if (!x.is_contiguous()) {
      src = Tensor::empty(x.shape(), x.dtype(), x.device());
      copy(x, src);
    }
    return cuda::special_unary(op, src, out, scalar_arg, stream_);
  }
  dispatch_all_and_half(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      MINIDL_CHECK(op == UnaryOp::Neg || op == UnaryOp::Sign || op == UnaryOp::BitwiseNot,
                   "unary op needs a floating tensor, got ", x.dtype());
    }
    const T* in = ptr<const T>(x);
    T* o = ptr<T>(out);
    const C<T> scalar = static_cast<C<T>>(scalar_arg);
    if (x.is_contiguous() && out.is_contiguous()) {
      int64_t done = 0;
      if constexpr (is_16bit_float_v<T>) {
        if (aligned_to(16, {in, o}) && n >= kVec16) {
          const int64_t packs = n / kVec16;
          with_constant_op(op, [&](auto k) {
            constexpr int P = kPacksPerThread<k()>;
            unary_flat_vec<T, kVec16, k()>
                <<<blocks_for((packs + P - 1) / P), kThreads, 0, stream_>>>(op, in, o, packs, scalar);
            CUDA_LAUNCH_CHECK(unary_flat_vec);
          });
          done = packs * kVec16;
          if (done == n) return;
        }
      }
      unary_flat<T><<<blocks_for(n - done), kThreads, 0, stream_>>>(op, in + done, o + done, n - done, scalar);
      CUDA_LAUNCH_CHECK(unary_flat);
      return;
    }
    Strided<2> m = make_strided<2>(out.shape(), {&out.strides(), &x.strides()});
    if (fits_32bit(m, n)) {
      unary_strided<T, uint32_t><<<blocks_for(n), kThreads, 0, stream_>>>(op, in, o, m, static_cast<uint32_t>(n),
                                                                          scalar);
    } else {
      unary_strided<T, int64_t><<<blocks_for(n), kThreads, 0, stream_>>>(op, in, o, m, n, scalar);
    }
    CUDA_LAUNCH_CHECK(unary_strided);
  });
}

void CudaKernels::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, double scalar_arg) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(device_);
  dispatch_all_and_half(a.dtype(), "binary", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = ptr<const T>(a);
    const T* pb = ptr<const T>(b);
    T* o = ptr<T>(out);
    const C<T> scalar = static_cast<C<T>>(scalar_arg);
    if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous() && a.numel() == n && b.numel() == n) {
      int64_t done = 0;
      // 16 bytes a load for the 16-bit types and float32 (a transformer's float32 residual-gradient
      // sums, [16384, 384]: 28 us on an H100 at one element a thread).
      if constexpr (is_16bit_float_v<T> || std::is_same_v<T, float>) {
        constexpr int V = 16 / static_cast<int>(sizeof(T));
        if (aligned_to(16, {pa, pb, o}) && n >= V) {
          const int64_t packs = n / V;
          with_constant_op(op, [&](auto k) {
            binary_flat_vec<T, V, k()><<<blocks_for(packs), kThreads, 0, stream_>>>(op, pa, pb, o, packs, scalar);
            CUDA_LAUNCH_CHECK(binary_flat_vec);
          });
          done = packs * V;
          if (done == n) return;
        }
      }
      binary_flat<T><<<blocks_for(n - done), kThreads, 0, stream_>>>(op, pa + done, pb + done, o + done, n - done,
                                                                     scalar);
      CUDA_LAUNCH_CHECK(binary_flat);
      return;
    }
    Strided<3> m = make_strided<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()});
    if constexpr (is_16bit_float_v<T>) {
      // 16, 8 or 4 bytes a load: the widest that the innermost size and the strides allow (an
      // image plane of 26 x 26 takes 4 elements).
      if (binary_strided_vec_if<T, kVec16>(op, pa, pb, o, m, n, scalar, stream_) ||
          binary_strided_vec_if<T, 4>(op, pa, pb, o, m, n, scalar, stream_) ||
          binary_strided_vec_if<T, 2>(op, pa, pb, o, m, n, scalar, stream_))
        return;
    } else if constexpr (std::is_same_v<T, float>) {
      // 16 or 8 bytes a load (a GPT's token embeddings plus its position embeddings, float32
      // [64, 256, 384] + [256, 384]: 28.9 us on an H200 at one element a thread).
      if (binary_strided_vec_if<T, 4>(op, pa, pb, o, m, n, scalar, stream_) ||
          binary_strided_vec_if<T, 2>(op, pa, pb, o, m, n, scalar, stream_))
        return;
    }
    if (fits_32bit(m, n)) {
      binary_strided<T, uint32_t><<<blocks_for(n), kThreads, 0, stream_>>>(op, pa, pb, o, m, static_cast<uint32_t>(n),
                                                                           scalar);
    } else {
      binary_strided<T, int64_t><<<blocks_for(n), kThreads, 0, stream_>>>(op, pa, pb, o, m, n, scalar);
    }
    CUDA_LAUNCH_CHECK(binary_strided);
  });
}

}  // namespace minidl
