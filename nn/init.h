#pragma once
// Parameter initialization, in place, from the global seeded generator (PyTorch's nn::init).
#include "core/tensor.h"

namespace minidl::nn::init {

/// Fan-in of a weight: size(1) times the receptive field (kh*kw for a conv weight).
int64_t fan_in(const Tensor& weight);
/// U(-bound, bound) with bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1 + a^2)): PyTorch's
/// kaiming_uniform_ for leaky_relu(a). Linear and Conv2d use a = sqrt(5).   kaiming_uniform_(w, std::sqrt(5.0));
void kaiming_uniform_(Tensor& weight, double a = 0);
void uniform_(Tensor& tensor, double low, double high);
void normal_(Tensor& tensor, double mean = 0, double stddev = 1);
void constant_(Tensor& tensor, double value);
void zeros_(Tensor& tensor);

}  // namespace minidl::nn::init
