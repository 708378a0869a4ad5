#pragma once
// Distance modules: CosineSimilarity and PairwiseDistance, as torch.nn's (ops/distance.h computes them).
#include <string>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl::nn {

struct CosineSimilarityOptions {
  MINIDL_ARG(int64_t, dim) = 1;
  MINIDL_ARG(double, eps) = 1e-8;
};

/// The cosine similarity of two inputs along dim.   nn::CosineSimilarity cos;  Tensor s = cos(a, b);
class CosineSimilarityImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(CosineSimilarityImpl)
  explicit CosineSimilarityImpl(const CosineSimilarityOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);
  std::string name() const override { return "CosineSimilarity"; }
  std::string extra_repr() const override;
  CosineSimilarityOptions options;
};
MINIDL_MODULE(CosineSimilarity);

struct PairwiseDistanceOptions {
  MINIDL_ARG(double, p) = 2.0;
  MINIDL_ARG(double, eps) = 1e-6;
  MINIDL_ARG(bool, keepdim) = false;
};

/// ||x1 - x2 + eps||_p along the last dim.   nn::PairwiseDistance dist;  Tensor d = dist(a, b);
class PairwiseDistanceImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(PairwiseDistanceImpl)
  explicit PairwiseDistanceImpl(const PairwiseDistanceOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2);
  std::string name() const override { return "PairwiseDistance"; }
  std::string extra_repr() const override;
  PairwiseDistanceOptions options;
};
MINIDL_MODULE(PairwiseDistance);

}  // namespace minidl::nn
