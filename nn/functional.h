#pragma once
// nn::functional: the ops as PyTorch users call them, e.g. nn::functional::cross_entropy(logits, target).
#include "ops/avg_pool2d.h"
#include "ops/conv2d.h"
#include "ops/conv_transpose2d.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/max_pool2d.h"
#include "ops/normalization.h"
#include "ops/softmax.h"
#include "ops/upsample.h"
#include "ops/view.h"

namespace minidl::nn::functional {

// The losses are function objects here, so that one can be passed by name as a criterion(output,
// target) (cuda::GraphedStep takes one) while its options keep their defaults:
//   cuda::GraphedStep step(model, optimizer, nn::functional::cross_entropy);
//   nn::functional::cross_entropy(logits, target, Reduction::Sum, /*ignore_index=*/-100, /*label_smoothing=*/0.1)
#define MINIDL_LOSS_FUNCTION_OBJECT(name)                                                                  \
  struct name##_fn {                                                                                      \
    template <class... Options>                                                                           \
    Tensor operator()(const Tensor& input, const Tensor& target, const Options&... options) const {       \
      return ::minidl::name(input, target, options...);                                                   \
    }                                                                                                     \
  };                                                                                                      \
  inline constexpr name##_fn name {}
MINIDL_LOSS_FUNCTION_OBJECT(cross_entropy);
MINIDL_LOSS_FUNCTION_OBJECT(nll_loss);
MINIDL_LOSS_FUNCTION_OBJECT(mse_loss);
MINIDL_LOSS_FUNCTION_OBJECT(l1_loss);
MINIDL_LOSS_FUNCTION_OBJECT(binary_cross_entropy_with_logits);
#undef MINIDL_LOSS_FUNCTION_OBJECT

using minidl::adaptive_avg_pool2d;
using minidl::avg_pool2d;
using minidl::batch_norm;
using minidl::conv2d;
using minidl::conv_transpose2d;
using minidl::dropout;
using minidl::group_norm;
using minidl::layer_norm;
using minidl::flatten;
using minidl::gelu;
using minidl::interpolate;
/// PyTorch's name for interpolate's options.   F::interpolate(x, F::InterpolateFuncOptions().scale_factor(2))
using InterpolateFuncOptions = minidl::InterpolateOptions;
using minidl::leaky_relu;
using minidl::linear;
using minidl::log_softmax;
using minidl::max_pool2d;
using minidl::relu;
using minidl::sigmoid;
using minidl::silu;
using minidl::softmax;
using minidl::tanh;
}  // namespace minidl::nn::functional
