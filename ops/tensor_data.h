#pragma once
// tensor(...): a tensor from a C++ value, a nested braced list or a std::vector, as torch::tensor.
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"
#include "core/tensor_options.h"

namespace minidl {

/// The data of tensor(...): a scalar, a braced list of TensorData (nested lists are rows), or a
/// std::vector. Its dtype follows libtorch: integers are int64, floating numbers the default float
/// (float32), bools bool; every element of one list must have the same one.
class TensorData {
 public:
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  TensorData(T value) : sizes_{}, dtype_(desired_dtype<T>()), values_{Scalar(value)} {}  // NOLINT
  TensorData(std::initializer_list<TensorData> list);
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  TensorData(const std::vector<T>& values)  // NOLINT
      : sizes_{static_cast<int64_t>(values.size())}, dtype_(desired_dtype<T>()) {
    values_.reserve(values.size());
    for (const auto& v : values) values_.emplace_back(static_cast<T>(v));
  }

  const Shape& sizes() const { return sizes_; }
  DType dtype() const { return dtype_; }
  /// Every element in row-major order.
  const std::vector<Scalar>& values() const { return values_; }

 private:
  template <class T>
  static constexpr DType desired_dtype() {
    if constexpr (std::is_same_v<T, bool>) return kBool;
    else if constexpr (std::is_integral_v<T>) return kInt64;
    else if constexpr (std::is_same_v<T, double>) return kFloat32;  // libtorch: the default dtype
    else return kFloat32;
  }

  Shape sizes_;
  DType dtype_ = kFloat32;
  std::vector<Scalar> values_;
};

/// tensor(3.5) is a 0-d float32; tensor({1, 2, 3}) int64; tensor({{1.5, 2.}, {3., 4.}}) a 2x2
/// float32; tensor({true, false}) bool; tensor({0.1, 1.0}, kFloat64); tensor(std::vector<float>{...}).
/// A ragged list is an error naming where it differs.
Tensor tensor(const TensorData& data, TensorOptions options = {});

}  // namespace minidl
