#pragma once
// Element types and the helper that turns a runtime dtype into a C++ type.
#include <cstddef>
#include <cstdint>
#include <ostream>

#include "core/error.h"

namespace minidl {

/// Element type of a tensor. float32 is the default; float64 exists for tight gradient checks;
/// int64 holds labels and indices; bool (one byte) holds the results of comparisons and masks.
///   Example: `auto t = zeros({2, 3}, DType::Float64);`
enum class DType : uint8_t { Float32, Float64, Int64, Bool };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

static_assert(sizeof(bool) == 1, "DType::Bool stores one byte per element");

inline size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 8;
}
inline bool is_floating(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "unknown";
}
inline std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }

/// Calls `fn(T{})` with T the C++ type of a floating dtype; `what` names the caller in the error.
///   dispatch_floating(x.dtype(), "relu", [&](auto tag) { using T = decltype(tag); ... });
template <class Fn>
decltype(auto) dispatch_floating(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    default: break;
  }
  MINIDL_FAIL(what, ": expected a floating dtype (float32 or float64), got ", dtype);
}

/// Like dispatch_floating, but also accepts int64 (the arithmetic dtypes).
template <class Fn>
decltype(auto) dispatch_all(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DType::Int64) return fn(int64_t{});
  if (dtype == DType::Bool) {
    MINIDL_FAIL(what, ": expected float32, float64 or int64, got bool (convert it with .to(kFloat32) first)");
  }
  return dispatch_floating(dtype, what, std::forward<Fn>(fn));
}

/// Like dispatch_all, but also accepts bool: for the kernels that only move, compare or select
/// values (copy, fill, gathers, comparisons, where).
template <class Fn>
decltype(auto) dispatch_with_bool(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DType::Bool) return fn(bool{});
  return dispatch_all(dtype, what, std::forward<Fn>(fn));
}

}  // namespace minidl
