#pragma once
// TensorOptions: the dtype, device and requires_grad a factory makes a tensor with, as libtorch's.
#include <optional>

#include "core/device.h"
#include "core/dtype.h"

namespace minidl {

/// What a new tensor is: dtype (float32 unless set), device (cpu unless set), requires_grad.
/// Chainable, and implicit from a DType, a Device or a DeviceType, so each of these reads as in libtorch:
///   zeros({2, 3}, TensorOptions().dtype(kFloat64).device(kCUDA));  ones({3}, kInt64);  rand({2}, kCUDA);
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}       // NOLINT: implicit, as libtorch's
  TensorOptions(Device device) : device_(device) {}   // NOLINT
  TensorOptions(DeviceType type) : device_(type) {}   // NOLINT

  /// A copy with the dtype set.
  TensorOptions dtype(DType dtype) const {
    TensorOptions o = *this;
    o.dtype_ = dtype;
    return o;
  }
  /// A copy with the dtype of the C++ type T.   TensorOptions().dtype<double>()
  template <class T>
  TensorOptions dtype() const {
    return dtype(dtype_of<T>());
  }
  TensorOptions device(Device device) const {
    TensorOptions o = *this;
    o.device_ = device;
    return o;
  }
  TensorOptions device(DeviceType type, int index = 0) const { return device(Device(type, index)); }
  TensorOptions requires_grad(bool requires_grad) const {
    TensorOptions o = *this;
    o.requires_grad_ = requires_grad;
    return o;
  }

  DType dtype() const { return dtype_.value_or(kFloat32); }
  Device device() const { return device_.value_or(Device::cpu()); }
  bool requires_grad() const { return requires_grad_; }
  bool has_dtype() const { return dtype_.has_value(); }
  bool has_device() const { return device_.has_value(); }
  /// The dtype if set, else `fallback` (a factory's inferred dtype: int64 for integer bounds).
  DType dtype_or(DType fallback) const { return dtype_.value_or(fallback); }

 private:
  std::optional<DType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;
};

/// libtorch's torch::dtype / torch::device / torch::requires_grad.   ones({2}, dtype(kFloat64).requires_grad(true))
inline TensorOptions dtype(DType dtype) { return TensorOptions().dtype(dtype); }
template <class T>
TensorOptions dtype() {
  return TensorOptions().dtype<T>();
}
inline TensorOptions device(Device device) { return TensorOptions().device(device); }
inline TensorOptions requires_grad(bool requires_grad = true) { return TensorOptions().requires_grad(requires_grad); }

}  // namespace minidl
