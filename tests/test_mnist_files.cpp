// The real MNIST and Fashion-MNIST files, when scripts/get_data.sh has fetched them: counts,
// label range, normalization, and one DataLoader epoch over the training set.
#include <gtest/gtest.h>

#include <cmath>

#include "data/data.h"
#include "minidl.h"

namespace minidl::mnist_files_test {

using namespace minidl::data;

namespace {

bool present(const std::filesystem::path& folder) {
  for (bool train : {true, false}) {
    const char* split = train ? "train" : "t10k";
    if (!find_idx_file(folder, split, "images") || !find_idx_file(folder, split, "labels")) return false;
  }
  return true;
}

// Mean and standard deviation over every pixel, in double so 47M terms add up exactly enough.
std::pair<double, double> moments(const Tensor& images) {
  const float* x = images.data<float>();
  double sum = 0, sq = 0;
  const int64_t n = images.numel();
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sq += static_cast<double>(x[i]) * x[i];
  }
  const double mean = sum / static_cast<double>(n);
  return {mean, std::sqrt(sq / static_cast<double>(n) - mean * mean)};
}

template <class D>
void check_dataset(const char* subdir, bool fashion) {
  const std::filesystem::path root = data_root();
  if (!present(root / subdir)) {
    GTEST_SKIP() << (root / subdir).string() << " holds no " << subdir << " files; fetch them with: "
                 << get_data_command(root, fashion);
  }
  D train(root, true), test(root, false);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.images().shape(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(test.images().shape(), (Shape{10000, 1, 28, 28}));
  for (const D* set : {&train, &test}) {
    std::vector<int64_t> counts(10, 0);
    for (int64_t y : set->targets().template to_vector<int64_t>()) {
      ASSERT_TRUE(y >= 0 && y <= 9) << "label " << y;
      ++counts[static_cast<size_t>(y)];
    }
    for (int64_t c : counts) EXPECT_GT(c, set->size() / 20) << "a class is nearly missing";
  }
  // The constants are the training set's own statistics, so normalized it has mean 0 and std 1.
  auto [mean, stddev] = moments(train.images());
  EXPECT_NEAR(mean, 0.0, 2e-3);
  EXPECT_NEAR(stddev, 1.0, 2e-3);

  DataLoader loader(train, DataLoaderOptions().batch_size(64).shuffle(true).seed(1));
  EXPECT_EQ(loader.size(), 938);
  int64_t seen = 0, batches = 0, last = 0;
  for (Batch& batch : loader) {
    seen += batch.size();
    last = batch.size();
    ++batches;
  }
  EXPECT_EQ(seen, 60000);
  EXPECT_EQ(batches, 938);
  EXPECT_EQ(last, 60000 - 937 * 64);
}

}  // namespace

TEST(MnistFiles, CountsLabelsAndNormalization) { check_dataset<MNIST>("mnist", false); }

TEST(MnistFiles, FashionCountsLabelsAndNormalization) { check_dataset<FashionMNIST>("fashion-mnist", true); }

TEST(MnistFiles, OneDataSetGivenAsTheOtherIsAnError) {
  const std::filesystem::path root = data_root();
  if (!present(root / "mnist") || !present(root / "fashion-mnist"))
    GTEST_SKIP() << "needs both data sets under " << root.string() << "; fetch them with scripts/get_data.sh --fashion";
  // A folder holding MNIST's files where Fashion-MNIST's are asked for, and the reverse.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "minidl_swapped_data";
  std::filesystem::remove_all(dir);
  for (const auto& [from, to] : {std::pair{"mnist", "fashion-mnist"}, std::pair{"fashion-mnist", "mnist"}}) {
    std::filesystem::create_directories(dir / to);
    for (const auto& entry : std::filesystem::directory_iterator(root / from))
      std::filesystem::create_symlink(entry.path(), dir / to / entry.path().filename());
  }
  try {
    FashionMNIST swapped(dir, true);
    ADD_FAILURE() << "MNIST's files were read as Fashion-MNIST";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("these are MNIST's training labels, but Fashion-MNIST's were asked for"),
              std::string::npos)
        << e.what();
  }
  try {
    MNIST swapped(dir, false);
    ADD_FAILURE() << "Fashion-MNIST's files were read as MNIST";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("these are Fashion-MNIST's test labels"), std::string::npos) << e.what();
  }
  // The right files still load.
  EXPECT_EQ(MNIST(root, false).size(), 10000);
  std::filesystem::remove_all(dir);
}

}  // namespace minidl::mnist_files_test
