#pragma once
// The data-set interface a DataLoader reads from, and TensorDataset, the in-memory kind whose
// batches are gathered with one index_select instead of one get() per example.
#include <cstdint>

#include "core/tensor.h"
#include "data/example.h"

namespace minidl::data {


/// A random-access data set. Implement size() and get(); DataLoader stacks the examples of a
/// batch, so every get() must return tensors of the same shapes and dtypes. get() runs on the
/// loader's worker thread: keep it free of unsynchronized shared state. Its random draws (rand,
/// randn, dropout) come from the worker's own generator, seeded each epoch (see DataLoader).
///   struct Squares : Dataset {
///     int64_t size() const override { return 10; }
///     Example<> get(int64_t i) const override {
///       return {full({1}, double(i)), full({}, double(i * i), kInt64)};
///     }
///   };
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example<> get(int64_t index) const = 0;
};

/// Examples held as two tensors whose first dimension indexes them: data [N, ...], targets [N, ...]
/// (kept contiguous: a non-contiguous input is copied once).
///   TensorDataset ds(randn({100, 3}), zeros({100}, kInt64));  Example<> e = ds.get(7);  // [3], []
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);
  int64_t size() const override { return data_.size(0); }
  /// Views of row `index` of data and targets (no copy).
  Example<> get(int64_t index) const override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_;
  Tensor targets_;
};

}  // namespace minidl::data
