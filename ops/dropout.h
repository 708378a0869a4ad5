#pragma once
#include "core/tensor.h"

namespace minidl {

/// Zeroes each element with probability p and scales the rest by 1/(1-p) when training; the
/// identity otherwise.   dropout(x, 0.5, is_training())
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

/// Zeroes whole channels: each [N, C, ...] input (2 dims or more) gets one draw per (n, c), from the
/// generator dropout draws from, and the kept channels are scaled by 1/(1-p) when training; the
/// identity otherwise. The gradient follows the same mask.   feature_dropout(x, 0.5, true)
Tensor feature_dropout(const Tensor& x, double p, bool train);
/// Channel dropout of images: x is [N, C, H, W], or [C, H, W] (one image, one draw per channel).
///   dropout2d(features, 0.2, is_training())
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

}  // namespace minidl
