#pragma once
// MNIST and Fashion-MNIST, held in memory as normalized float32 images and int64 labels.
#include <filesystem>
#include <string>

#include "data/dataset.h"

namespace minidl::data {

/// The MNIST digits: images float32 [N, 1, 28, 28] normalized as (x / 255 - 0.1307) / 0.3081,
/// labels int64 [N] in 0..9 (N = 60000 with train, 10000 without). `root` is the data folder
/// holding `mnist/` (as scripts/get_data.sh lays it out) or the folder with the IDX files itself;
/// raw and .gz files under either naming style are read. Missing files give an error that quotes
/// the command fetching them.
///   MNIST train_set(data_root(), /*train=*/true);  Tensor x = train_set.images();  // [60000, 1, 28, 28]
class MNIST : public TensorDataset {
 public:
  static constexpr double kMean = 0.1307;
  static constexpr double kStd = 0.3081;

  explicit MNIST(const std::filesystem::path& root, bool train = true);
  /// The same files with images left as pixel / 255 in [0, 1], as libtorch's datasets::MNIST gives
  /// them (to be normalized by a transform).
  static MNIST unnormalized(const std::filesystem::path& root, bool train = true);

  /// All images, float32 [N, 1, rows, cols]: gather batches from it with index_select.
  const Tensor& images() const { return data(); }
  /// All labels, int64 [N].
  const Tensor& targets() const { return TensorDataset::targets(); }
  bool is_train() const { return train_; }
  /// The folder the IDX files were read from (absolute).
  const std::filesystem::path& folder() const { return folder_; }

 protected:
  struct Spec {
    const char* name;    // for messages
    const char* subdir;  // under the data folder
    double mean, std;
    bool fashion;        // which get_data.sh flag fetches it
  };
  MNIST(const std::filesystem::path& root, bool train, const Spec& spec);

 private:
  struct Loaded;  // the tensors and folder, read before the base is built from them
  explicit MNIST(Loaded&& loaded);

  bool train_;
  std::filesystem::path folder_;
};

/// Zalando's Fashion-MNIST: the same format, layout and API as MNIST, read from `fashion-mnist/`.
/// Normalized with its own training-set statistics, mean 0.2860 and standard deviation 0.3530
/// (the values commonly used for it, computed like MNIST's 0.1307 / 0.3081).
///   FashionMNIST test_set(data_root(), /*train=*/false);
class FashionMNIST : public MNIST {
 public:
  static constexpr double kMean = 0.2860;
  static constexpr double kStd = 0.3530;

  explicit FashionMNIST(const std::filesystem::path& root, bool train = true);
};

}  // namespace minidl::data
