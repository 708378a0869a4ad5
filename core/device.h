#pragma once
// Where a tensor's memory lives: the CPU or one CUDA device.
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace minidl {

enum class DeviceType : uint8_t { CPU, CUDA };
/// libtorch's names for the device types: `Device(kCUDA)`, `x.to(kCPU)`.
inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

/// `cpu` or `cuda:N`.   Example: `model->to(Device::cuda());  Device d("cuda:1");  Device(kCUDA, 1)`
struct Device {
  int index = 0;

  constexpr Device() = default;
  /// Device(kCUDA) is cuda:0 (the default device), as libtorch's current device.
  constexpr Device(DeviceType type, int index = 0) : index(index), type_(type) {}  // NOLINT: implicit, as libtorch's
  /// Parses "cpu", "cuda" or "cuda:N".
  explicit Device(std::string_view spec);

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }

  constexpr DeviceType type() const { return type_; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  std::string str() const;

  friend bool operator==(const Device&, const Device&) = default;

 private:
  DeviceType type_ = DeviceType::CPU;
};

inline std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

}  // namespace minidl
