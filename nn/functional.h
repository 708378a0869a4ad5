#pragma once
// nn::functional: the ops as PyTorch users call them, e.g. nn::functional::cross_entropy(logits, target).
#include <type_traits>

#include "ops/activation.h"
#include "ops/adaptive_max_pool2d.h"
#include "ops/attention.h"
#include "ops/avg_pool2d.h"
#include "ops/conv1d.h"
#include "ops/conv2d.h"
#include "ops/conv_transpose2d.h"
#include "ops/distance.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/max_pool2d.h"
#include "ops/normalization.h"
#include "ops/pad.h"
#include "ops/rearrange.h"
#include "ops/softmax.h"
#include "ops/upsample.h"
#include "ops/view.h"
#include "nn/embedding.h"  // functional::embedding
#include "nn/loss.h"

namespace minidl::nn::functional {

// The losses are function objects here, so that one can be passed by name as a criterion(output,
// target) (cuda::GraphedStep takes one) while its options keep their defaults. Each takes either
// libtorch's functional options or the free function's arguments:
//   cuda::GraphedStep step(model, optimizer, nn::functional::cross_entropy);
//   nn::functional::nll_loss(log_probs, target, nn::functional::NLLLossFuncOptions().reduction(Reduction::Sum))
//   nn::functional::cross_entropy(logits, target, {}, Reduction::Sum, /*ignore_index=*/-100, /*label_smoothing=*/0.1)
using CrossEntropyFuncOptions = nn::CrossEntropyLossOptions;
using NLLLossFuncOptions = nn::NLLLossOptions;
using BinaryCrossEntropyFuncOptions = nn::BCELossOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = nn::BCEWithLogitsLossOptions;
using KLDivFuncOptions = nn::KLDivLossOptions;
using SmoothL1LossFuncOptions = nn::SmoothL1LossOptions;
using HuberLossFuncOptions = nn::HuberLossOptions;
using L1LossFuncOptions = nn::L1LossOptions;

namespace detail {
inline Tensor with_options(const Tensor& i, const Tensor& t, const CrossEntropyFuncOptions& o) {
  return ::minidl::cross_entropy(i, t, o.weight(), o.reduction(), o.ignore_index(), o.label_smoothing());
}
inline Tensor with_options(const Tensor& i, const Tensor& t, const NLLLossFuncOptions& o) {
  return ::minidl::nll_loss(i, t, o.weight(), o.reduction(), o.ignore_index());
}
inline Tensor with_options(const Tensor& i, const Tensor& t, const BinaryCrossEntropyFuncOptions& o) {
  return ::minidl::binary_cross_entropy(i, t, o.weight(), o.reduction());
}
inline Tensor with_options(const Tensor& i, const Tensor& t, const BinaryCrossEntropyWithLogitsFuncOptions& o) {
  return ::minidl::binary_cross_entropy_with_logits(i, t, o.weight(), o.pos_weight(), o.reduction());
}
inline Tensor with_options(const Tensor& i, const Tensor& t, const KLDivFuncOptions& o) {
  return ::minidl::kl_div(i, t, o.reduction(), o.log_target());
}
inline Tensor with_options(const Tensor& i, const Tensor& t, const SmoothL1LossFuncOptions& o) {
  return ::minidl::smooth_l1_loss(i, t, o.reduction(), o.beta());
}
inline Tensor with_options(const Tensor& i, const Tensor& t, const HuberLossFuncOptions& o) {
  return ::minidl::huber_loss(i, t, o.reduction(), o.delta());
}
inline Tensor with_options(const Tensor& i, const Tensor& t, const L1LossFuncOptions& o) {
  return ::minidl::l1_loss(i, t, o.reduction());
}
// Exactly one of the options types above (L1LossOptions converts from a Reduction, which must not count).
template <class Options>
concept LossOptions =
    std::is_same_v<Options, CrossEntropyFuncOptions> || std::is_same_v<Options, NLLLossFuncOptions> ||
    std::is_same_v<Options, BinaryCrossEntropyFuncOptions> ||
    std::is_same_v<Options, BinaryCrossEntropyWithLogitsFuncOptions> || std::is_same_v<Options, KLDivFuncOptions> ||
    std::is_same_v<Options, SmoothL1LossFuncOptions> || std::is_same_v<Options, HuberLossFuncOptions> ||
    std::is_same_v<Options, L1LossFuncOptions>;
}  // namespace detail

#define MINIDL_LOSS_FUNCTION_OBJECT(name)                                                                  \
  struct name##_fn {                                                                                      \
    template <class... Options>                                                                           \
    Tensor operator()(const Tensor& input, const Tensor& target, const Options&... options) const {       \
      if constexpr (sizeof...(Options) == 1 && (detail::LossOptions<Options> && ...))                     \
        return detail::with_options(input, target, options...);                                           \
      else                                                                                                \
        return ::minidl::name(input, target, options...);                                                 \
    }                                                                                                     \
    /* A braced {} (an empty weight) cannot be deduced by the template. */                                \
    template <class... Rest>                                                                              \
    Tensor operator()(const Tensor& input, const Tensor& target, const Tensor& weight, const Rest&... rest) \
        const {                                                                                           \
      return ::minidl::name(input, target, weight, rest...);                                              \
    }                                                                                                     \
  };                                                                                                      \
  inline constexpr name##_fn name {}
MINIDL_LOSS_FUNCTION_OBJECT(cross_entropy);
MINIDL_LOSS_FUNCTION_OBJECT(nll_loss);
MINIDL_LOSS_FUNCTION_OBJECT(mse_loss);
MINIDL_LOSS_FUNCTION_OBJECT(l1_loss);
MINIDL_LOSS_FUNCTION_OBJECT(binary_cross_entropy_with_logits);
MINIDL_LOSS_FUNCTION_OBJECT(binary_cross_entropy);
MINIDL_LOSS_FUNCTION_OBJECT(kl_div);
MINIDL_LOSS_FUNCTION_OBJECT(smooth_l1_loss);
MINIDL_LOSS_FUNCTION_OBJECT(huber_loss);
#undef MINIDL_LOSS_FUNCTION_OBJECT

using minidl::adaptive_avg_pool2d;
using minidl::adaptive_max_pool2d;
using minidl::avg_pool1d;
using minidl::conv1d;
using minidl::max_pool1d;
using minidl::one_hot;
using minidl::pad;
/// torch::nn::functional::PadFuncOptions.   F::pad(x, F::PadFuncOptions({1, 1, 2, 2}).mode("replicate"))
using PadFuncOptions = minidl::PadOptions;
using minidl::avg_pool2d;
using minidl::batch_norm;
using minidl::conv2d;
using minidl::conv_transpose2d;
using minidl::cosine_similarity;
using minidl::dropout;
using minidl::dropout2d;
using minidl::celu;
using minidl::elu;
using minidl::hardshrink;
using minidl::logit;
using minidl::softmin;
using minidl::softshrink;
using minidl::softsign;
using minidl::tanhshrink;
using minidl::hardsigmoid;
using minidl::hardswish;
using minidl::hardtanh;
using minidl::group_norm;
using minidl::layer_norm;
using minidl::rms_norm;
using minidl::dropout_add_layer_norm;
using minidl::embedding_dropout_layer_norm;
using minidl::flatten;
using minidl::gelu;
using minidl::glu;
using minidl::interpolate;
/// PyTorch's name for interpolate's options.   F::interpolate(x, F::InterpolateFuncOptions().scale_factor(2))
using InterpolateFuncOptions = minidl::InterpolateOptions;
using minidl::leaky_relu;
using minidl::linear;
using minidl::log_softmax;
using minidl::max_pool2d;
using minidl::mish;
using minidl::normalize;
using minidl::pairwise_distance;
using minidl::prelu;
using minidl::relu;
using minidl::relu6;
using minidl::scaled_dot_product_attention;
using minidl::selu;
using minidl::sigmoid;
using minidl::silu;
using minidl::softplus;
/// libtorch's functional name of log_sigmoid.   F::logsigmoid(x)
inline Tensor logsigmoid(const Tensor& input) { return ::minidl::log_sigmoid(input); }
using minidl::softmax;
using minidl::tanh;
}  // namespace minidl::nn::functional

#include "nn/functional_more.h"  // the margin and likelihood losses, pixel_shuffle, threshold, instance_norm, ...
