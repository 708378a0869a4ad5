#pragma once
// The two 16-bit floating types, bfloat16 and float16 (IEEE binary16), as storage types: two bytes
// holding the bits, converted to float32 for every computation, as PyTorch's kernels compute in
// float32 and store 16 bits. One definition serves the host and the device (nvcc compiles it too), so
// a tensor's bytes mean the same on both; that is why it is written here instead of taken from
// Eigen (host only, and core/ does not include Eigen) or cuda_bf16.h (CUDA builds only). On the
// device the conversions use the hardware's instructions; the host code below gives the same bits:
// round to nearest even, NaN kept (quiet), infinity kept, overflow to infinity, float16 subnormals.
//   BFloat16 b = 1.0f / 3;   float f = b;   // 0.333984375
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define MINIDL_HOST_DEVICE __host__ __device__
#else
#define MINIDL_HOST_DEVICE
#endif

namespace minidl {
namespace half_bits {

MINIDL_HOST_DEVICE inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
MINIDL_HOST_DEVICE inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

MINIDL_HOST_DEVICE inline uint16_t bfloat16_from_float(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN, made quiet
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even; a carry into the
  // exponent is the correct rounding too, up to infinity.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
#endif
}
MINIDL_HOST_DEVICE inline float bfloat16_to_float(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

MINIDL_HOST_DEVICE inline uint16_t float16_from_float(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));  // NaN, quiet
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 (or inf): infinity
  if (x >= 0x38800000u) {                                              // >= 2^-14: a normal float16
    uint32_t r = x - 0x38000000u;                                      // rebias the exponent, 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);                                    // round to nearest, ties to even
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  if (x < 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 (a tie, to even): zero
  // A subnormal: the value in units of 2^-24 is the full significand shifted right.
  const uint32_t exponent = x >> 23;
  const uint32_t significand = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;
  const uint32_t kept = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  const uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  return static_cast<uint16_t>(sign | rounded);
#endif
}
MINIDL_HOST_DEVICE inline float float16_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {                                                              // zero, subnormal
    const float value = static_cast<float>(mantissa) * 5.9604644775390625e-08f;    // m * 2^-24, exact
    return sign ? -value : value;
  }
  return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
#endif
}

}  // namespace half_bits

/// bfloat16: float32's exponent with 8 significant bits. Converts to and from float implicitly, so
/// kernels written for float compute with it unchanged (in float32) and round once when they store.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  MINIDL_HOST_DEVICE BFloat16(float f) : bits(half_bits::bfloat16_from_float(f)) {}
  MINIDL_HOST_DEVICE BFloat16(double d) : BFloat16(static_cast<float>(d)) {}
  MINIDL_HOST_DEVICE BFloat16(int64_t i) : BFloat16(static_cast<float>(i)) {}
  MINIDL_HOST_DEVICE BFloat16(int i) : BFloat16(static_cast<float>(i)) {}
  MINIDL_HOST_DEVICE operator float() const { return half_bits::bfloat16_to_float(bits); }
  MINIDL_HOST_DEVICE static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

/// float16 (IEEE 754 binary16): 5 exponent bits, 11 significant bits, largest finite 65504.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  MINIDL_HOST_DEVICE Half(float f) : bits(half_bits::float16_from_float(f)) {}
  MINIDL_HOST_DEVICE Half(double d) : Half(static_cast<float>(d)) {}
  MINIDL_HOST_DEVICE Half(int64_t i) : Half(static_cast<float>(i)) {}
  MINIDL_HOST_DEVICE Half(int i) : Half(static_cast<float>(i)) {}
  MINIDL_HOST_DEVICE operator float() const { return half_bits::float16_to_float(bits); }
  MINIDL_HOST_DEVICE static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(BFloat16) == 2 && sizeof(Half) == 2, "16-bit types must be two bytes");

/// True for BFloat16 and Half: the types a kernel computes in float32 and stores in 16 bits.
template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

/// The type a kernel accumulates and computes in: float for the 16-bit types, T itself otherwise.
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<BFloat16> {
  using type = float;
};
template <>
struct compute_type<Half> {
  using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

}  // namespace minidl

namespace std {
template <>
class numeric_limits<minidl::BFloat16> {
 public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false;
  static constexpr bool has_infinity = true, has_quiet_NaN = true;
  static constexpr int digits = 8, radix = 2;
  static minidl::BFloat16 min() { return minidl::BFloat16::from_bits(0x0080); }
  static minidl::BFloat16 lowest() { return minidl::BFloat16::from_bits(0xff7f); }
  static minidl::BFloat16 max() { return minidl::BFloat16::from_bits(0x7f7f); }
  static minidl::BFloat16 epsilon() { return minidl::BFloat16::from_bits(0x3c00); }
  static minidl::BFloat16 infinity() { return minidl::BFloat16::from_bits(0x7f80); }
  static minidl::BFloat16 quiet_NaN() { return minidl::BFloat16::from_bits(0x7fc0); }
};
template <>
class numeric_limits<minidl::Half> {
 public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false;
  static constexpr bool has_infinity = true, has_quiet_NaN = true;
  static constexpr int digits = 11, radix = 2;
  static minidl::Half min() { return minidl::Half::from_bits(0x0400); }
  static minidl::Half lowest() { return minidl::Half::from_bits(0xfbff); }
  static minidl::Half max() { return minidl::Half::from_bits(0x7bff); }
  static minidl::Half epsilon() { return minidl::Half::from_bits(0x1400); }
  static minidl::Half infinity() { return minidl::Half::from_bits(0x7c00); }
  static minidl::Half quiet_NaN() { return minidl::Half::from_bits(0x7e00); }
};
}  // namespace std
