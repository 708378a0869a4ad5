#pragma once
// Element types and the helper that turns a runtime dtype into a C++ type.
#include <cstddef>
#include <cstdint>
#include <ostream>

#include "core/error.h"

namespace minidl {

/// Element type of a tensor. float32 is the default; float64 exists for tight gradient checks;
/// int64 holds labels and indices.   Example: `auto t = zeros({2, 3}, DType::Float64);`
enum class DType : uint8_t { Float32, Float64, Int64 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;

inline size_t element_size(DType dtype) { return dtype == DType::Float32 ? 4 : 8; }
inline bool is_floating(DType dtype) { return dtype != DType::Int64; }

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
  }
  return "unknown";
}
inline std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }

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

/// Like dispatch_floating, but also accepts int64.
template <class Fn>
decltype(auto) dispatch_all(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DType::Int64) return fn(int64_t{});
  return dispatch_floating(dtype, what, std::forward<Fn>(fn));
}

}  // namespace minidl
