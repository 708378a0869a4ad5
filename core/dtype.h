#pragma once
// Element types and the helpers that turn a runtime dtype into a C++ type.
#include <cstddef>
#include <cstdint>
#include <ostream>

#include "core/error.h"
#include "core/half.h"

namespace minidl {

/// Element type of a tensor. float32 is the default; float64 exists for tight gradient checks;
/// int64 holds labels and indices; int32 indices from other libraries; uint8 images; int8
/// quantized values; bool (one byte) holds the results of comparisons and masks; bfloat16 and
/// float16 are the 16-bit floating types of mixed precision (kernels compute them in float32).
///   Example: `auto t = zeros({2, 3}, DType::Float64);`
enum class DType : uint8_t { Float32, Float64, Int64, Bool, Int32, Int8, UInt8, BFloat16, Float16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
// libtorch's short names (torch::kFloat, torch::kLong, torch::kByte, ...).
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kDouble = DType::Float64;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kInt = DType::Int32;
inline constexpr DType kChar = DType::Int8;
inline constexpr DType kByte = DType::UInt8;

static_assert(sizeof(bool) == 1, "DType::Bool stores one byte per element");

inline size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Int32: return 4;
    case DType::Int8: return 1;
    case DType::UInt8: return 1;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
  }
  return 8;
}
/// True for bfloat16 and float16.
inline bool is_reduced_floating(DType dtype) { return dtype == DType::BFloat16 || dtype == DType::Float16; }
/// True for the floating dtypes: float32, float64, bfloat16, float16.
inline bool is_floating(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || is_reduced_floating(dtype);
}
/// True for the integer dtypes (int64, int32, int8, uint8), and for bool when include_bool is set,
/// as c10::isIntegralType.   is_integral(kUInt8) == true;  is_integral(kBool) == false
inline bool is_integral(DType dtype, bool include_bool = false) {
  switch (dtype) {
    case DType::Int64:
    case DType::Int32:
    case DType::Int8:
    case DType::UInt8: return true;
    case DType::Bool: return include_bool;
    default: return false;
  }
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
  }
  return "unknown";
}
inline std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }

/// Calls `fn(T{})` with T the C++ type of a floating dtype; `what` names the caller in the error.
///   dispatch_floating(x.dtype(), "relu", [&](auto tag) { using T = decltype(tag); ... });
template <class Fn>
decltype(auto) dispatch_floating(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    default: break;
  }
  if (is_reduced_floating(dtype))
    MINIDL_FAIL(what, ": has no ", dtype, " kernel; compute it in float32 (.to(kFloat32)) or under autocast");
  MINIDL_FAIL(what, ": expected a floating dtype (float32 or float64), got ", dtype);
}

/// Like dispatch_floating, with the 16-bit types too: T is BFloat16 or Half for them, which compute
/// in float32 (`compute_t<T>`) and store 16 bits.
template <class Fn>
decltype(auto) dispatch_floating_and_half(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::BFloat16: return fn(BFloat16{});
    case DType::Float16: return fn(Half{});
    default: return dispatch_floating(dtype, what, std::forward<Fn>(fn));
  }
}

/// Calls `fn(T{})` with T the C++ type of an integer dtype (int64, int32, int8, uint8; not bool).
///   dispatch_integral(x.dtype(), "bitwise_and", [&](auto tag) { using T = decltype(tag); ... });
template <class Fn>
decltype(auto) dispatch_integral(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::Int64: return fn(int64_t{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int8: return fn(int8_t{});
    case DType::UInt8: return fn(uint8_t{});
    default: break;
  }
  MINIDL_FAIL(what, ": expected an integer dtype (int64, int32, int8 or uint8), got ", dtype);
}

/// Like dispatch_floating, but also accepts the integer dtypes (the arithmetic dtypes).
template <class Fn>
decltype(auto) dispatch_all(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Int64: return fn(int64_t{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int8: return fn(int8_t{});
    case DType::UInt8: return fn(uint8_t{});
    case DType::Bool:
    case DType::BFloat16:
    case DType::Float16: break;
  }
  MINIDL_FAIL(what, ": expected an arithmetic dtype (float32, float64, int64, int32, int8 or uint8), got ", dtype,
              " (convert it with .to(kFloat32) first)");
}

/// Calls fn(BFloat16{}) or fn(Half{}) for a 16-bit dtype: for a kernel's own 16-bit path.
///   if (is_reduced_floating(x.dtype())) dispatch_16bit(x.dtype(), [&](auto tag) { ... });
template <class Fn>
void dispatch_16bit(DType dtype, Fn&& fn) {
  if (dtype == DType::BFloat16) fn(BFloat16{});
  else if (dtype == DType::Float16) fn(Half{});
  else MINIDL_FAIL("dispatch_16bit: expected bfloat16 or float16, got ", dtype);
}

/// dispatch_all with the 16-bit floating types too.
template <class Fn>
decltype(auto) dispatch_all_and_half(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::BFloat16: return fn(BFloat16{});
    case DType::Float16: return fn(Half{});
    default: return dispatch_all(dtype, what, std::forward<Fn>(fn));
  }
}

/// Every dtype, bool and the 16-bit types included: for the kernels that only move, compare or
/// select values (copy, fill, gathers, comparisons, where).
template <class Fn>
decltype(auto) dispatch_with_bool(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DType::Bool) return fn(bool{});
  return dispatch_all_and_half(dtype, what, std::forward<Fn>(fn));
}

}  // namespace minidl
