#pragma once
// The margin, embedding and likelihood loss modules: each holds its options (and its weight as a
// buffer, so that to(device) moves it) and calls the functional loss of ops/loss_margin.h or
// ops/loss_likelihood.h. They print as PyTorch's, with no options: `MarginRankingLoss()`.
#include "nn/module.h"
#include "nn/options.h"
#include "ops/loss_likelihood.h"
#include "ops/loss_margin.h"

namespace minidl::nn {

struct MarginRankingLossOptions {
  MINIDL_ARG(double, margin) = 0.0;
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// max(0, -y * (x1 - x2) + margin).   nn::MarginRankingLoss rank(nn::MarginRankingLossOptions().margin(0.5));  rank(x1, x2, y)
class MarginRankingLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(MarginRankingLossImpl)
  explicit MarginRankingLossImpl(const MarginRankingLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target);
  std::string name() const override { return "MarginRankingLoss"; }
  MarginRankingLossOptions options;
};
MINIDL_MODULE(MarginRankingLoss);

struct HingeEmbeddingLossOptions {
  MINIDL_ARG(double, margin) = 1.0;
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// x where y = 1, max(0, margin - x) where y = -1.   nn::HingeEmbeddingLoss hinge;  hinge(distances, labels)
class HingeEmbeddingLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(HingeEmbeddingLossImpl)
  explicit HingeEmbeddingLossImpl(const HingeEmbeddingLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "HingeEmbeddingLoss"; }
  HingeEmbeddingLossOptions options;
};
MINIDL_MODULE(HingeEmbeddingLoss);

struct SoftMarginLossOptions {
  SoftMarginLossOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(Reduction, reduction);
};

/// log(1 + exp(-y * x)).   nn::SoftMarginLoss criterion;  criterion(scores, labels)
class SoftMarginLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(SoftMarginLossImpl)
  explicit SoftMarginLossImpl(const SoftMarginLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "SoftMarginLoss"; }
  SoftMarginLossOptions options;
};
MINIDL_MODULE(SoftMarginLoss);

struct CosineEmbeddingLossOptions {
  MINIDL_ARG(double, margin) = 0.0;
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// 1 - cos(x1, x2) for y = 1, max(0, cos(x1, x2) - margin) for y = -1.
///   nn::CosineEmbeddingLoss criterion(nn::CosineEmbeddingLossOptions().margin(0.2));  criterion(a, b, y)
class CosineEmbeddingLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(CosineEmbeddingLossImpl)
  explicit CosineEmbeddingLossImpl(const CosineEmbeddingLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target);
  std::string name() const override { return "CosineEmbeddingLoss"; }
  CosineEmbeddingLossOptions options;
};
MINIDL_MODULE(CosineEmbeddingLoss);

struct TripletMarginLossOptions {
  MINIDL_ARG(double, margin) = 1.0;
  MINIDL_ARG(double, p) = 2.0;
  MINIDL_ARG(double, eps) = 1e-6;
  MINIDL_ARG(bool, swap) = false;
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// max(0, margin + d(a, p) - d(a, n)).   nn::TripletMarginLoss triplet;  triplet(anchor, positive, negative)
class TripletMarginLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(TripletMarginLossImpl)
  explicit TripletMarginLossImpl(const TripletMarginLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative);
  std::string name() const override { return "TripletMarginLoss"; }
  TripletMarginLossOptions options;
};
MINIDL_MODULE(TripletMarginLoss);

struct MultiLabelSoftMarginLossOptions {
  MINIDL_ARG(Tensor, weight);  // broadcast to the input, usually [C]; optional
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// One-vs-all logistic loss of multi-label targets [N, C] of 0 and 1.
///   nn::MultiLabelSoftMarginLoss criterion;  criterion(logits, labels)
class MultiLabelSoftMarginLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(MultiLabelSoftMarginLossImpl)
  explicit MultiLabelSoftMarginLossImpl(const MultiLabelSoftMarginLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "MultiLabelSoftMarginLoss"; }
  MultiLabelSoftMarginLossOptions options;
  Tensor weight;  // the registered buffer (undefined when not given)
};
MINIDL_MODULE(MultiLabelSoftMarginLoss);

struct MultiMarginLossOptions {
  MINIDL_ARG(int64_t, p) = 1;  // 1 or 2
  MINIDL_ARG(double, margin) = 1.0;
  MINIDL_ARG(Tensor, weight);  // [C], optional
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// Multi-class hinge loss of class indices.   nn::MultiMarginLoss criterion(nn::MultiMarginLossOptions().p(2));
class MultiMarginLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(MultiMarginLossImpl)
  explicit MultiMarginLossImpl(const MultiMarginLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "MultiMarginLoss"; }
  MultiMarginLossOptions options;
  Tensor weight;  // the registered buffer (undefined when not given)
};
MINIDL_MODULE(MultiMarginLoss);

struct MultiLabelMarginLossOptions {
  MultiLabelMarginLossOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(Reduction, reduction);
};

/// Multi-class multi-label hinge loss; each target row lists classes, ended by -1.
///   nn::MultiLabelMarginLoss criterion;  criterion(scores, targets)
class MultiLabelMarginLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(MultiLabelMarginLossImpl)
  explicit MultiLabelMarginLossImpl(const MultiLabelMarginLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "MultiLabelMarginLoss"; }
  MultiLabelMarginLossOptions options;
};
MINIDL_MODULE(MultiLabelMarginLoss);

struct PoissonNLLLossOptions {
  MINIDL_ARG(bool, log_input) = true;  // the input is log(rate)
  MINIDL_ARG(bool, full) = false;      // add Stirling's term for targets > 1
  MINIDL_ARG(double, eps) = 1e-8;      // added to the rate inside the log when !log_input
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// Poisson negative log-likelihood.   nn::PoissonNLLLoss criterion;  criterion(log_rate, counts)
class PoissonNLLLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(PoissonNLLLossImpl)
  explicit PoissonNLLLossImpl(const PoissonNLLLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "PoissonNLLLoss"; }
  PoissonNLLLossOptions options;
};
MINIDL_MODULE(PoissonNLLLoss);

struct GaussianNLLLossOptions {
  MINIDL_ARG(bool, full) = false;  // add the constant 0.5 * log(2 pi)
  MINIDL_ARG(double, eps) = 1e-6;  // the least variance
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// Gaussian negative log-likelihood with predicted variances.   nn::GaussianNLLLoss criterion;  criterion(mean, y, var)
class GaussianNLLLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(GaussianNLLLossImpl)
  explicit GaussianNLLLossImpl(const GaussianNLLLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& var);
  std::string name() const override { return "GaussianNLLLoss"; }
  GaussianNLLLossOptions options;
};
MINIDL_MODULE(GaussianNLLLoss);

}  // namespace minidl::nn
