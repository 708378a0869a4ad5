#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace minidl {

Device::Device(std::string_view spec) {
  if (spec == "cpu") return;
  if (spec.substr(0, 4) == "cuda") {
    type_ = DeviceType::CUDA;
    if (spec.size() == 4) return;
    std::string_view number = spec.substr(spec[4] == ':' ? 5 : spec.size());
    auto [end, err] = std::from_chars(number.data(), number.data() + number.size(), index);
    if (err == std::errc() && end == number.data() + number.size() && !number.empty() && index >= 0) return;
  }
  MINIDL_FAIL("Device: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", spec, "\"");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace minidl
