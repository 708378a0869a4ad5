#pragma once
// Normalization layers' ops: batch norm, layer norm, RMS norm and group norm, as torch.nn.functional has them.
#include <optional>
#include <tuple>

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

/// x * rsqrt(mean(x^2 over normalized_shape) + eps) * weight, torch's rms_norm (Llama's norm): the
/// trailing dims normalized_shape; weight of that shape, optional; eps defaults to the machine
/// epsilon of float32 (of float64 for a float64 x); a 16-bit x is normalized in float32.
///   Tensor y = rms_norm(x, {4096}, gamma);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);

/// A pre-norm transformer's seam in one op (flash-attn's dropout_add_layer_norm): sum = residual +
/// dropout(x, p, training), and out = layer_norm(sum) over the last dim, in out_dtype (x's unless
/// given). Returns {out, sum}. x is a block's branch, residual the stream it adds to: x has
/// residual's dtype or, beside a float32 residual, a 16-bit one (autocast's products make 16-bit
/// branches on a float32 stream, and the next product wants its input 16-bit). Without a residual
/// (undefined) the stream starts here, sum = dropout(x): the embeddings before the first block,
/// whose float32 x may give a 16-bit out (out_dtype) for the product after it. weight and bias [d]
/// are optional, in the sum's dtype. On CUDA one pass over the rows each way, the mask drawn as
/// dropout() draws it; elsewhere the composition.
///   std::tie(y, x) = dropout_add_layer_norm(branch, x, ln->weight, ln->bias, 0.2, is_training());
///   std::tie(y, x) = dropout_add_layer_norm(tok + pos, {}, ln->weight, ln->bias, 0.2, true, 1e-5, kBFloat16);
std::tuple<Tensor, Tensor> dropout_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight = {},
                                                  const Tensor& bias = {}, double p = 0.5, bool training = true,
                                                  double eps = 1e-5, std::optional<DType> out_dtype = std::nullopt);

/// dropout_add_layer_norm(embedding_sum(table, indices, other_table, other_indices), {}, weight, bias,
/// p, training, eps, out_dtype) as one op: a transformer's first seam, from its token and position
/// embeddings to the stream and the first block's norm. On CUDA, where the second ids tile the first
/// (embedding_sum's one-kernel case), the seam's kernel looks up and adds the rows itself and the
/// embeddings' sum is never written; the same bits and mask as the composition, which runs elsewhere.
///   std::tie(y, x) = embedding_dropout_layer_norm(wte, tokens, wpe, arange(T, kInt64, dev), ln->weight, ln->bias,
///                                                 0.2, is_training(), 1e-5, kBFloat16);
std::tuple<Tensor, Tensor> embedding_dropout_layer_norm(const Tensor& table, const Tensor& indices,
                                                        const Tensor& other_table, const Tensor& other_indices,
                                                        const Tensor& weight = {}, const Tensor& bias = {},
                                                        double p = 0.5, bool training = true, double eps = 1e-5,
                                                        std::optional<DType> out_dtype = std::nullopt);

/// Splits the channels of x [N, C, *] into num_groups groups and normalizes each sample's group with
/// its own mean and biased variance; weight and bias [C] (per channel) are optional.
///   Tensor y = group_norm(x, 8, gamma, beta);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

}  // namespace minidl
