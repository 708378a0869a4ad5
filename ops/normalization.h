#pragma once
// Normalization layers' ops: batch norm, layer norm and group norm, as torch.nn.functional has them.
#include "core/tensor.h"

namespace minidl {

/// Batch normalization of x [N, C, *] per channel (dim 1). With `training`, normalizes with the
/// batch's mean and biased variance and, where running_mean / running_var [C] are given, updates them
/// in place: running = (1 - momentum) * running + momentum * batch statistic, with the unbiased
/// variance for running_var (no gradient flows into them). Otherwise normalizes with the running
/// statistics, which must then be given. weight and bias [C] are optional.
///   Tensor y = batch_norm(x, running_mean, running_var, gamma, beta, /*training=*/true);
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);

/// Normalizes x over its trailing dims `normalized_shape` with the mean and biased variance of each
/// slice; weight and bias have shape normalized_shape and are optional.
///   Tensor y = layer_norm(x, {512}, gamma, beta);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

/// Splits the channels of x [N, C, *] into num_groups groups and normalizes each sample's group with
/// its own mean and biased variance; weight and bias [C] (per channel) are optional.
///   Tensor y = group_norm(x, 8, gamma, beta);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

}  // namespace minidl
