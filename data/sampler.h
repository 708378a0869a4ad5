#pragma once
// Samplers: which examples a DataLoader visits in an epoch, and in what order. DistributedSampler
// gives each rank of a data-parallel job its own share of one shuffled epoch.
#include <cstdint>
#include <vector>

namespace minidl::data {

/// The examples of one epoch, as indices into a data set.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The indices of epoch `epoch` (the DataLoader passes its own epoch counter).
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  /// How many indices every epoch has.
  virtual int64_t size() const = 0;
};

/// 0..n-1 shuffled by Fisher-Yates on mt19937_64 seeded with (seed, epoch): the same order for the
/// same arguments with every compiler and standard library.
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch);

/// Every example in order, every epoch.   make_data_loader<SequentialSampler>(dataset, 64)
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
};

/// Every example once per epoch, in a new random order each epoch, as libtorch's RandomSampler. Its
/// seed is drawn from the global generator when it is made, so manual_seed makes runs repeat.
///   make_data_loader<RandomSampler>(dataset, 64)   (make_data_loader's default)
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t size);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
  uint64_t seed_;
};

/// Rank `rank`'s share of an epoch, as torch.utils.data.DistributedSampler: every rank draws the same
/// order for a given seed and epoch and takes every num_replicas-th index from position `rank`. Without
/// drop_last the order is padded with its own first indices to a multiple of num_replicas (every rank
/// gets ceil(n / num_replicas)); with it, the tail is dropped (floor).
///   DataLoader loader(train, DataLoaderOptions(64).sampler(std::make_shared<DistributedSampler>(
///       train.size(), distributed::world_size(), distributed::rank(), true, seed)));
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return num_samples_; }

 private:
  int64_t dataset_size_;
  int num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

/// libtorch's spelling: torch::data::samplers::RandomSampler.
namespace samplers {
using data::DistributedSampler;
using data::RandomSampler;
using data::Sampler;
using data::SequentialSampler;
}  // namespace samplers

}  // namespace minidl::data
