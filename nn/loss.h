#pragma once
// Loss modules: each holds its options (and its weight tensors as buffers, so that to(device) moves
// them) and calls the functional loss of ops/loss.h.
#include "nn/module.h"
#include "nn/options.h"
#include "ops/loss.h"

namespace minidl::nn {

struct CrossEntropyLossOptions {
  MINIDL_ARG(Tensor, weight);  // [C], optional
  MINIDL_ARG(int64_t, ignore_index) = -100;
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
  MINIDL_ARG(double, label_smoothing) = 0.0;
};

/// Cross-entropy of logits [N, C] against int64 class indices [N] (or [N, C, d1, ...] against
/// [N, d1, ...]); by default the mean over the batch, through one fused kernel.
///   nn::CrossEntropyLoss criterion;  Tensor loss = criterion(logits, target);
///   nn::CrossEntropyLoss smoothed(nn::CrossEntropyLossOptions().label_smoothing(0.1).ignore_index(0));
class CrossEntropyLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(CrossEntropyLossImpl)
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions& options = {});
  Tensor forward(const Tensor& logits, const Tensor& target);
  std::string name() const override { return "CrossEntropyLoss"; }
  CrossEntropyLossOptions options;
  Tensor weight;  // the registered buffer (undefined without class weights)
};
MINIDL_MODULE(CrossEntropyLoss);

struct NLLLossOptions {
  MINIDL_ARG(Tensor, weight);  // [C], optional
  MINIDL_ARG(int64_t, ignore_index) = -100;
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// Negative log-likelihood of int64 class indices [N] under log-probabilities [N, C] (or
/// [N, d1, ...] under [N, C, d1, ...]).
///   nn::NLLLoss criterion;  criterion(log_softmax(logits, 1), target)
class NLLLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(NLLLossImpl)
  explicit NLLLossImpl(const NLLLossOptions& options = {});
  Tensor forward(const Tensor& log_probs, const Tensor& target);
  std::string name() const override { return "NLLLoss"; }
  NLLLossOptions options;
  Tensor weight;
};
MINIDL_MODULE(NLLLoss);

/// Mean (or summed, or per-element) squared error.   nn::MSELoss criterion;  criterion(output, target)
class MSELossImpl : public Module {
 public:
  MINIDL_CLONE_STATELESS(MSELossImpl)
  explicit MSELossImpl(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "MSELoss"; }
  Reduction reduction;
};
MINIDL_MODULE(MSELoss);

struct L1LossOptions {
  L1LossOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(Reduction, reduction);
};

/// Mean (or summed, or per-element) absolute error.   nn::L1Loss criterion;  criterion(output, target)
class L1LossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(L1LossImpl)
  explicit L1LossImpl(const L1LossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "L1Loss"; }
  L1LossOptions options;
};
MINIDL_MODULE(L1Loss);

struct BCEWithLogitsLossOptions {
  MINIDL_ARG(Tensor, weight);      // broadcast to the input: each element's loss is scaled by it
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
  MINIDL_ARG(Tensor, pos_weight);  // broadcast to the input, usually [C]: the weight of positive targets
};

/// Binary cross-entropy on logits, computed stably (sigmoid and log in one).
///   nn::BCEWithLogitsLoss criterion(nn::BCEWithLogitsLossOptions().pos_weight(full({3}, 2.0)));
class BCEWithLogitsLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(BCEWithLogitsLossImpl)
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "BCEWithLogitsLoss"; }
  BCEWithLogitsLossOptions options;
  Tensor weight, pos_weight;  // the registered buffers (undefined when not given)
};
MINIDL_MODULE(BCEWithLogitsLoss);

struct BCELossOptions {
  MINIDL_ARG(Tensor, weight);  // broadcast to the input: each element's loss is scaled by it
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
};

/// Binary cross-entropy on probabilities in [0, 1] (each log clamped to >= -100, as PyTorch).
///   nn::BCELoss criterion;  criterion(sigmoid(logits), labels)
class BCELossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(BCELossImpl)
  explicit BCELossImpl(const BCELossOptions& options = {});
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "BCELoss"; }
  BCELossOptions options;
  Tensor weight;  // the registered buffer (undefined when not given)
};
MINIDL_MODULE(BCELoss);

struct KLDivLossOptions {
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;  // BatchMean for the KL divergence per sample
  MINIDL_ARG(bool, log_target) = false;                // the target is given as log-probabilities
};

/// KL divergence of log-probabilities from a target distribution.
///   nn::KLDivLoss criterion(nn::KLDivLossOptions().reduction(Reduction::BatchMean));
class KLDivLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(KLDivLossImpl)
  explicit KLDivLossImpl(const KLDivLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "KLDivLoss"; }
  KLDivLossOptions options;
};
MINIDL_MODULE(KLDivLoss);

struct SmoothL1LossOptions {
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
  MINIDL_ARG(double, beta) = 1.0;  // where the quadratic part ends; 0 is the L1 loss
};

/// Quadratic below beta, linear above.   nn::SmoothL1Loss criterion(nn::SmoothL1LossOptions().beta(0.5));
class SmoothL1LossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(SmoothL1LossImpl)
  explicit SmoothL1LossImpl(const SmoothL1LossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "SmoothL1Loss"; }
  SmoothL1LossOptions options;
};
MINIDL_MODULE(SmoothL1Loss);

struct HuberLossOptions {
  MINIDL_ARG(Reduction, reduction) = Reduction::Mean;
  MINIDL_ARG(double, delta) = 1.0;  // > 0
};

/// Quadratic below delta, linear (slope delta) above.   nn::HuberLoss criterion(nn::HuberLossOptions().delta(2.0));
class HuberLossImpl : public Module {
 public:
  MINIDL_CLONE_FROM_OPTIONS(HuberLossImpl)
  explicit HuberLossImpl(const HuberLossOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& input, const Tensor& target);
  std::string name() const override { return "HuberLoss"; }
  HuberLossOptions options;
};
MINIDL_MODULE(HuberLoss);

namespace detail {
// Registers a loss module's weight option as a buffer, as PyTorch's loss modules do, so that it
// moves with the module; returns the handle forward() reads (undefined without the option).
Tensor buffer_of(Module& module, const char* name, const Tensor& option);
}  // namespace detail

}  // namespace minidl::nn
