// The architectures the kernels were compiled for, and which of them a GPU can run: CUDA runs a
// binary (sm_XY) on GPUs of its major version X with a minor version of at least Y, an
// architecture-specific one (sm_90a) on its exact GPU only, and PTX (compute_XY) on any GPU of at
// least X.Y after the driver compiles it.
#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/cuda/diagnostics.h"

namespace minidl::diagnostics::detail {

std::vector<Arch> parse_architectures(const std::string& spec, const std::vector<int>& nvcc) {
  std::vector<Arch> out;
  std::string entries = spec;
  std::replace(entries.begin(), entries.end(), ';', ',');
  std::stringstream stream(entries);
  std::string token;
  while (std::getline(stream, token, ',')) {
    size_t digits = 0;
    while (digits < token.size() && std::isdigit(static_cast<unsigned char>(token[digits]))) ++digits;
    if (digits == 0) {
      // native, all, all-major: nvcc picked the numbers; the runtime check says what runs.
      for (int n : nvcc) out.push_back({n / 10, 0, true, false});
      continue;
    }
    Arch a;
    a.number = std::stoi(token.substr(0, digits));
    std::string rest = token.substr(digits);
    if (!rest.empty() && (rest[0] == 'a' || rest[0] == 'f')) {
      a.suffix = rest[0];
      rest = rest.substr(1);
    }
    a.binary = rest != "-virtual";
    a.ptx = rest != "-real";
    out.push_back(a);
  }
  if (out.empty())
    for (int n : nvcc) out.push_back({n / 10, 0, true, true});
  return out;
}

std::vector<Arch> compiled_architectures() { return parse_architectures(architectures_spec(), nvcc_architectures()); }

std::string architecture_names(const std::vector<Arch>& archs) {
  std::string s;
  const auto add = [&s](const char* prefix, const Arch& a) {
    if (!s.empty()) s += ' ';
    s += prefix;
    s += std::to_string(a.number);
    if (a.suffix) s += a.suffix;
  };
  for (const Arch& a : archs) {
    if (a.binary) add("sm_", a);
    if (a.ptx) add("compute_", a);
  }
  return s;
}

Image image_for(const std::vector<Arch>& archs, int major, int minor) {
  const int cc = major * 10 + minor;
  Image image;
  for (const Arch& a : archs) {
    const bool fits = a.suffix == 'a' ? a.number == cc : a.number / 10 == major && a.number <= cc;
    if (a.binary && fits && (!image.binary || a.number > image.binary->number)) image.binary = &a;
    if (a.ptx && !a.suffix && a.number <= cc && (!image.ptx || a.number > image.ptx->number)) image.ptx = &a;
  }
  return image;
}

std::string architecture_flag(int major, int minor) {
  return "-DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(major * 10 + minor);
}

}  // namespace minidl::diagnostics::detail
