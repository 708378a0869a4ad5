// Writing: the header names every tensor with its dtype, shape and byte range, and the tensors'
// bytes follow, all written at once through write_file_atomically.
#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/safetensors.h"

namespace minidl::safetensors {

// Tensor bytes are written as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

struct Prepared {
  std::string name;
  Tensor host;  // contiguous, on the CPU: its bytes are written as they lie
};

std::string header_size_field(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

const char* dtype_string(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::Int64:
      return "I64";
    case DType::Int32:
      return "I32";
    case DType::Int8:
      return "I8";
    case DType::UInt8:
      return "U8";
    case DType::Bool:
      return "BOOL";
    case DType::BFloat16:
      return "BF16";
    case DType::Float16:
      return "F16";
  }
  MINIDL_FAIL("safetensors: no format name for dtype ", dtype);
}

void save(const std::string& path, const Tensors& tensors, const Metadata& metadata) {
  std::vector<Prepared> prepared;
  for (auto& [name, t] : tensors) {
    MINIDL_CHECK(name != kMetadataKey, "safetensors: cannot write ", path, ": \"", kMetadataKey,
                 "\" is reserved for the metadata and cannot name a tensor");
    MINIDL_CHECK(t.defined(), "safetensors: cannot write ", path, ": tensor \"", name, "\" is undefined");
    Tensor host = t.detach();
    if (!host.device().is_cpu()) host = host.to(Device::cpu());  // a visible sync: the bytes must reach the host
    prepared.push_back({name, host.contiguous()});
  }
  // Wider elements first, as the reference writer orders them: with the buffer starting at a
  // multiple of 8, every tensor is then aligned to its element size for readers that map the file.
  std::stable_sort(prepared.begin(), prepared.end(), [](const Prepared& a, const Prepared& b) {
    return element_size(a.host.dtype()) > element_size(b.host.dtype());
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const Prepared& p : prepared) {
    const uint64_t nbytes = p.host.nbytes();
    header[p.name] = {{"dtype", dtype_string(p.host.dtype())},
                      {"shape", p.host.shape()},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    MINIDL_FAIL("safetensors: cannot write ", path, ": a tensor name or metadata string is not valid UTF-8 (", e.what(),
                ")");
  }
  text.append((8 - (text.size() % 8)) % 8, ' ');  // the buffer starts 8-aligned
  MINIDL_CHECK(text.size() <= kMaxHeaderBytes, "safetensors: cannot write ", path, ": the header would be ",
               text.size(), " bytes, over the limit of ", kMaxHeaderBytes);

  const std::string size_field = header_size_field(text.size());
  std::vector<std::string_view> pieces = {size_field, text};
  for (const Prepared& p : prepared) {
    if (p.host.nbytes() > 0) pieces.emplace_back(static_cast<const char*>(p.host.raw_data()), p.host.nbytes());
  }
  write_file_atomically(path, pieces);
}

}  // namespace minidl::safetensors
