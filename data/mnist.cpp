// Loads an MNIST-format split into two tensors once; every batch after that is a gather.
#include "data/mnist.h"

#include <zlib.h>

#include <array>

#include "core/error.h"
#include "data/idx.h"
#include "data/paths.h"

namespace minidl::data {

namespace {

bool has_split(const std::filesystem::path& folder, bool train) {
  const char* split = train ? "train" : "t10k";
  return find_idx_file(folder, split, "images") && find_idx_file(folder, split, "labels");
}

Tensor normalized_images(const IdxArray& images, double mean, double std) {
  const int64_t n = images.shape[0], rows = images.shape[1], cols = images.shape[2];
  MINIDL_CHECK(rows > 0 && cols > 0, images.path.string(), ": expected images of positive size, found shape ",
               images.shape);
  // 256 possible pixel values: a lookup table makes the conversion one load per pixel.
  std::array<float, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<float>((v / 255.0 - mean) / std);
  Tensor out = Tensor::empty({n, 1, rows, cols}, kFloat32);
  float* dst = out.data<float>();
  const uint8_t* src = images.bytes.data();
  const int64_t count = static_cast<int64_t>(images.bytes.size());
#pragma omp parallel for if (count > (1 << 20))
  for (int64_t i = 0; i < count; ++i) dst[i] = lut[src[i]];
  return out;
}

Tensor checked_labels(const IdxArray& labels) {
  const int64_t n = labels.shape[0];
  Tensor out = Tensor::empty({n}, kInt64);
  int64_t* dst = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t v = labels.bytes[static_cast<size_t>(i)];
    MINIDL_CHECK(v <= 9, labels.path.string(), ": label ", int{v}, " at index ", i, " is outside the classes 0..9");
    dst[i] = v;
  }
  return out;
}

// CRC-32 of the label bytes (after the header) of the published files, to tell the two data sets
// apart: both have the same format and sizes, so MNIST's files given as Fashion-MNIST's (or the
// reverse) would otherwise train on the wrong data without a word. Other files (a user's own data
// in this format) are not refused.
struct KnownLabels {
  const char* name;
  bool fashion, train;
  uint32_t crc;
};
constexpr KnownLabels kKnownLabels[] = {
    {"MNIST", false, true, 0xba07e8efu},
    {"MNIST", false, false, 0xee8604d9u},
    {"Fashion-MNIST", true, true, 0x2ed6e46au},
    {"Fashion-MNIST", true, false, 0x242bc73fu},
};

void check_identity(const IdxArray& labels, const char* expected, bool fashion, bool train) {
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0L, labels.bytes.data(), static_cast<uInt>(labels.bytes.size())));
  for (const KnownLabels& known : kKnownLabels) {
    MINIDL_CHECK(!(known.crc == crc && known.fashion != fashion), labels.path.string(), ": these are ", known.name,
                 "'s ", train ? "training" : "test", " labels, but ", expected,
                 "'s were asked for; point --data at the folder that holds ", expected, "'s files (",
                 fashion ? "fashion-mnist/" : "mnist/", ")");
  }
}

// The folder holding the files: <root>/<subdir> when it has them, else <root> itself.
std::filesystem::path locate(const std::filesystem::path& root, bool train, const char* name, const char* subdir,
                             bool fashion) {
  const std::filesystem::path abs = absolute_normal(root);
  for (const auto& candidate : {abs / subdir, abs}) {
    if (has_split(candidate, train)) return candidate;
  }
  std::string tried;
  for (const char* kind : {"images", "labels"}) {
    for (const std::string& f : idx_file_names(train ? "train" : "t10k", kind)) tried += (tried.empty() ? "" : ", ") + f;
  }
  MINIDL_FAIL(name, " ", train ? "training" : "test", " files not found in ", (abs / subdir).string(), " or ",
              abs.string(), " (looked for ", tried, "). Fetch them with: ", get_data_command(abs, fashion));
}

}  // namespace

MNIST::MNIST(const std::filesystem::path& root, bool train) : MNIST(root, train, Spec{"MNIST", "mnist", kMean, kStd, false}) {}

MNIST MNIST::unnormalized(const std::filesystem::path& root, bool train) {
  return MNIST(root, train, Spec{"MNIST", "mnist", /*mean=*/0.0, /*std=*/1.0, false});
}

struct MNIST::Loaded {
  Tensor images, labels;
  std::filesystem::path folder;
  bool train;
};

MNIST::MNIST(const std::filesystem::path& root, bool train, const Spec& spec)
    : MNIST([&] {
        std::filesystem::path folder = locate(root, train, spec.name, spec.subdir, spec.fashion);
        IdxSplit split = read_idx_split(folder, train);
        check_identity(split.labels, spec.name, spec.fashion, train);
        return Loaded{normalized_images(split.images, spec.mean, spec.std), checked_labels(split.labels), folder, train};
      }()) {}

MNIST::MNIST(Loaded&& loaded)
    : TensorDataset(std::move(loaded.images), std::move(loaded.labels)),
      train_(loaded.train),
      folder_(std::move(loaded.folder)) {}

FashionMNIST::FashionMNIST(const std::filesystem::path& root, bool train)
    : MNIST(root, train, Spec{"Fashion-MNIST", "fashion-mnist", kMean, kStd, true}) {}

}  // namespace minidl::data
