#pragma once
// Where a tensor's memory lives: the CPU or one CUDA device.
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace minidl {

enum class DeviceType : uint8_t { CPU, CUDA };

/// `cpu` or `cuda:N`.   Example: `model->to(Device::cuda());  Device d("cuda:1");`
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type(type), index(index) {}
  /// Parses "cpu", "cuda" or "cuda:N".
  explicit Device(std::string_view spec);

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;

  friend bool operator==(const Device&, const Device&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

}  // namespace minidl
