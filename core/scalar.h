#pragma once
// Scalar: a number as a C++ caller wrote it (bool, integer or floating), kept in its category so
// that type promotion can treat `x * 2` and `x * 2.5` the way PyTorch treats Python's 2 and 2.5.
#include <cstdint>
#include <ostream>
#include <type_traits>

#include "core/dtype.h"

namespace minidl {

/// A bool, an integer (held as int64) or a floating number (held as double).
///   Scalar s = 2.5;  s.is_floating_point() == true;   Scalar n = 3;  n.to<int64_t>() == 3
class Scalar {
 public:
  Scalar() : Scalar(int64_t{0}) {}
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T value) {  // NOLINT: implicit, as at::Scalar, so that x * 2 and x * 0.5 read as they do in PyTorch
    if constexpr (std::is_same_v<T, bool>) {
      dtype_ = kBool;
      i_ = value;
    } else if constexpr (std::is_integral_v<T>) {
      dtype_ = kInt64;
      i_ = static_cast<int64_t>(value);
    } else {
      dtype_ = kFloat64;
      d_ = static_cast<double>(value);
    }
  }

  bool is_floating_point() const { return is_floating(dtype_); }
  bool is_integral() const { return dtype_ == kInt64; }
  bool is_boolean() const { return dtype_ == kBool; }
  /// The dtype that holds this value exactly: float64, int64 or bool.
  DType dtype() const { return dtype_; }
  double to_double() const { return is_floating_point() ? d_ : static_cast<double>(i_); }
  /// The value converted as a C++ cast converts it (a floating value is truncated toward zero).
  template <class T>
  T to() const {
    return is_floating_point() ? static_cast<T>(d_) : static_cast<T>(i_);
  }

  // libtorch's accessors.   double lr = x.item().toDouble();  int64_t n = x.sum().item().toLong();
  double toDouble() const { return to_double(); }
  float toFloat() const { return to<float>(); }
  int64_t toLong() const { return to<int64_t>(); }
  int toInt() const { return to<int>(); }
  bool toBool() const { return is_floating_point() ? d_ != 0 : i_ != 0; }
  bool isFloatingPoint() const { return is_floating_point(); }
  /// True for an integer; also for a bool when `includeBool`.
  bool isIntegral(bool includeBool) const { return is_integral() || (includeBool && is_boolean()); }
  bool isBoolean() const { return is_boolean(); }
  DType type() const { return dtype_; }

 private:
  DType dtype_;
  union {
    double d_;
    int64_t i_;
  };
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_boolean()) return os << (s.to<bool>() ? "true" : "false");
  if (s.is_integral()) return os << s.to<int64_t>();
  return os << s.to_double();
}

}  // namespace minidl
