#pragma once
// make_data_loader: libtorch's loader over a data-set pipeline (data/datasets.h). Each range-for is
// one epoch; `workers` threads prepare batches ahead of the loop, worker w making batches w, w + W,
// w + 2W, ... from its own generator (seeded per epoch as DataLoader's worker is), so a seeded run
// gives the same batches whatever the timing.
//   auto loader = make_data_loader<samplers::SequentialSampler>(std::move(train), 64);
//   for (Example<>& batch : *loader) { ... batch.data, batch.target ... }
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/dataloader.h"
#include "data/sampler.h"

namespace minidl::data {

template <class Dataset, class SamplerT>
class StatelessDataLoader {
 public:
  using BatchType = typename Dataset::BatchType;

  StatelessDataLoader(Dataset dataset, SamplerT sampler, DataLoaderOptions options)
      : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(std::move(options)) {
    MINIDL_CHECK(options_.batch_size() >= 1, "make_data_loader: batch_size must be at least 1, got ",
                 options_.batch_size());
    MINIDL_CHECK(options_.workers() >= 0, "make_data_loader: workers must not be negative, got ", options_.workers());
  }
  ~StatelessDataLoader() {
    if (auto epoch = running_.lock()) epoch->stop();
  }
  StatelessDataLoader(const StatelessDataLoader&) = delete;
  StatelessDataLoader& operator=(const StatelessDataLoader&) = delete;

  class Epoch;
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = BatchType;
    using difference_type = std::ptrdiff_t;
    using pointer = BatchType*;
    using reference = BatchType&;
    Iterator() = default;
    BatchType& operator*() const { return *batch_; }
    BatchType* operator->() const { return batch_.get(); }
    Iterator& operator++() {
      batch_ = epoch_->next();
      return *this;
    }
    bool operator==(const Iterator& other) const { return batch_ == nullptr && other.batch_ == nullptr; }

   private:
    friend class StatelessDataLoader;
    explicit Iterator(std::shared_ptr<Epoch> epoch) : epoch_(std::move(epoch)) { batch_ = epoch_->next(); }
    std::shared_ptr<Epoch> epoch_;
    std::shared_ptr<BatchType> batch_;
  };

  /// Starts the next epoch (stopping one still running): the sampler's order for it, new workers.
  Iterator begin() {
    if (auto previous = running_.lock()) previous->stop();
    std::vector<int64_t> order = sampler_.indices(epoch_++);
    const auto batch_size = static_cast<size_t>(options_.batch_size());
    std::vector<std::vector<size_t>> batches;
    for (size_t start = 0; start < order.size(); start += batch_size) {
      const size_t end = std::min(order.size(), start + batch_size);
      if (options_.drop_last() && end - start < batch_size) break;
      batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                           order.begin() + static_cast<std::ptrdiff_t>(end));
    }
    uint64_t base_seed;
    {
      Generator& gen = default_generator();
      std::lock_guard lock(gen.mutex());
      base_seed = gen.engine()();
    }
    auto epoch = std::make_shared<Epoch>(dataset_, std::move(batches), options_, base_seed);
    running_ = epoch;
    return Iterator(std::move(epoch));
  }
  Iterator end() { return Iterator(); }

  const DataLoaderOptions& options() const { return options_; }

  /// One epoch's batches and the workers making them.
  class Epoch {
   public:
    Epoch(Dataset& dataset, std::vector<std::vector<size_t>> batches, const DataLoaderOptions& options,
          uint64_t base_seed)
        : dataset_(dataset), batches_(std::move(batches)), workers_(options.workers()),
          window_(std::max<int64_t>(1, options.prefetch()) * std::max<int64_t>(1, options.workers())) {
      for (int64_t w = 0; w < workers_; ++w) {
        threads_.emplace_back([this, w, base_seed] { run(WorkerInfo{w, workers_, base_seed + static_cast<uint64_t>(w)}); });
      }
    }
    ~Epoch() { stop(); }

    void stop() {
      {
        std::lock_guard lock(mutex_);
        stopping_ = true;
      }
      changed_.notify_all();
      for (std::thread& t : threads_) {
        if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
      }
    }

    // The next batch in order; null at the end. Rethrows what a worker threw making it.
    std::shared_ptr<BatchType> next() {
      const auto k = static_cast<int64_t>(given_);
      if (k >= static_cast<int64_t>(batches_.size())) return nullptr;
      if (workers_ == 0) {
        ++given_;
        return std::make_shared<BatchType>(dataset_.get_batch(batches_[static_cast<size_t>(k)]));
      }
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || results_.count(k) > 0; });
      if (stopping_ && results_.count(k) == 0) return nullptr;
      Result result = std::move(results_[k]);
      results_.erase(k);
      ++given_;
      lock.unlock();
      changed_.notify_all();
      if (result.error) std::rethrow_exception(result.error);
      return result.batch;
    }

   private:
    struct Result {
      std::shared_ptr<BatchType> batch;
      std::exception_ptr error;
    };

    void run(WorkerInfo info) {
      detail::WorkerScope scope(info);
      for (auto k = info.id; k < static_cast<int64_t>(batches_.size()); k += workers_) {
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] { return stopping_ || k < static_cast<int64_t>(given_) + window_; });
          if (stopping_) return;
        }
        Result result;
        try {
          result.batch = std::make_shared<BatchType>(dataset_.get_batch(batches_[static_cast<size_t>(k)]));
        } catch (...) {
          result.error = std::current_exception();
        }
        {
          std::lock_guard lock(mutex_);
          results_[k] = std::move(result);
        }
        changed_.notify_all();
      }
    }

    Dataset& dataset_;
    std::vector<std::vector<size_t>> batches_;
    int64_t workers_, window_;
    size_t given_ = 0;  // written by next() under the lock (read by workers under it)
    std::mutex mutex_;
    std::condition_variable changed_;
    std::map<int64_t, Result> results_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;  // last: started once everything they read exists
  };

 private:
  Dataset dataset_;
  SamplerT sampler_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  std::weak_ptr<Epoch> running_;
};

/// A loader over `dataset` (a pipeline of data/datasets.h) with a SamplerT made for its size:
/// RandomSampler by default, as in libtorch.
///   auto loader = make_data_loader(std::move(dataset), DataLoaderOptions().batch_size(64).workers(2));
template <class SamplerT = RandomSampler, class Dataset>
std::unique_ptr<StatelessDataLoader<Dataset, SamplerT>> make_data_loader(Dataset dataset, DataLoaderOptions options) {
  const auto size = dataset.size();
  MINIDL_CHECK(size.has_value(), "make_data_loader: the data set does not know its size; pass a sampler");
  SamplerT sampler(static_cast<int64_t>(*size));
  return std::make_unique<StatelessDataLoader<Dataset, SamplerT>>(std::move(dataset), std::move(sampler),
                                                                 std::move(options));
}

/// make_data_loader with only a batch size.   make_data_loader(std::move(test), 1000)
template <class SamplerT = RandomSampler, class Dataset>
std::unique_ptr<StatelessDataLoader<Dataset, SamplerT>> make_data_loader(Dataset dataset, size_t batch_size) {
  return make_data_loader<SamplerT>(std::move(dataset), DataLoaderOptions(static_cast<int64_t>(batch_size)));
}

/// make_data_loader with a sampler of your own.
template <class Dataset, class SamplerT, class = std::enable_if_t<std::is_base_of_v<Sampler, SamplerT>>>
std::unique_ptr<StatelessDataLoader<Dataset, SamplerT>> make_data_loader(Dataset dataset, SamplerT sampler,
                                                                         DataLoaderOptions options = DataLoaderOptions()) {
  return std::make_unique<StatelessDataLoader<Dataset, SamplerT>>(std::move(dataset), std::move(sampler),
                                                                 std::move(options));
}

}  // namespace minidl::data
