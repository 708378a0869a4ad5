// libFuzzer target: optim::load_checkpoint of any bytes into a fixed model and Adam optimizer
// (fuzz_models.h): the file's tensors, the optimizer's flattened state names, and the position
// and generator state parsed from metadata strings. It may throw minidl::Error and nothing else,
// and a load that throws must leave the model, the optimizer and the default generator unchanged.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "fuzz_models.h"

using namespace minidl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("input.safetensors", data, size);
  nn::Sequential model = fuzz::make_model();
  auto optimizer = fuzz::make_optimizer(*model);
  const auto model_before = fuzz::snapshot(model->state_dict());
  const auto optimizer_before = fuzz::snapshot(optimizer->state_dict());
  const Generator::State rng_before = default_generator().state();
  try {
    optim::load_checkpoint(path, *model, *optimizer);
  } catch (const Error&) {
    const Generator::State rng = default_generator().state();
    if (fuzz::snapshot(model->state_dict()) != model_before) fuzz::fail("a failed load changed the model");
    if (fuzz::snapshot(optimizer->state_dict()) != optimizer_before) fuzz::fail("a failed load changed the optimizer");
    if (rng.seed != rng_before.seed || rng.offset != rng_before.offset || rng.engine != rng_before.engine)
      fuzz::fail("a failed load changed the default generator");
  }
  return 0;
}
