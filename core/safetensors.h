#pragma once
// Tensors in the safetensors format (the format of Hugging Face's `safetensors` package, read and
// written by PyTorch through safetensors.torch):
//
//   8 bytes   N, little-endian uint64: the header's size
//   N bytes   a JSON object {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//             "__metadata__": {"key": "value", ...}}, padded with spaces
//   the rest  the byte buffer: each tensor's elements, row-major, little-endian, at [begin, end)
//
// minidl reads and writes F32, F64, I64 and BOOL. Loading treats the file as untrusted: every rule
// of the format is checked before any tensor is read, and an error names the file and the problem.
#include <cstdint>
#include <map>
#include <string>

#include "core/tensor.h"

namespace minidl::safetensors {

using Tensors = std::map<std::string, Tensor>;
using Metadata = std::map<std::string, std::string>;

/// What a safetensors file holds: tensors by name (on the CPU) and the string-to-string metadata.
struct Contents {
  Tensors tensors;
  Metadata metadata;
};

/// The header's key for the string-to-string metadata; no tensor may have this name.
inline constexpr const char* kMetadataKey = "__metadata__";

/// The largest header accepted (as the reference implementation's limit): a corrupt size field must
/// not make us allocate gigabytes.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

/// Writes `tensors` (any device, any layout: CUDA tensors are copied to the host first) and
/// `metadata` to `path`, atomically: a failure leaves a previous file at `path` as it was.
///   safetensors::save("weights.safetensors", {{"w", w}, {"b", b}}, {{"epoch", "3"}});
void save(const std::string& path, const Tensors& tensors, const Metadata& metadata = {});

/// Reads and validates a file written by save() or by any safetensors writer.
///   safetensors::Contents c = safetensors::load("weights.safetensors");  Tensor w = c.tensors.at("w");
Contents load(const std::string& path);

/// The format's name of a dtype ("F32", "F64", "I64", "BOOL").
const char* dtype_string(DType dtype);

}  // namespace minidl::safetensors
