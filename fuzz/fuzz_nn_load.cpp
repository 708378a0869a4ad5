// libFuzzer target: nn::load of any bytes into a fixed model (fuzz_models.h). It may throw
// minidl::Error and nothing else, and a load that throws must leave the model unchanged.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "fuzz_models.h"

using namespace minidl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("input.safetensors", data, size);
  nn::Sequential model = fuzz::make_model();
  const auto before = fuzz::snapshot(model->state_dict());
  try {
    nn::load(*model, path);
  } catch (const Error&) {
    if (fuzz::snapshot(model->state_dict()) != before) fuzz::fail("a failed nn::load changed the model");
  }
  return 0;
}
