#pragma once
// Transforms of libtorch's data pipeline: `dataset.map(transform)` applies one to every example
// (Normalize, the random augmentations) or to every batch (Stack). They run on the loader's worker
// threads, so their random draws come from each worker's own generator (see DataLoader).
#include <functional>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/example.h"

namespace minidl::data::transforms {

/// Turns one batch into another; the base of every transform.
template <class InputBatch, class OutputBatch>
class BatchTransform {
 public:
  using InputBatchType = InputBatch;
  using OutputBatchType = OutputBatch;
  virtual ~BatchTransform() = default;
  virtual OutputBatch apply_batch(InputBatch input_batch) = 0;
};

/// Applies `apply` to each example of a batch (a std::vector of examples).
template <class Input, class Output>
class Transform : public BatchTransform<std::vector<Input>, std::vector<Output>> {
 public:
  using InputType = Input;
  using OutputType = Output;
  virtual Output apply(Input input) = 0;
  std::vector<Output> apply_batch(std::vector<Input> input_batch) override {
    std::vector<Output> out;
    out.reserve(input_batch.size());
    for (Input& x : input_batch) out.push_back(apply(std::move(x)));
    return out;
  }
};

/// A transform from a function.   dataset.map(Lambda<Example<>>([](Example<> e) { ...; return e; }))
template <class Input, class Output = Input>
class Lambda : public Transform<Input, Output> {
 public:
  explicit Lambda(std::function<Output(Input)> fn) : fn_(std::move(fn)) {}
  Output apply(Input input) override { return fn_(std::move(input)); }

 private:
  std::function<Output(Input)> fn_;
};

/// Changes only an example's data tensor; the target passes through.
template <class Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
 public:
  virtual Tensor operator()(Tensor input) = 0;
  Example<Tensor, Target> apply(Example<Tensor, Target> example) override {
    example.data = (*this)(std::move(example.data));
    return example;
  }
};

/// A TensorTransform from a function.   TensorLambda<>([](Tensor x) { return x * 2; })
template <class Target = Tensor>
class TensorLambda : public TensorTransform<Target> {
 public:
  explicit TensorLambda(std::function<Tensor(Tensor)> fn) : fn_(std::move(fn)) {}
  Tensor operator()(Tensor input) override { return fn_(std::move(input)); }

 private:
  std::function<Tensor(Tensor)> fn_;
};

/// (x - mean) / stddev, with one value for every channel or one per channel of a [C, H, W] image.
///   MNIST(root).map(transforms::Normalize<>(0.1307, 0.3081))
///   CIFAR: Normalize<>({0.49, 0.48, 0.45}, {0.25, 0.24, 0.26})
template <class Target = Tensor>
class Normalize : public TensorTransform<Target> {
 public:
  Normalize(double mean, double stddev) : Normalize(std::vector<double>{mean}, std::vector<double>{stddev}) {}
  Normalize(const std::vector<double>& mean, const std::vector<double>& stddev);
  Tensor operator()(Tensor input) override;

 private:
  Tensor mean_, stddev_;  // float64 [C, 1, 1] (or [1]); promoted to the input's dtype per call
};

/// Pads an image [C, H, W] with `padding` zeros on every side, then cuts a random size x size window
/// (the standard CIFAR / Fashion-MNIST augmentation: RandomCrop(28, 4) on 28 x 28 images).
class RandomCrop : public TensorTransform<> {
 public:
  RandomCrop(int64_t size, int64_t padding = 0);
  Tensor operator()(Tensor input) override;

 private:
  int64_t size_, padding_;
};

/// Mirrors an image [..., W] left to right with probability p.
class RandomHorizontalFlip : public TensorTransform<> {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(Tensor input) override;

 private:
  double p_;
};

/// Collates a batch (a std::vector of examples) into one example of stacked tensors, [B, ...].
template <class T = Example<>>
class Stack;

template <>
class Stack<Example<>> : public BatchTransform<std::vector<Example<>>, Example<>> {
 public:
  Example<> apply_batch(std::vector<Example<>> examples) override;
};

/// Stacks the examples of a data set without targets (libtorch's TensorExample).
template <>
class Stack<Tensor> : public BatchTransform<std::vector<Tensor>, Tensor> {
 public:
  Tensor apply_batch(std::vector<Tensor> tensors) override;
};

// ---- template definitions ----

Tensor normalize_statistic(const std::vector<double>& values, const char* what);
Tensor normalize(const Tensor& input, const Tensor& mean, const Tensor& stddev);

template <class Target>
Normalize<Target>::Normalize(const std::vector<double>& mean, const std::vector<double>& stddev)
    : mean_(normalize_statistic(mean, "mean")), stddev_(normalize_statistic(stddev, "stddev")) {}

template <class Target>
Tensor Normalize<Target>::operator()(Tensor input) {
  return normalize(input, mean_, stddev_);
}

}  // namespace minidl::data::transforms
