#pragma once
// Gradient clipping, between backward() and the optimizer step, and parameters as one vector, as
// torch::nn::utils.
#include <vector>

#include "core/tensor.h"

namespace minidl::nn::utils {

/// Scales every gradient in place so that their joint p-norm (norm_type: any p > 0, or
/// std::numeric_limits<double>::infinity() for the largest magnitude) is at most max_norm, and
/// returns that norm as a 0-d tensor on the gradients' device (no host sync: read it when you need
/// it). Parameters without a gradient are skipped. error_if_nonfinite: a NaN or infinite norm is an
/// error (this reads the norm: a host sync).   clip_grad_norm_(model->parameters(), 1.0);
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2,
                       bool error_if_nonfinite = false);
Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2,
                       bool error_if_nonfinite = false);
/// Clamps every gradient element to [-clip_value, clip_value] in place.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

/// Every parameter flattened and joined into one 1-D tensor (a copy).   Tensor v = parameters_to_vector(model->parameters());
Tensor parameters_to_vector(const std::vector<Tensor>& parameters);
/// Copies consecutive slices of `vec` into the parameters, in place: the inverse of parameters_to_vector.
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters);

}  // namespace minidl::nn::utils
