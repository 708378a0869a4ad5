#pragma once
// libtorch's data-set pipeline: a Dataset<Self> gives examples by index, `.map(transform)` wraps it
// in a MapDataset, and make_data_loader (data/stateless_loader.h) asks it for batches of indices.
//   auto train = datasets::MNIST(root).map(transforms::Normalize<>(0.1307, 0.3081))
//                                     .map(transforms::Stack<>());
// (data::Dataset and data::DataLoader are the other, index-gathering API; both read the same files.)
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/example.h"

namespace minidl::data::datasets {

template <class Source, class AppliedTransform>
class MapDataset;

/// What every pipeline stage has: a batch type, get_batch and size, and map() to add a stage.
template <class Self, class Batch>
class BatchDataset {
 public:
  using BatchType = Batch;
  virtual ~BatchDataset() = default;
  /// The batch made of the examples at `indices`.
  virtual Batch get_batch(const std::vector<size_t>& indices) = 0;
  /// The number of examples; nullopt when unknown.
  virtual std::optional<size_t> size() const = 0;

  /// This data set with `transform` applied to what get_batch returns.
  template <class AppliedTransform>
  MapDataset<Self, AppliedTransform> map(AppliedTransform transform) & {
    return MapDataset<Self, AppliedTransform>(static_cast<Self&>(*this), std::move(transform));
  }
  template <class AppliedTransform>
  MapDataset<Self, AppliedTransform> map(AppliedTransform transform) && {
    return MapDataset<Self, AppliedTransform>(std::move(static_cast<Self&>(*this)), std::move(transform));
  }
};

/// A data set of single examples: implement get() and size(); a batch is a std::vector of examples.
/// get() runs on the loader's worker threads, several at once when workers() > 1.
///   struct Squares : datasets::Dataset<Squares> {
///     Example<> get(size_t i) override { return {full({1}, double(i)), full({}, double(i * i))}; }
///     std::optional<size_t> size() const override { return 10; }
///   };
template <class Self, class SingleExample = Example<>>
class Dataset : public BatchDataset<Self, std::vector<SingleExample>> {
 public:
  using ExampleType = SingleExample;
  virtual SingleExample get(size_t index) = 0;
  std::vector<SingleExample> get_batch(const std::vector<size_t>& indices) override {
    std::vector<SingleExample> batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(get(i));
    return batch;
  }
};

/// `source` followed by `transform` (per example, or per batch as Stack).
template <class Source, class AppliedTransform>
class MapDataset
    : public BatchDataset<MapDataset<Source, AppliedTransform>, typename AppliedTransform::OutputBatchType> {
 public:
  using DatasetType = Source;
  using TransformType = AppliedTransform;
  using OutputBatchType = typename AppliedTransform::OutputBatchType;
  static_assert(std::is_same_v<typename Source::BatchType, typename AppliedTransform::InputBatchType>,
                "map(): the transform's input must be what the data set gives (Stack<> last, after the "
                "per-example transforms)");

  MapDataset(Source source, AppliedTransform transform)
      : dataset_(std::move(source)), transform_(std::move(transform)) {}

  OutputBatchType get_batch(const std::vector<size_t>& indices) override {
    return transform_.apply_batch(dataset_.get_batch(indices));
  }
  std::optional<size_t> size() const override { return dataset_.size(); }
  const Source& dataset() const { return dataset_; }
  const AppliedTransform& transform() const { return transform_; }

 private:
  Source dataset_;
  AppliedTransform transform_;
};

/// The MNIST digits as libtorch gives them: images float32 [1, 28, 28] with pixel / 255 in [0, 1]
/// (normalize with transforms::Normalize), labels int64. `root` is the folder with the IDX files
/// (raw or .gz) or the one holding `mnist/`.
///   auto test = datasets::MNIST("data", datasets::MNIST::Mode::kTest);  test.size().value() == 10000
class MNIST : public Dataset<MNIST> {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::filesystem::path& root, Mode mode = Mode::kTrain);
  Example<> get(size_t index) override;
  std::optional<size_t> size() const override;
  bool is_train() const noexcept { return train_; }
  /// All images, float32 [N, 1, 28, 28].
  const Tensor& images() const { return images_; }
  /// All labels, int64 [N].
  const Tensor& targets() const { return targets_; }

 private:
  Tensor images_, targets_;
  bool train_;
};

}  // namespace minidl::data::datasets
