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

}  // namespace minidl
