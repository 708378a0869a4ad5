#pragma once
// Scaled dot-product attention, as torch.nn.functional.scaled_dot_product_attention.
#include <optional>

#include "core/tensor.h"

namespace minidl {

/// softmax(q k^T * scale + mask) v over q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev];
/// the batch dims broadcast. attn_mask (broadcastable to [..., L, S]) is bool (true = may attend) or
/// floating (added to the scores); is_causal masks as tril(ones(L, S)) (query i sees keys j <= i) and
/// excludes attn_mask; scale defaults to 1/sqrt(E); dropout_p > 0 drops attention weights (pass 0 in
/// evaluation). Without a mask, where the device has a fused kernel for the dtype and head sizes, it
/// runs fused (the L x S scores are never stored); otherwise as scaled_dot_product_attention_math.
/// Fused, 4-D [B, H, L, E] views with a unit last stride and rows on multiples of 8 elements (a
/// model's heads: transposed views of one qkv projection) are read in place, and the output is a
/// [B, H, L, Ev] view of [B, L, H, Ev] memory, as PyTorch's flash attention makes it, so that
/// y.transpose(1, 2).contiguous() copies nothing. The fused CUDA kernels draw the dropout mask from
/// the default generator's Philox stream with 16 bits a weight (kept with probability within 2^-16
/// of 1 - dropout_p, where FlashAttention-2 takes 8 bits); the forward stores it a bit a weight for
/// the backward. On an H100/H200, 16-bit inputs run cuDNN's fused attention instead, with its own
/// mask from the same generator (attention_backend(), ops/backend_setting.h).
/// A query row that sees no key gives NaN on the composed path, as PyTorch's math backend does.
/// enable_gqa (grouped-query attention, as PyTorch's): key and value [..., Hk, S, E] with fewer heads
/// than query [..., Hq, L, E], Hk dividing Hq; query head h reads key head h / (Hq / Hk). They are
/// repeated to Hq heads (repeat_interleave along dim -3) before the kernels run.
///   Tensor y = scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
///   Tensor g = scaled_dot_product_attention(q, k2, v2, {}, 0.0, true, std::nullopt, /*enable_gqa=*/true);
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt, bool enable_gqa = false);

/// The same by composition (matmul, mask, softmax, dropout, matmul), PyTorch's "math" backend: the
/// reference the fused kernels are tested against. 16-bit inputs take their softmax in float32.
/// With `attn_weights`, it receives the attention weights [..., L, S] (after dropout) that multiply v.
///   Tensor ref = scaled_dot_product_attention_math(q, k, v, mask);
Tensor scaled_dot_product_attention_math(const Tensor& query, const Tensor& key, const Tensor& value,
                                         const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
                                         std::optional<double> scale = std::nullopt, Tensor* attn_weights = nullptr,
                                         bool enable_gqa = false);

}  // namespace minidl
