// IDX parsing and writing. The payload is read in chunks and grown as it arrives, so that a
// corrupt header claiming gigabytes costs nothing before the data runs out.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "data/byte_source.h"
#include "data/paths.h"

namespace minidl::data {

namespace {

constexpr uint64_t kMaxPayload = uint64_t{1} << 40;  // far past any real IDX file; guards the product

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

uint32_t magic_for(int ndim) { return 0x00000800u | static_cast<uint32_t>(ndim); }

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

size_t read_fully(detail::ByteSource& src, void* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    size_t got = src.read(static_cast<char*>(dst) + done, n - done);
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path, int ndim) {
  MINIDL_CHECK(ndim >= 1 && ndim <= 8, "read_idx: expected 1 to 8 dimensions, got ", ndim);
  IdxArray out;
  out.path = absolute_normal(path);
  const std::string where = out.path.string();
  auto src = detail::open_bytes(out.path);
  const char* data_word = src->compressed() ? "decompressed data" : "file";

  uint8_t head[4];
  size_t got = read_fully(*src, head, 4);
  MINIDL_CHECK(got == 4, where, ": not an IDX file: expected a 4-byte magic number ", hex32(magic_for(ndim)),
               ", but the ", data_word, " holds only ", got, " bytes");
  const uint32_t magic = big_endian(head);
  MINIDL_CHECK(head[0] == 0 && head[1] == 0 && head[2] == 0x08, where,
               ": not an IDX file of unsigned bytes: expected magic number ", hex32(magic_for(ndim)), ", found ",
               hex32(magic));
  MINIDL_CHECK(head[3] == ndim, where, ": wrong number of dimensions: expected ", ndim, " (magic ",
               hex32(magic_for(ndim)), "), found ", int{head[3]}, " (magic ", hex32(magic), ")");

  std::vector<uint8_t> dims(4 * static_cast<size_t>(ndim));
  got = read_fully(*src, dims.data(), dims.size());
  MINIDL_CHECK(got == dims.size(), where, ": truncated header: expected ", ndim, " dimension sizes (", dims.size(),
               " bytes) after the magic number, found ", got, " bytes");
  uint64_t payload = 1;
  for (int d = 0; d < ndim; ++d) {
    uint32_t size = big_endian(&dims[4 * static_cast<size_t>(d)]);
    out.shape.push_back(size);
    MINIDL_CHECK(size == 0 || payload <= kMaxPayload / size, where, ": implausible header: shape ", out.shape,
                 "... holds more than ", kMaxPayload, " bytes");
    payload *= size;
  }
  const uint64_t header_bytes = 4 + dims.size();
  const uint64_t expected = header_bytes + payload;

  if (src->size() >= 0) {
    const uint64_t size = static_cast<uint64_t>(src->size());
    MINIDL_CHECK(size >= expected, where, ": truncated file: the header (shape ", out.shape, ") needs ", expected,
                 " bytes, but the file has ", size);
    MINIDL_CHECK(size == expected, where, ": ", size - expected, " trailing bytes: the header (shape ", out.shape,
                 ") needs ", expected, " bytes, but the file has ", size);
  }

  // A raw file's size has been checked against the header; a gzip header is trusted only so far:
  // chunks grow with the data actually read, so a short stream costs at most twice its size.
  out.bytes.reserve(src->size() >= 0 ? payload : std::min<uint64_t>(payload, uint64_t{1} << 26));
  size_t done = 0;
  while (done < payload) {
    const size_t chunk = std::clamp<size_t>(done, size_t{1} << 16, size_t{1} << 24);
    size_t want = std::min<uint64_t>(chunk, payload - done);
    out.bytes.resize(done + want);
    size_t n = read_fully(*src, out.bytes.data() + done, want);
    done += n;
    MINIDL_CHECK(n == want, where, ": truncated ", data_word, ": the header (shape ", out.shape, ") needs ", expected,
                 " bytes, but the ", data_word, " ends after ", header_bytes + done);
  }
  // Reading past the end also makes the gzip reader check the trailer's CRC and length.
  uint8_t extra;
  MINIDL_CHECK(read_fully(*src, &extra, 1) == 0, where, ": trailing bytes: the header (shape ", out.shape,
               ") needs ", expected, " bytes, but the ", data_word, " is longer");
  return out;
}

void write_idx(const std::filesystem::path& path, const std::vector<int64_t>& shape,
               const std::vector<uint8_t>& bytes) {
  const std::string where = absolute_normal(path).string();
  MINIDL_CHECK(!shape.empty() && shape.size() <= 255, where, ": write_idx: expected 1 to 255 dimensions, got ",
               shape.size());
  int64_t count = 1;
  for (int64_t d : shape) {
    MINIDL_CHECK(d >= 0 && d <= 0xffffffffLL, where, ": write_idx: dimension size ", d, " does not fit in 32 bits");
    count *= d;
  }
  MINIDL_CHECK(count == static_cast<int64_t>(bytes.size()), where, ": write_idx: shape ", shape, " holds ", count,
               " bytes, but ", bytes.size(), " were given");
  std::vector<uint8_t> data;
  data.reserve(4 + 4 * shape.size() + bytes.size());
  auto put32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) data.push_back(static_cast<uint8_t>(v >> s));
  };
  put32(magic_for(static_cast<int>(shape.size())));
  for (int64_t d : shape) put32(static_cast<uint32_t>(d));
  data.insert(data.end(), bytes.begin(), bytes.end());

  if (path.extension() == ".gz") {
    gzFile gz = gzopen(path.c_str(), "wb");
    MINIDL_CHECK(gz != nullptr, where, ": cannot open for writing: ", std::strerror(errno));
    size_t done = 0;
    bool ok = true;
    while (ok && done < data.size()) {
      unsigned n = static_cast<unsigned>(std::min<size_t>(data.size() - done, 1u << 30));
      ok = gzwrite(gz, data.data() + done, n) == static_cast<int>(n);
      done += n;
    }
    ok = gzclose(gz) == Z_OK && ok;
    MINIDL_CHECK(ok, where, ": writing the gzip file failed");
  } else {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    MINIDL_CHECK(f != nullptr, where, ": cannot open for writing: ", std::strerror(errno));
    bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
    ok = std::fclose(f) == 0 && ok;
    MINIDL_CHECK(ok, where, ": write error: ", std::strerror(errno));
  }
}

std::vector<std::string> idx_file_names(const std::string& split, const std::string& kind) {
  MINIDL_CHECK(kind == "images" || kind == "labels", "idx_file_names: kind must be \"images\" or \"labels\", got \"",
               kind, "\"");
  const std::string idx = kind == "images" ? "idx3-ubyte" : "idx1-ubyte";
  const std::string dash = split + "-" + kind + "-" + idx, dot = split + "-" + kind + "." + idx;
  return {dash, dot, dash + ".gz", dot + ".gz"};
}

std::optional<std::filesystem::path> find_idx_file(const std::filesystem::path& folder, const std::string& split,
                                                   const std::string& kind) {
  for (const std::string& name : idx_file_names(split, kind)) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(folder / name, ec)) return folder / name;
  }
  return std::nullopt;
}

IdxSplit read_idx_split(const std::filesystem::path& folder, bool train) {
  const std::filesystem::path abs = absolute_normal(folder);
  std::error_code ec;
  MINIDL_CHECK(std::filesystem::is_directory(abs, ec), abs.string(), ": expected a folder with IDX files, but ",
               std::filesystem::exists(abs, ec) ? "it is not a folder" : "it does not exist");
  const std::string split = train ? "train" : "t10k";
  auto locate = [&](const std::string& kind) {
    auto found = find_idx_file(abs, split, kind);
    if (!found) {
      std::string tried;
      for (const std::string& name : idx_file_names(split, kind)) tried += (tried.empty() ? "" : ", ") + name;
      MINIDL_FAIL(abs.string(), ": no ", train ? "training" : "test", " ", kind, " file; tried ", tried);
    }
    return *found;
  };
  IdxSplit out{read_idx(locate("images"), 3), read_idx(locate("labels"), 1)};
  MINIDL_CHECK(out.images.shape[0] == out.labels.shape[0], "image and label counts differ: ",
               out.images.path.string(), " holds ", out.images.shape[0], " images, but ", out.labels.path.string(),
               " holds ", out.labels.shape[0], " labels; expected equal counts");
  return out;
}

}  // namespace minidl::data
