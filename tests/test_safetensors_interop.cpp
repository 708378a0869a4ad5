// Files exchanged with PyTorch. scripts/safetensors_interop.py writes the MNIST MLP with
// safetensors.torch.save_file into $MINIDL_INTEROP_DIR and runs this test, which loads it into
// minidl's Mlp and compares outputs, then writes minidl's own files for the script to load in
// PyTorch. Without that folder (no PyTorch here) it skips, saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "apps/common/models.h"
#include "core/safetensors.h"
#include "nn/serialize.h"

namespace minidl::safetensors_interop_test {

TEST(SafetensorsInterop, ExchangesTheMnistMlpWithPyTorch) {
  const char* env = std::getenv("MINIDL_INTEROP_DIR");
  if (env == nullptr)
    GTEST_SKIP() << "MINIDL_INTEROP_DIR is not set: scripts/safetensors_interop.py runs this with PyTorch's files";
  const std::filesystem::path dir(env);

  // PyTorch -> minidl: the same names, shapes and dtypes, and the same outputs.
  mnist_app::Mlp from_torch;
  nn::load(from_torch, (dir / "torch_mlp.safetensors").string());
  safetensors::Contents io = safetensors::load((dir / "torch_io.safetensors").string());
  NoGradGuard no_grad;
  std::vector<float> ours = from_torch.forward(io.tensors.at("input")).to_vector<float>();
  std::vector<float> theirs = io.tensors.at("output").to_vector<float>();
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) ASSERT_NEAR(ours[i], theirs[i], 1e-4f) << "output element " << i;

  // minidl -> PyTorch: the script loads these with safetensors and checks them in PyTorch.
  manual_seed(2024);
  mnist_app::Mlp mine;
  nn::save(mine, (dir / "minidl_mlp.safetensors").string(), {{"written_by", "minidl"}});
  Tensor x = randn({4, 1, 28, 28});
  safetensors::save((dir / "minidl_io.safetensors").string(), {{"input", x}, {"output", mine.forward(x)}});
}

}  // namespace minidl::safetensors_interop_test
