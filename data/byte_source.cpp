// Raw and gzip byte streams over a file. Gzip goes through zlib's inflate rather than gzread
// because gzread silently ignores bytes after the last gzip member and reads non-gzip data as-is;
// a data file with either problem should be reported, not half-read.
#include "data/byte_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace minidl::data::detail {

namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

File open_file(const std::filesystem::path& path) {
  std::error_code ec;
  MINIDL_CHECK(std::filesystem::exists(path, ec), path.string(), ": file does not exist");
  MINIDL_CHECK(!std::filesystem::is_directory(path, ec), path.string(), ": expected a file, found a folder");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  MINIDL_CHECK(f != nullptr, path.string(), ": cannot open for reading: ", std::strerror(errno));
  return File(f, &std::fclose);
}

size_t read_file(std::FILE* f, void* dst, size_t n, const std::filesystem::path& path) {
  size_t got = std::fread(dst, 1, n, f);
  MINIDL_CHECK(got == n || !std::ferror(f), path.string(), ": read error: ", std::strerror(errno));
  return got;
}

class RawSource : public ByteSource {
 public:
  RawSource(File file, std::filesystem::path path, int64_t size)
      : file_(std::move(file)), path_(std::move(path)), size_(size) {}
  size_t read(void* dst, size_t n) override { return read_file(file_.get(), dst, n, path_); }
  int64_t size() const override { return size_; }
  bool compressed() const override { return false; }

 private:
  File file_;
  std::filesystem::path path_;
  int64_t size_;
};

class GzipSource : public ByteSource {
 public:
  GzipSource(File file, std::filesystem::path path) : file_(std::move(file)), path_(std::move(path)), in_(1 << 18) {
    std::memset(&zs_, 0, sizeof(zs_));
    // 16 + MAX_WBITS: gzip framing only, so the trailer's CRC-32 and length are checked.
    MINIDL_CHECK(inflateInit2(&zs_, 16 + MAX_WBITS) == Z_OK, path_.string(), ": cannot start zlib: ",
                 zs_.msg ? zs_.msg : "out of memory");
  }
  ~GzipSource() override { inflateEnd(&zs_); }

  size_t read(void* dst, size_t n) override {
    zs_.next_out = static_cast<Bytef*>(dst);
    // zlib counts in uInt; larger reads are served in pieces by the caller's loop.
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const uInt wanted = zs_.avail_out;
    auto total_out = [&] { return out_ + (wanted - zs_.avail_out); };
    while (zs_.avail_out > 0) {
      if (member_done_) {
        if (!refill_if_empty()) break;  // clean end of the file after a complete member
        // Another member may follow (concatenated .gz files are valid gzip); anything else is junk.
        MINIDL_CHECK(zs_.next_in[0] == 0x1f, path_.string(),
                     ": corrupt gzip file: unexpected bytes after the end of the compressed data");
        inflateReset(&zs_);
        member_done_ = false;
      }
      MINIDL_CHECK(refill_if_empty(), path_.string(),
                   ": corrupt gzip file: the compressed data ends early (truncated file), after ", total_out(),
                   " decompressed bytes");
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        MINIDL_FAIL(path_.string(), ": corrupt gzip file: ", zs_.msg ? zs_.msg : zError(rc), " (after ",
                    total_out(), " decompressed bytes)");
      }
    }
    size_t got = wanted - zs_.avail_out;
    out_ += got;
    return got;
  }
  int64_t size() const override { return -1; }
  bool compressed() const override { return true; }

 private:
  // Makes input available; false at the end of the file.
  bool refill_if_empty() {
    if (zs_.avail_in > 0) return true;
    size_t got = read_file(file_.get(), in_.data(), in_.size(), path_);
    zs_.next_in = in_.data();
    zs_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  File file_;
  std::filesystem::path path_;
  std::vector<Bytef> in_;
  z_stream zs_;
  bool member_done_ = false;
  uint64_t out_ = 0;
};

}  // namespace

std::unique_ptr<ByteSource> open_bytes(const std::filesystem::path& path) {
  File file = open_file(path);
  unsigned char magic[2] = {0, 0};
  size_t got = read_file(file.get(), magic, 2, path);
  MINIDL_CHECK(std::fseek(file.get(), 0, SEEK_SET) == 0, path.string(), ": cannot seek: ", std::strerror(errno));
  const bool gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (gzip) return std::make_unique<GzipSource>(std::move(file), path);
  if (path.extension() == ".gz") {
    char found[16];
    std::snprintf(found, sizeof(found), "%02x %02x", magic[0], magic[1]);
    MINIDL_FAIL(path.string(), ": expected gzip data (the name ends in .gz), but the file does not start with the "
                "gzip magic bytes 1f 8b; found ", got == 0 ? std::string("an empty file") : std::string(found));
  }
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  return std::make_unique<RawSource>(std::move(file), path, ec ? -1 : static_cast<int64_t>(size));
}

}  // namespace minidl::data::detail
