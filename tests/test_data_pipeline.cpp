// libtorch's data pipeline: datasets::Dataset -> map(transforms...) -> make_data_loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>

#include "data/data.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::data_pipeline_test {

using namespace minidl::data;

namespace {

// Example i: data [i, 10 i], target i.
struct Pairs : datasets::Dataset<Pairs> {
  explicit Pairs(size_t n) : n(n) {}
  Example<> get(size_t i) override {
    return {Tensor::from_vector<float>({float(i), float(10 * i)}), full({}, double(i), kInt64)};
  }
  std::optional<size_t> size() const override { return n; }
  size_t n;
};

// Each get() draws noise: shows which generator a worker draws from.
struct Noisy : datasets::Dataset<Noisy> {
  Example<> get(size_t i) override { return {randn({3}), full({}, double(i), kInt64)}; }
  std::optional<size_t> size() const override { return 24; }
};

std::vector<Example<>> all_batches(auto& loader) {
  std::vector<Example<>> out;
  for (Example<>& batch : loader) out.push_back(batch);
  return out;
}

}  // namespace

TEST(DataPipeline, NormalizeThenStackGivesBatchesInSamplerOrder) {
  auto dataset = Pairs(10).map(transforms::Normalize<>(1.0, 2.0)).map(transforms::Stack<>());
  EXPECT_EQ(dataset.size().value(), 10u);
  auto loader = make_data_loader<samplers::SequentialSampler>(std::move(dataset), 4);
  std::vector<Example<>> batches = all_batches(*loader);
  ASSERT_EQ(batches.size(), 3u);  // 4 + 4 + 2
  EXPECT_EQ(batches[0].data.shape(), (Shape{4, 2}));
  EXPECT_EQ(batches[2].data.shape(), (Shape{2, 2}));
  EXPECT_EQ(batches[1].target.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6, 7}));
  // example 5: ([5, 50] - 1) / 2
  std::vector<float> d = batches[1].data.to_vector<float>();
  EXPECT_FLOAT_EQ(d[2], 2.0f);
  EXPECT_FLOAT_EQ(d[3], 24.5f);
}

TEST(DataPipeline, DropLastAndOptionsFormCompile) {
  auto loader = make_data_loader<samplers::SequentialSampler>(Pairs(10).map(transforms::Stack<>()),
                                                              DataLoaderOptions().batch_size(4).drop_last(true));
  EXPECT_EQ(all_batches(*loader).size(), 2u);
}

TEST(DataPipeline, WorkersGiveTheSameBatchesInTheSameOrder) {
  auto serial = make_data_loader<samplers::SequentialSampler>(Pairs(23).map(transforms::Stack<>()), 3);
  auto parallel = make_data_loader<samplers::SequentialSampler>(Pairs(23).map(transforms::Stack<>()),
                                                                DataLoaderOptions().batch_size(3).workers(3));
  std::vector<Example<>> a = all_batches(*serial), b = all_batches(*parallel);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].data.to_vector<float>(), b[k].data.to_vector<float>());
    EXPECT_EQ(a[k].target.to_vector<int64_t>(), b[k].target.to_vector<int64_t>());
  }
}

TEST(DataPipeline, RandomSamplerVisitsEveryExampleOnceInANewOrderEachEpoch) {
  manual_seed(3);
  auto loader = make_data_loader(Pairs(50).map(transforms::Stack<>()), DataLoaderOptions().batch_size(7).workers(2));
  std::vector<int64_t> first, second;
  for (auto& batch : *loader) for (int64_t t : batch.target.to_vector<int64_t>()) first.push_back(t);
  for (auto& batch : *loader) for (int64_t t : batch.target.to_vector<int64_t>()) second.push_back(t);
  EXPECT_EQ(std::set<int64_t>(first.begin(), first.end()).size(), 50u);
  EXPECT_EQ(first.size(), 50u);
  EXPECT_NE(first, second);
  manual_seed(3);
  auto again = make_data_loader(Pairs(50).map(transforms::Stack<>()), DataLoaderOptions().batch_size(7).workers(2));
  std::vector<int64_t> repeat;
  for (auto& batch : *again) for (int64_t t : batch.target.to_vector<int64_t>()) repeat.push_back(t);
  EXPECT_EQ(first, repeat);
}

TEST(DataPipeline, WorkersDrawFromTheirOwnSeededGenerators) {
  auto run = [](int64_t workers) {
    manual_seed(11);
    auto loader = make_data_loader<samplers::SequentialSampler>(
        Noisy().map(transforms::Stack<>()), DataLoaderOptions().batch_size(4).workers(workers));
    std::vector<float> values;
    for (auto& batch : *loader) for (float v : batch.data.to_vector<float>()) values.push_back(v);
    return values;
  };
  EXPECT_EQ(run(2), run(2));  // whatever the threads' timing
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(2), run(3));  // worker w makes batches w, w + W, ...: its seed decides them
}

TEST(DataPipeline, AWorkersExceptionReachesTheLoop) {
  struct Broken : datasets::Dataset<Broken> {
    Example<> get(size_t i) override {
      if (i == 5) throw std::runtime_error("example 5 is corrupt");
      return {zeros({2}), zeros({}, kInt64)};
    }
    std::optional<size_t> size() const override { return 8; }
  };
  auto loader = make_data_loader<samplers::SequentialSampler>(Broken().map(transforms::Stack<>()),
                                                              DataLoaderOptions().batch_size(2).workers(2));
  EXPECT_THROW(all_batches(*loader), std::runtime_error);
}

TEST(DataPipeline, NormalizePerChannelAndItsErrors) {
  Tensor image = ones({3, 2, 2});
  transforms::Normalize<> norm({0.0, 1.0, 2.0}, {1.0, 2.0, 4.0});
  std::vector<float> y = norm(image).to_vector<float>();
  EXPECT_FLOAT_EQ(y[0], 1.0f);
  EXPECT_FLOAT_EQ(y[4], 0.0f);
  EXPECT_FLOAT_EQ(y[8], -0.25f);
  minidl::testing::expect_error([&] { (void)norm(ones({2, 2, 2})); }, {"3 channel statistics need images [..., 3, H, W]"});
  minidl::testing::expect_error([&] { (void)transforms::Normalize<>(0.0, 0.0); }, {"stddev must not be 0"});
}

TEST(DataPipeline, RandomCropCutsAWindowOfThePaddedImage) {
  manual_seed(5);
  Tensor image = arange(1.0, 17.0).reshape({1, 4, 4});  // 1..16, no zeros: padding shows as 0
  transforms::RandomCrop crop(4, 2);
  std::set<std::vector<float>> seen;
  for (int i = 0; i < 30; ++i) {
    Tensor out = crop(image);
    ASSERT_EQ(out.shape(), (Shape{1, 4, 4}));
    std::vector<float> v = out.to_vector<float>();
    // A window of the padded image: every non-zero value v at (r, c) has v - 4 at (r - 1, c) when both are inside.
    for (int r = 1; r < 4; ++r)
      for (int c = 0; c < 4; ++c)
        if (v[r * 4 + c] > 4 && v[(r - 1) * 4 + c] != 0) {
          EXPECT_EQ(v[(r - 1) * 4 + c], v[r * 4 + c] - 4);
        }
    seen.insert(v);
  }
  EXPECT_GT(seen.size(), 3u);  // the offsets vary
  minidl::testing::expect_error([&] { (void)transforms::RandomCrop(9, 2)(image); }, {"does not fit"});
}

TEST(DataPipeline, RandomHorizontalFlipMirrorsTheLastDim) {
  Tensor image = arange(0.0, 6.0).reshape({1, 2, 3});
  EXPECT_EQ(transforms::RandomHorizontalFlip(1.0)(image).contiguous().to_vector<float>(),
            (std::vector<float>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(transforms::RandomHorizontalFlip(0.0)(image).contiguous().to_vector<float>(),
            (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(DataPipeline, MnistAsLibtorchGivesIt) {
  std::optional<datasets::MNIST> loaded;
  try {
    loaded.emplace(data_root(), datasets::MNIST::Mode::kTest);
  } catch (const Error& e) {
    GTEST_SKIP() << "MNIST not found; fetch it with scripts/get_data.sh (" << e.what() << ")";
  }
  datasets::MNIST& test = *loaded;
  EXPECT_FALSE(test.is_train());
  ASSERT_EQ(test.size().value(), 10000u);
  Example<> e = test.get(0);
  EXPECT_EQ(e.data.shape(), (Shape{1, 28, 28}));
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<int64_t>(), 7);  // the first test digit
  std::vector<float> pixels = e.data.contiguous().to_vector<float>();
  EXPECT_GE(*std::min_element(pixels.begin(), pixels.end()), 0.0f);
  EXPECT_LE(*std::max_element(pixels.begin(), pixels.end()), 1.0f);
  EXPECT_EQ(*std::max_element(pixels.begin(), pixels.end()), 1.0f);  // 255 / 255
  // Normalized by the transform, the images equal data::MNIST's normalized ones.
  MNIST reference(data_root(), /*train=*/false);
  auto pipeline = datasets::MNIST(data_root(), datasets::MNIST::Mode::kTest)
                      .map(transforms::Normalize<>(0.1307, 0.3081))
                      .map(transforms::Stack<>());
  Example<> batch = pipeline.get_batch({0, 1, 2});
  std::vector<float> got = batch.data.to_vector<float>();
  std::vector<float> want = narrow(reference.images(), 0, 0, 3).contiguous().to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5);
  minidl::testing::expect_error([&] { (void)test.get(10000); }, {"out of range"});
}

}  // namespace minidl::data_pipeline_test
