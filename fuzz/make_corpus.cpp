// Writes the seed corpora of the fuzz targets into <dir>/<target>/: small valid files made by
// minidl's own writers, and truncated copies of some, so the fuzzers start past the first checks.
//   make_corpus fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "data/idx.h"
#include "fuzz_models.h"
#include "optim/checkpoint.h"

using namespace minidl;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Keeps `file` as seed `name`, with `prefix` before its bytes, and the first `cut` bytes as `name`_cut.
void seed(const fs::path& dir, const std::string& name, const fs::path& file, const std::string& prefix = "",
          size_t cut = 0) {
  const std::string bytes = prefix + read_all(file);
  put(dir / name, bytes);
  if (cut > 0) put(dir / (name + "_cut"), bytes.substr(0, prefix.size() + cut));
  fs::remove(file);
}

// fuzz_idx's control byte: dimensions - 1, and 0x80 to name the file .gz.
std::string control(int ndim, bool gz) { return std::string(1, static_cast<char>((ndim - 1) | (gz ? 0x80 : 0))); }

void idx_seeds(const fs::path& dir) {
  const fs::path tmp = dir / "tmp";
  std::vector<uint8_t> labels = {7, 2, 1, 0, 4}, pixels(2 * 3 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 14);
  data::write_idx(tmp, {5}, labels);
  seed(dir, "labels", tmp, control(1, false), 6);
  data::write_idx(tmp, {2, 3, 3}, pixels);
  seed(dir, "images", tmp, control(3, false), 25);
  data::write_idx(tmp, {1, 1, 1, 1, 1, 1, 1, 2}, {9, 8});
  seed(dir, "eight_dims", tmp, control(8, false));
  data::write_idx(tmp.string() + ".gz", {5}, labels);
  seed(dir, "labels_gz", tmp.string() + ".gz", control(1, true), 20);
  data::write_idx(tmp.string() + ".gz", {2, 3, 3}, pixels);
  seed(dir, "images_gz", tmp.string() + ".gz", control(3, true));
}

void safetensors_seeds(const fs::path& dir) {
  const fs::path tmp = dir / "tmp";
  safetensors::save(tmp, {{"w", Tensor::from_vector<float>({1.5f, -2.f, 0.25f, 3.f, 0.f, -0.5f}, {2, 3})},
                          {"ids", Tensor::from_vector<int64_t>({7, -1})},
                          {"mask", Tensor::from_vector<bool>({true, false, true})},
                          {"scale", Tensor::from_vector<double>({0.1}, {1}).reshape({})},
                          {"empty", Tensor::empty({0, 4})}},
                    {{"note", "seed"}});
  seed(dir, "mixed", tmp, "", 100);
  safetensors::save(tmp, {{"x", Tensor::from_vector<float>({1.f, 2.f}, {2})}});
  seed(dir, "one", tmp, "", 40);
  safetensors::save(tmp, {});
  seed(dir, "none", tmp);
  safetensors::save(tmp, {{"b", Tensor::from_vector<float>({1.f, -0.f, 65504.f, 1e-8f}).to(kBFloat16)},
                          {"h", Tensor::from_vector<float>({0.5f, -2.f, 6e-8f}, {3, 1}).to(kFloat16)}});
  seed(dir, "sixteen_bit", tmp, "", 90);
}

// fuzz_text's control byte: 0 reads a corpus file, 1 a vocabulary's characters.
void text_seeds(const fs::path& dir) {
  put(dir / "ascii", std::string(1, '\0') + "To be, or not to be: that is the question.\n");
  const std::string multibyte = "caf\xc3\xa9 \xe2\x80\x94 \xe2\x98\x83 \xf0\x9d\x84\x9e\n";  // é, —, ☃, 𝄞
  put(dir / "multibyte", std::string(1, '\0') + multibyte);
  put(dir / "multibyte_cut", std::string(1, '\0') + multibyte.substr(0, 11));  // inside the snowman
  put(dir / "vocabulary", std::string(1, '\1') + "\n !,.:Tabc\xc3\xa9");
}

void model_seeds(const fs::path& nn_dir, const fs::path& checkpoint_dir) {
  nn::Sequential model = fuzz::make_model();
  nn::save(*model, nn_dir / "tmp", {{"epochs", "1"}});
  seed(nn_dir, "model", nn_dir / "tmp", "", 200);

  // One checkpoint only: the generator's state alone takes 6 KB of text.
  auto optimizer = fuzz::make_optimizer(*model);
  model->train();
  Tensor y = model->forward(randn({5, 3}));
  Tensor loss = (y * y).mean();
  loss.backward();
  optimizer->step();
  optim::save_checkpoint(checkpoint_dir / "tmp", *model, *optimizer, {1, 1});
  seed(checkpoint_dir, "stepped", checkpoint_dir / "tmp", "", 300);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* target : {"fuzz_idx", "fuzz_safetensors", "fuzz_nn_load", "fuzz_checkpoint", "fuzz_text"})
    fs::create_directories(root / target);
  idx_seeds(root / "fuzz_idx");
  safetensors_seeds(root / "fuzz_safetensors");
  model_seeds(root / "fuzz_nn_load", root / "fuzz_checkpoint");
  text_seeds(root / "fuzz_text");
  return 0;
}
