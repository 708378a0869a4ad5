#include "data/sampler.h"

#include <random>
#include <utility>

#include "core/error.h"
#include "core/random.h"

namespace minidl::data {

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  const auto e = static_cast<uint64_t>(epoch);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(e),
                    static_cast<uint32_t>(e >> 32)};
  std::mt19937_64 engine(seq);
  for (int64_t i = n - 1; i > 0; --i) {
    // The modulo bias is below 2^-40 for any data set that fits in memory.
    auto j = static_cast<int64_t>(engine() % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

SequentialSampler::SequentialSampler(int64_t size) : size_(size) {
  MINIDL_CHECK(size >= 0, "SequentialSampler: the data set size must not be negative, got ", size);
}

std::vector<int64_t> SequentialSampler::indices(int64_t /*epoch*/) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[static_cast<size_t>(i)] = i;
  return order;
}

RandomSampler::RandomSampler(int64_t size) : size_(size) {
  MINIDL_CHECK(size >= 0, "RandomSampler: the data set size must not be negative, got ", size);
  Generator& gen = default_generator();
  std::lock_guard lock(gen.mutex());
  seed_ = gen.engine()();
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const { return shuffled_indices(size_, seed_, epoch); }

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed),
      drop_last_(drop_last) {
  MINIDL_CHECK(dataset_size >= 0, "DistributedSampler: the data set size must not be negative, got ", dataset_size);
  MINIDL_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be at least 1, got ", num_replicas);
  MINIDL_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank ", rank, " is outside 0..",
               num_replicas - 1);
  num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = shuffled_indices(dataset_size_, seed_, epoch);
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    for (int64_t i = 0; i < dataset_size_; ++i) order[static_cast<size_t>(i)] = i;
  }
  const int64_t total = num_samples_ * num_replicas_;
  // Padding repeats the order from its start (more than once when the data set is smaller than the
  // number of ranks); drop_last truncates.
  for (size_t i = 0; static_cast<int64_t>(order.size()) < total; ++i) order.push_back(order[i]);
  order.resize(static_cast<size_t>(total));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace minidl::data
