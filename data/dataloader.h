#pragma once
// DataLoader: batches of a Dataset, shuffled per epoch with a seeded generator and prepared on a
// background thread a few batches ahead of the training loop.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>

#include "core/autograd.h"
#include "core/device.h"
#include "core/random.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace minidl::data {

/// What a Dataset::get can learn about the loader's worker running it, as PyTorch's get_worker_info():
/// its id (minidl has one worker per loader, id 0), the number of workers, and the seed of the
/// generator its random draws come from (the epoch's base seed plus the id; also initial_seed()).
struct WorkerInfo {
  int64_t id = 0;
  int64_t num_workers = 1;
  uint64_t seed = 0;
};

/// The worker running on this thread; nullopt outside a DataLoader's worker.
///   if (auto worker = data::worker_info()) crop_seed = worker->seed;
std::optional<WorkerInfo> worker_info();

namespace detail {
/// Makes the calling thread a loader worker for its lifetime: worker_info() answers `info`, random
/// draws come from a generator seeded with info.seed, and nothing is recorded for autograd.
class WorkerScope {
 public:
  explicit WorkerScope(const WorkerInfo& info);
  ~WorkerScope();
  WorkerScope(const WorkerScope&) = delete;
  WorkerScope& operator=(const WorkerScope&) = delete;

 private:
  WorkerInfo info_;
  const WorkerInfo* previous_;
  Generator generator_;
  GeneratorGuard guard_;
  NoGradGuard no_grad_;
};
}  // namespace detail

/// One batch: data [B, ...] (float32 [B, 1, 28, 28] for MNIST) and target [B, ...] (int64 [B]).
struct Batch {
  Tensor data;
  Tensor target;
  /// Number of examples in the batch (the last one may be smaller).
  int64_t size() const { return data.size(0); }
};

/// Options with chainable setters; each setter has a getter of the same name.
///   DataLoaderOptions().batch_size(64).shuffle(true).seed(1).drop_last(false)
struct DataLoaderOptions {
  DataLoaderOptions() = default;
  explicit DataLoaderOptions(int64_t batch_size) : batch_size_(batch_size) {}

#define MINIDL_DATA_ARG(T, name, init)                 \
  DataLoaderOptions& name(T value) {                   \
    name##_ = value;                                   \
    return *this;                                      \
  }                                                    \
  const T& name() const noexcept { return name##_; }   \
  T name##_ = init

  /// Examples per batch.
  MINIDL_DATA_ARG(int64_t, batch_size, 1);
  /// Threads preparing batches for make_data_loader's loaders, as libtorch's `workers` (PyTorch's
  /// num_workers): 0 prepares each batch on the training thread when it is asked for. DataLoader
  /// always uses one worker thread (its TensorDataset path is a memcpy per row).
  MINIDL_DATA_ARG(int64_t, workers, 0);
  /// Visit the examples in a new random order every epoch.
  MINIDL_DATA_ARG(bool, shuffle, false);
  /// Seed of the shuffling; epoch e draws its order from a generator seeded with (seed, e), so a run
  /// is reproducible and every epoch differs. Unset: one number drawn from the global generator
  /// (see manual_seed) when the loader is made.
  MINIDL_DATA_ARG(std::optional<uint64_t>, seed, std::nullopt);
  /// Drop the last batch when it is smaller than batch_size.
  MINIDL_DATA_ARG(bool, drop_last, false);
  /// Where batches are delivered; the worker thread moves them there.
  MINIDL_DATA_ARG(Device, device, Device::cpu());
  /// How many batches the worker prepares ahead of the loop (at least 1).
  MINIDL_DATA_ARG(int64_t, prefetch, 2);
  /// Which examples an epoch visits, in what order (DistributedSampler: this rank's share). Excludes
  /// shuffle; the loader's epoch counter is passed to it, so every epoch gets a new order.
  MINIDL_DATA_ARG(std::shared_ptr<const Sampler>, sampler, nullptr);
#undef MINIDL_DATA_ARG
};

/// Iterates over a data set in batches. Each range-for over the loader is one epoch; a second
/// loop is the next epoch with a new order. Batches are prepared on a worker thread; breaking out
/// of the loop stops and joins it, and an exception thrown while preparing a batch (by a
/// Dataset::get, say) is rethrown by the loop. A TensorDataset (MNIST included) is gathered whole
/// rows at a time (a memcpy per row on the CPU, index_select on a GPU); any other Dataset with one
/// get() per example, then stacked.
/// Random draws in get() (augmentation) come from the worker's own generator, as in PyTorch: each
/// begin() draws a base seed from the calling thread's default generator, and the worker seeds its
/// generator with base seed + worker id (see worker_info). The training thread's stream thus moves
/// by one draw per epoch, whatever get() draws, and a seeded run is reproducible.
///   DataLoader loader(MNIST(data_root()), DataLoaderOptions().batch_size(64).shuffle(true).seed(1));
///   for (Batch& batch : loader) { Tensor loss = cross_entropy(model->forward(batch.data), batch.target); }
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = DataLoaderOptions());
  /// Takes a copy of the data set (cheap for MNIST: tensors are shared handles).
  template <class D, class = std::enable_if_t<std::is_base_of_v<Dataset, std::decay_t<D>>>>
  DataLoader(D&& dataset, DataLoaderOptions options = DataLoaderOptions())
      : DataLoader(std::make_shared<const std::decay_t<D>>(std::forward<D>(dataset)), std::move(options)) {}
  /// Stops the worker of an epoch still being iterated.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  class Epoch;
  /// An input iterator over one epoch's batches.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    Iterator() = default;
    Batch& operator*() const { return *batch_; }
    Batch* operator->() const { return batch_.get(); }
    Iterator& operator++();
    /// Only comparison with end() is meaningful, as for any input iterator.
    bool operator==(const Iterator& other) const { return batch_ == nullptr && other.batch_ == nullptr; }

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<Epoch> epoch);
    std::shared_ptr<Epoch> epoch_;
    std::shared_ptr<Batch> batch_;  // null at the end
  };

  /// Starts the next epoch: a new order (when shuffling) and a new worker thread.
  Iterator begin();
  Iterator end() { return Iterator(); }

  /// Batches per epoch: ceil(N / batch_size), or floor with drop_last (N: the sampler's size if any).
  int64_t size() const;
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }
  /// The epoch the next begin() starts (0 for a fresh loader); set it to resume a run's order.
  int64_t epoch() const { return epoch_; }
  void set_epoch(int64_t epoch) { epoch_ = epoch; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  std::weak_ptr<Epoch> running_;
};

}  // namespace minidl::data
