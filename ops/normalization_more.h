#pragma once
// Instance normalization and local response normalization, as torch.nn.functional has them:
// compositions of group_norm, batch_norm, pooling and elementwise ops.
#include <cstdint>

#include "core/tensor.h"

namespace minidl {

/// Normalizes each sample's channels of x [N, C, *] separately, over their spatial dims, with their
/// mean and biased variance; weight and bias [C] optional. With use_input_stats (training, or no
/// running statistics) the statistics are the input's, and running_mean / running_var [C], when
/// given, are updated in place as PyTorch's: running = (1 - momentum) * running + momentum * the
/// mean over the batch of each instance's mean (unbiased variance). Without, the running statistics
/// normalize, and must be given.
///   Tensor y = instance_norm(x);  instance_norm(x, rm, rv, gamma, beta, /*use_input_stats=*/false)
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);

/// AlexNet's local response normalization across channels of x [N, C, *]:
/// x / (k + alpha / size * sum of x^2 over the `size` channels around c)^beta, the window running
/// from c - size / 2 to c + (size - 1) / 2, zero outside, as PyTorch's.
///   local_response_norm(x, 5, 1e-4, 0.75, 2.0)
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);

}  // namespace minidl
