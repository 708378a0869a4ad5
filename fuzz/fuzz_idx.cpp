// libFuzzer target: data::read_idx, the reader of MNIST's IDX files, raw or gzip, on any bytes.
// Input: one control byte, then the file. Bits 0-2 of the control byte give the dimensions
// expected (1 to 8); bit 7 names the file .gz, which also reaches the check that such a file
// really is gzip. The reader may throw minidl::Error and nothing else: any other exception,
// crash, sanitizer report or leak is a bug. A file it accepts must come back byte for byte from
// write_idx (raw files) and read back the same (gzip).
#include <cstdint>
#include <string>

#include "core/error.h"
#include "data/idx.h"
#include "fuzz_input.h"

using namespace minidl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int ndim = 1 + (data[0] & 7);
  const bool gz_name = (data[0] & 0x80) != 0;
  const std::string path = fuzz::write_input(gz_name ? "input.gz" : "input", data + 1, size - 1);
  data::IdxArray a;
  try {
    a = data::read_idx(path, ndim);
  } catch (const Error&) {
    return 0;
  }
  uint64_t count = 1;
  for (int64_t d : a.shape) count *= static_cast<uint64_t>(d);
  if (a.shape.size() != static_cast<size_t>(ndim) || a.bytes.size() != count) fuzz::fail("shape and bytes disagree");

  const bool gzip = size >= 3 && data[1] == 0x1f && data[2] == 0x8b;
  const std::string again = (fuzz::scratch_dir() / (gzip ? "again.gz" : "again")).string();
  data::write_idx(again, a.shape, a.bytes);
  if (!gzip && fuzz::read_file(again) != std::string(reinterpret_cast<const char*>(data + 1), size - 1))
    fuzz::fail("write_idx does not give back the file read_idx accepted");
  data::IdxArray b = data::read_idx(again, ndim);
  if (b.shape != a.shape || b.bytes != a.bytes) fuzz::fail("a written file reads back differently");
  return 0;
}
