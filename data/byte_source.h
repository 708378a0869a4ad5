#pragma once
// Sequential reading of a file's bytes, raw or gzip-compressed. Internal to data/: the IDX reader
// streams through it so that a lying header never makes it allocate more than the file holds.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace minidl::data::detail {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Reads up to `n` bytes into `dst`; returns fewer only at the end of the data. Throws
  /// minidl::Error naming the file on I/O errors and corrupt compressed data.
  virtual size_t read(void* dst, size_t n) = 0;
  /// Bytes the data holds, when known without reading it (raw files); -1 otherwise.
  virtual int64_t size() const = 0;
  /// True when the bytes are decompressed from gzip.
  virtual bool compressed() const = 0;
};

/// Opens `path` (absolute). Gzip data is recognized by its magic bytes 1f 8b and decompressed as
/// it is read; a file named .gz that is not gzip data is an error.
///   auto src = open_bytes("/data/mnist/t10k-labels-idx1-ubyte.gz");  src->read(buf, 8);
std::unique_ptr<ByteSource> open_bytes(const std::filesystem::path& path);

}  // namespace minidl::data::detail
