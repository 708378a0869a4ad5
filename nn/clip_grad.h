#pragma once
// Gradient clipping, between backward() and the optimizer step, as torch::nn::utils.
#include <vector>

#include "core/tensor.h"

namespace minidl::nn::utils {

/// Scales every gradient in place so that their joint 2-norm is at most max_norm, and returns that
/// norm as a 0-d tensor on the gradients' device (no host sync: read it when you need it).
/// Parameters without a gradient are skipped.   clip_grad_norm_(model->parameters(), 1.0);
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2);
/// Clamps every gradient element to [-clip_value, clip_value] in place.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace minidl::nn::utils
