#pragma once
// nn::functional's forms of the margin, embedding and likelihood losses and of the layers of
// nn/layers_more.h and nn/normalization_more.h (included by nn/functional.h). As there, each loss is
// a function object, so that it can be passed as a criterion, and takes either the free function's
// arguments or libtorch's functional options:
//   F::soft_margin_loss(x, y), F::soft_margin_loss(x, y, Reduction::Sum),
//   F::multi_margin_loss(x, t, F::MultiMarginLossFuncOptions().p(2).margin(0.5))
#include "nn/loss_more.h"
#include "nn/normalization_more.h"
#include "ops/bilinear.h"
#include "ops/normalization_more.h"
#include "ops/pixel_shuffle.h"
#include "ops/threshold.h"

namespace minidl::nn::functional {

using MarginRankingLossFuncOptions = nn::MarginRankingLossOptions;
using HingeEmbeddingLossFuncOptions = nn::HingeEmbeddingLossOptions;
using SoftMarginLossFuncOptions = nn::SoftMarginLossOptions;
using CosineEmbeddingLossFuncOptions = nn::CosineEmbeddingLossOptions;
using TripletMarginLossFuncOptions = nn::TripletMarginLossOptions;
using MultilabelSoftMarginLossFuncOptions = nn::MultiLabelSoftMarginLossOptions;
using MultiMarginLossFuncOptions = nn::MultiMarginLossOptions;
using MultilabelMarginLossFuncOptions = nn::MultiLabelMarginLossOptions;
using PoissonNLLLossFuncOptions = nn::PoissonNLLLossOptions;
using GaussianNLLLossFuncOptions = nn::GaussianNLLLossOptions;

struct margin_ranking_loss_fn {
  Tensor operator()(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                    Reduction reduction = Reduction::Mean) const {
    return ::minidl::margin_ranking_loss(input1, input2, target, margin, reduction);
  }
  Tensor operator()(const Tensor& input1, const Tensor& input2, const Tensor& target,
                    const MarginRankingLossFuncOptions& o) const {
    return ::minidl::margin_ranking_loss(input1, input2, target, o.margin(), o.reduction());
  }
};
inline constexpr margin_ranking_loss_fn margin_ranking_loss{};

struct hinge_embedding_loss_fn {
  Tensor operator()(const Tensor& input, const Tensor& target, double margin = 1.0,
                    Reduction reduction = Reduction::Mean) const {
    return ::minidl::hinge_embedding_loss(input, target, margin, reduction);
  }
  Tensor operator()(const Tensor& input, const Tensor& target, const HingeEmbeddingLossFuncOptions& o) const {
    return ::minidl::hinge_embedding_loss(input, target, o.margin(), o.reduction());
  }
};
inline constexpr hinge_embedding_loss_fn hinge_embedding_loss{};

struct soft_margin_loss_fn {
  Tensor operator()(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean) const {
    return ::minidl::soft_margin_loss(input, target, reduction);
  }
  Tensor operator()(const Tensor& input, const Tensor& target, const SoftMarginLossFuncOptions& o) const {
    return ::minidl::soft_margin_loss(input, target, o.reduction());
  }
};
inline constexpr soft_margin_loss_fn soft_margin_loss{};

struct cosine_embedding_loss_fn {
  Tensor operator()(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                    Reduction reduction = Reduction::Mean) const {
    return ::minidl::cosine_embedding_loss(input1, input2, target, margin, reduction);
  }
  Tensor operator()(const Tensor& input1, const Tensor& input2, const Tensor& target,
                    const CosineEmbeddingLossFuncOptions& o) const {
    return ::minidl::cosine_embedding_loss(input1, input2, target, o.margin(), o.reduction());
  }
};
inline constexpr cosine_embedding_loss_fn cosine_embedding_loss{};

struct triplet_margin_loss_fn {
  Tensor operator()(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin = 1.0,
                    double p = 2.0, double eps = 1e-6, bool swap = false, Reduction reduction = Reduction::Mean) const {
    return ::minidl::triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction);
  }
  Tensor operator()(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                    const TripletMarginLossFuncOptions& o) const {
    return ::minidl::triplet_margin_loss(anchor, positive, negative, o.margin(), o.p(), o.eps(), o.swap(), o.reduction());
  }
};
inline constexpr triplet_margin_loss_fn triplet_margin_loss{};

struct multilabel_soft_margin_loss_fn {
  Tensor operator()(const Tensor& input, const Tensor& target, const Tensor& weight,
                    Reduction reduction = Reduction::Mean) const {
    return ::minidl::multilabel_soft_margin_loss(input, target, weight, reduction);
  }
  Tensor operator()(const Tensor& input, const Tensor& target,
                    const MultilabelSoftMarginLossFuncOptions& o = {}) const {
    return ::minidl::multilabel_soft_margin_loss(input, target, o.weight(), o.reduction());
  }
};
inline constexpr multilabel_soft_margin_loss_fn multilabel_soft_margin_loss{};

struct multi_margin_loss_fn {
  Tensor operator()(const Tensor& input, const Tensor& target, int64_t p, double margin = 1.0,
                    const Tensor& weight = {}, Reduction reduction = Reduction::Mean) const {
    return ::minidl::multi_margin_loss(input, target, p, margin, weight, reduction);
  }
  Tensor operator()(const Tensor& input, const Tensor& target, const MultiMarginLossFuncOptions& o = {}) const {
    return ::minidl::multi_margin_loss(input, target, o.p(), o.margin(), o.weight(), o.reduction());
  }
};
inline constexpr multi_margin_loss_fn multi_margin_loss{};

struct multilabel_margin_loss_fn {
  Tensor operator()(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean) const {
    return ::minidl::multilabel_margin_loss(input, target, reduction);
  }
  Tensor operator()(const Tensor& input, const Tensor& target, const MultilabelMarginLossFuncOptions& o) const {
    return ::minidl::multilabel_margin_loss(input, target, o.reduction());
  }
};
inline constexpr multilabel_margin_loss_fn multilabel_margin_loss{};

struct poisson_nll_loss_fn {
  Tensor operator()(const Tensor& input, const Tensor& target, bool log_input, bool full = false, double eps = 1e-8,
                    Reduction reduction = Reduction::Mean) const {
    return ::minidl::poisson_nll_loss(input, target, log_input, full, eps, reduction);
  }
  Tensor operator()(const Tensor& input, const Tensor& target, const PoissonNLLLossFuncOptions& o = {}) const {
    return ::minidl::poisson_nll_loss(input, target, o.log_input(), o.full(), o.eps(), o.reduction());
  }
};
inline constexpr poisson_nll_loss_fn poisson_nll_loss{};

struct gaussian_nll_loss_fn {
  Tensor operator()(const Tensor& input, const Tensor& target, const Tensor& var, bool full, double eps = 1e-6,
                    Reduction reduction = Reduction::Mean) const {
    return ::minidl::gaussian_nll_loss(input, target, var, full, eps, reduction);
  }
  Tensor operator()(const Tensor& input, const Tensor& target, const Tensor& var,
                    const GaussianNLLLossFuncOptions& o = {}) const {
    return ::minidl::gaussian_nll_loss(input, target, var, o.full(), o.eps(), o.reduction());
  }
};
inline constexpr gaussian_nll_loss_fn gaussian_nll_loss{};

/// libtorch's PixelShuffleFuncOptions.   F::pixel_shuffle(x, F::PixelShuffleFuncOptions(2)), F::pixel_shuffle(x, 2)
struct PixelShuffleFuncOptions {
  PixelShuffleFuncOptions(int64_t upscale_factor) : upscale_factor_(upscale_factor) {}  // NOLINT: implicit
  MINIDL_ARG(int64_t, upscale_factor);
};
struct PixelUnshuffleFuncOptions {
  PixelUnshuffleFuncOptions(int64_t downscale_factor) : downscale_factor_(downscale_factor) {}  // NOLINT: implicit
  MINIDL_ARG(int64_t, downscale_factor);
};
using minidl::pixel_shuffle;
using minidl::pixel_unshuffle;
inline Tensor pixel_shuffle(const Tensor& input, const PixelShuffleFuncOptions& o) {
  return ::minidl::pixel_shuffle(input, o.upscale_factor());
}
inline Tensor pixel_unshuffle(const Tensor& input, const PixelUnshuffleFuncOptions& o) {
  return ::minidl::pixel_unshuffle(input, o.downscale_factor());
}

/// libtorch's ThresholdFuncOptions.   F::threshold(x, F::ThresholdFuncOptions(0.1, 20)), F::threshold(x, 0.1, 20)
struct ThresholdFuncOptions {
  ThresholdFuncOptions(double threshold, double value) : threshold_(threshold), value_(value) {}
  MINIDL_ARG(double, threshold);
  MINIDL_ARG(double, value);
};
using minidl::threshold;
inline Tensor threshold(const Tensor& input, const ThresholdFuncOptions& o) {
  return ::minidl::threshold(input, o.threshold(), o.value());
}

/// libtorch's InstanceNormFuncOptions.   F::instance_norm(x, F::InstanceNormFuncOptions().weight(gamma).bias(beta))
struct InstanceNormFuncOptions {
  MINIDL_ARG(Tensor, running_mean);
  MINIDL_ARG(Tensor, running_var);
  MINIDL_ARG(Tensor, weight);
  MINIDL_ARG(Tensor, bias);
  MINIDL_ARG(bool, use_input_stats) = true;
  MINIDL_ARG(double, momentum) = 0.1;
  MINIDL_ARG(double, eps) = 1e-5;
};
using minidl::instance_norm;
inline Tensor instance_norm(const Tensor& input, const InstanceNormFuncOptions& o) {
  return ::minidl::instance_norm(input, o.running_mean(), o.running_var(), o.weight(), o.bias(), o.use_input_stats(),
                                 o.momentum(), o.eps());
}

/// libtorch's LocalResponseNormFuncOptions.   F::local_response_norm(x, F::LocalResponseNormFuncOptions(2).k(2.0))
using LocalResponseNormFuncOptions = nn::LocalResponseNormOptions;
using minidl::local_response_norm;
inline Tensor local_response_norm(const Tensor& input, const LocalResponseNormFuncOptions& o) {
  return ::minidl::local_response_norm(input, o.size(), o.alpha(), o.beta(), o.k());
}

using minidl::bilinear;

}  // namespace minidl::nn::functional
