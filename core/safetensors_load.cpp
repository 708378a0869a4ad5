// Reading checks the header completely before it reads a byte of tensor data: a corrupt or hostile
// file gives an error, never a huge allocation or a read out of bounds.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/safetensors.h"

namespace minidl::safetensors {

// Tensor bytes are read as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

bool parse_dtype(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> known[] = {
      {"F32", kFloat32}, {"F64", kFloat64}, {"I64", kInt64}, {"I32", kInt32},
      {"I8", kInt8},     {"U8", kUInt8},    {"BOOL", kBool}, {"BF16", kBFloat16}, {"F16", kFloat16}};
  for (auto& [name, dtype] : known) {
    if (s == name) {
      out = dtype;
      return true;
    }
  }
  return false;
}

// The format's other dtypes: valid files, but minidl has no tensors of these types.
bool is_other_format_dtype(const std::string& s) {
  static const std::set<std::string> others = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                               "F4",      "I16",     "U16",     "U32",     "U64",     "C64"};
  return others.count(s) > 0;
}

struct File {
  std::string path;
  int fd = -1;
  uint64_t size = 0;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

// Every load error starts with the file's name; a macro keeps each error's own line in the message.
#define SAFETENSORS_FAIL(path, ...) MINIDL_FAIL("safetensors file ", path, ": ", __VA_ARGS__)

void read_at(const File& f, void* dst, uint64_t n, uint64_t offset, const char* what) {
  char* out = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t got = ::pread(f.fd, out, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) SAFETENSORS_FAIL(f.path, "reading ", what, " failed: ", std::strerror(errno));
    if (got == 0)
      SAFETENSORS_FAIL(f.path, "the file ended while reading ", what, " (was it truncated while being read?)");
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
}

std::string json_type(const json& j) { return j.type_name(); }

// nlohmann keeps the last of two equal keys without a word; the format forbids duplicates, so the
// parser's callback records every object's keys and the first repeat.
json parse_header(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  bool duplicate_at_top = false;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.back().insert(parsed.get<std::string>()).second &&
               duplicate.empty()) {
      duplicate = parsed.get<std::string>();
      duplicate_at_top = open_objects.size() == 1;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, callback);
  } catch (const json::exception& e) {
    SAFETENSORS_FAIL(path, "the header is not valid JSON: ", e.what());
  }
  if (!duplicate.empty()) {
    if (duplicate_at_top) SAFETENSORS_FAIL(path, "the header names the tensor \"", duplicate, "\" twice");
    SAFETENSORS_FAIL(path, "the header repeats the key \"", duplicate, "\" inside one object");
  }
  return header;
}

Metadata parse_metadata(const std::string& path, const json& j) {
  if (!j.is_object()) SAFETENSORS_FAIL(path, "\"__metadata__\" must be an object of strings, found ", json_type(j));
  Metadata out;
  for (auto& [key, value] : j.items()) {
    if (!value.is_string()) {
      SAFETENSORS_FAIL(path, "\"__metadata__\" must map strings to strings, but \"", key, "\" holds ", json_type(value),
                       " ", value.dump());
    }
    out[key] = value.get<std::string>();
  }
  return out;
}

uint64_t unsigned_integer(const std::string& path, const std::string& name, const char* field, const json& v) {
  if (!v.is_number_unsigned()) {
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": \"", field, "\" must hold non-negative integers, found ", v.dump());
  }
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& path, const std::string& name, const json& j) {
  if (!j.is_object())
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": expected an object with dtype, shape and data_offsets, found ",
                     json_type(j));
  for (auto& [key, value] : j.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      SAFETENSORS_FAIL(path, "tensor \"", name, "\": unexpected field \"", key,
                       "\" (expected dtype, shape and data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!j.contains(field)) SAFETENSORS_FAIL(path, "tensor \"", name, "\": missing \"", field, "\"");
  }
  Entry e;
  e.name = name;

  const json& dtype = j["dtype"];
  if (!dtype.is_string())
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": \"dtype\" must be a string, found ", dtype.dump());
  const std::string ds = dtype.get<std::string>();
  if (!parse_dtype(ds, e.dtype)) {
    if (is_other_format_dtype(ds))
      SAFETENSORS_FAIL(path, "tensor \"", name, "\" has dtype ", ds,
                       ", which minidl does not support (F32, F64, I64, I32, I8, U8 or BOOL)");
    SAFETENSORS_FAIL(path, "tensor \"", name, "\" has unknown dtype \"", ds, "\" (expected F32, F64, BF16, F16, I64, I32, I8, U8 or BOOL)");
  }

  const json& shape = j["shape"];
  if (!shape.is_array())
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": \"shape\" must be an array, found ", shape.dump());
  uint64_t numel = 1;
  for (const json& d : shape) {
    uint64_t size = unsigned_integer(path, name, "shape", d);
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, size, &numel)) {
      SAFETENSORS_FAIL(path, "tensor \"", name, "\": shape ", shape.dump(), " has more elements than fit in 64 bits");
    }
    e.shape.push_back(static_cast<int64_t>(size));
  }

  const json& offsets = j["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": \"data_offsets\" must be [begin, end], found ", offsets.dump());
  }
  e.begin = unsigned_integer(path, name, "data_offsets", offsets[0]);
  e.end = unsigned_integer(path, name, "data_offsets", offsets[1]);
  if (e.end < e.begin)
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": data_offsets [", e.begin, ", ", e.end, "] end before they begin");

  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, element_size(e.dtype), &nbytes) ||
      numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": shape ", shape.dump(), " of ", ds,
                     " needs more bytes than fit in 64 bits");
  }
  if (nbytes != e.end - e.begin) {
    SAFETENSORS_FAIL(path, "tensor \"", name, "\": shape ", shape.dump(), " of ", ds, " needs ", numel, " x ",
                     element_size(e.dtype), " = ", nbytes, " bytes, but data_offsets [", e.begin, ", ", e.end,
                     "] hold ", e.end - e.begin);
  }
  return e;
}

// The tensors must tile the buffer: sorted by offset, each starts where the previous one ended,
// the first at 0, the last at the end of the file. No byte is shared and none is unaccounted for.
void check_tiling(const File& f, std::vector<Entry>& entries, uint64_t header_bytes) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin > expected) {
      SAFETENSORS_FAIL(f.path, "gap in the data buffer: bytes [", expected, ", ", e.begin, ") belong to no tensor (\"",
                       e.name, "\" starts at ", e.begin, ")");
    }
    if (e.begin < expected) {
      SAFETENSORS_FAIL(f.path, "tensors overlap in the data buffer: \"", e.name, "\" starts at byte ", e.begin,
                       " inside \"", previous->name, "\", which ends at ", expected);
    }
    expected = e.end;
    previous = &e;
  }
  const uint64_t available = f.size - 8 - header_bytes;  // load() checked that the header fits
  if (expected > available) {
    SAFETENSORS_FAIL(f.path, "truncated: the header describes ", expected, " bytes of tensor data, but only ",
                     available, " follow the header (the file is ", f.size, " bytes)");
  }
  const uint64_t expected_size = 8 + header_bytes + expected;
  if (f.size > expected_size) {
    SAFETENSORS_FAIL(f.path, "the file is ", f.size, " bytes but its header accounts for 8 + ", header_bytes, " + ",
                     expected, " = ", expected_size, ": ", f.size - expected_size,
                     " trailing bytes belong to no tensor");
  }
}

Tensor read_tensor(const File& f, const Entry& e, uint64_t data_start) {
  Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu());
  if (t.nbytes() == 0) return t;
  read_at(f, t.raw_data(), t.nbytes(), data_start + e.begin, ("the data of \"" + e.name + "\"").c_str());
  if (e.dtype == kBool) {
    // A bool byte other than 0 or 1 is undefined behaviour in C++: refuse it rather than load it.
    const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (bytes[i] > 1)
        SAFETENSORS_FAIL(f.path, "BOOL tensor \"", e.name, "\" holds the byte ", int{bytes[i]}, " at element ", i,
                         "; expected 0 or 1");
    }
  }
  return t;
}

}  // namespace

Contents load(const std::string& path) {
  File f;
  f.path = path;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) MINIDL_FAIL("cannot open safetensors file ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) SAFETENSORS_FAIL(path, "fstat failed: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) SAFETENSORS_FAIL(path, "not a regular file");
  f.size = static_cast<uint64_t>(st.st_size);

  if (f.size < 8) SAFETENSORS_FAIL(path, "the file is ", f.size, " bytes, too short for the 8-byte header size");
  unsigned char size_field[8];
  read_at(f, size_field, 8, 0, "the header size");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | size_field[i];
  if (n > kMaxHeaderBytes)
    SAFETENSORS_FAIL(path, "the header size is ", n, " bytes, over the limit of ", kMaxHeaderBytes,
                     " (corrupt or not a safetensors file?)");
  if (n > f.size - 8)
    SAFETENSORS_FAIL(path, "truncated: the header size is ", n, " bytes but only ", f.size - 8, " bytes follow it");
  if (n == 0) SAFETENSORS_FAIL(path, "the header is empty; expected a JSON object");

  std::string text(n, '\0');
  read_at(f, text.data(), n, 8, "the header");
  if (text[0] != '{')
    SAFETENSORS_FAIL(path, "the header must begin with '{', found byte ", int{static_cast<unsigned char>(text[0])});
  const json header = parse_header(path, text);
  if (!header.is_object()) SAFETENSORS_FAIL(path, "the header must be a JSON object, found ", json_type(header));

  Contents out;
  std::vector<Entry> entries;
  for (auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      out.metadata = parse_metadata(path, value);
    } else {
      entries.push_back(parse_entry(path, key, value));
    }
  }
  check_tiling(f, entries, n);
  for (const Entry& e : entries) out.tensors.emplace(e.name, read_tensor(f, e, 8 + n));
  return out;
}

#undef SAFETENSORS_FAIL

}  // namespace minidl::safetensors
