// libFuzzer target: safetensors::load on any bytes. The loader may throw minidl::Error and
// nothing else: any other exception, crash, sanitizer report, leak or huge allocation is a bug.
// A file it accepts must survive a round trip: save() what was loaded, load that, and get the same
// names, dtypes, shapes, bytes and metadata.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/safetensors.h"
#include "fuzz_input.h"

using namespace minidl;

namespace {

bool same(const safetensors::Contents& a, const safetensors::Contents& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (auto ia = a.tensors.begin(), ib = b.tensors.begin(); ia != a.tensors.end(); ++ia, ++ib) {
    const Tensor &x = ia->second, &y = ib->second;
    if (ia->first != ib->first || x.dtype() != y.dtype() || x.shape() != y.shape() || x.nbytes() != y.nbytes())
      return false;
    if (x.nbytes() > 0 && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("input.safetensors", data, size);
  safetensors::Contents contents;
  try {
    contents = safetensors::load(path);
  } catch (const Error&) {
    return 0;
  }
  const std::string again = (fuzz::scratch_dir() / "again.safetensors").string();
  safetensors::save(again, contents.tensors, contents.metadata);
  if (!same(contents, safetensors::load(again))) fuzz::fail("a saved file loads back differently");
  return 0;
}
