#pragma once
// In-place optimizer updates, one fused kernel per parameter. Not recorded on the tape.
#include <vector>

#include "core/tensor.h"
#include "ops/kernels.h"

namespace minidl {

/// One SGD step on `param` from `grad`; `momentum_buf` may be null when momentum is 0.
void sgd_update_(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& config);
/// One SGD step on several parameters of one device and dtype (one launch on CUDA); `momentum_bufs`
/// is empty when momentum is 0, else one per parameter.
void sgd_update_(std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& momentum_bufs,
                 const SgdConfig& config);
/// One Adam or AdamW step on `param`, updating the two moment estimates in place.
void adam_update_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamConfig& config);
/// One Adam or AdamW step on several CUDA parameters of one device and dtype, their step counts,
/// learning rate and found_inf read on the device (no host sync: a step that a CUDA graph can capture).
///   adam_update_multi_(lists, AdamMultiConfig{0.9, 0.999, 1e-8, 0.01, true, false, false, &lr});
void adam_update_multi_(AdamTensorLists& tensors, const AdamMultiConfig& config);
/// Scales the gradients in place so that their joint 2-norm is at most max_norm, by the device's
/// fused pass (a few launches, no host sync), returning the norm; undefined where the device has
/// none (the CPU), and the gradients are then untouched.   Tensor norm = clip_grad_norm_fused_(grads, 1.0);
Tensor clip_grad_norm_fused_(std::vector<Tensor>& grads, double max_norm);

}  // namespace minidl
