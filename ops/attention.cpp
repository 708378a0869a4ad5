// Scaled dot-product attention. Shapes:
//   q [..., L, E], k [..., S, E], v [..., S, Ev] -> out [..., L, Ev]; the batch dims (all but the last
//   two) broadcast together to `batch`, and B = numel(batch).
//   attn_mask: broadcastable to batch + [L, S]; bool (true = may attend) or floating (added).
//   enable_gqa: k and v with fewer heads (dim -3) than q are first repeated to q's heads.
// Two paths, one result:
//   fused:    no attn_mask and a device kernel for the dtype and head sizes (Kernels::
//             fused_attention_supports): one forward kernel that also returns each row's
//             logsumexp, and one backward kernel that recomputes the probabilities from it
//             (FlashAttention), so the [B, L, S] scores are never kept. 3-D or 4-D q, k, v of one
//             batch shape go to the kernels as they are, strided views included (a model's
//             [B, H, T, hs] heads, transposed views of one packed qkv projection, are not copied);
//             the output and the gradients are made in PyTorch's flash layout [B, T, H, hs], so
//             that y.transpose(1, 2), the heads merged back, is contiguous. Other inputs (batch
//             dims that broadcast, more than two of them, or rows off 8-element alignment) are
//             broadcast, flattened to [B, L, E] and made contiguous first. A create_graph backward
//             makes the gradients again with recorded ops, so the op is differentiable twice.
//             Where attention_backend() lets a vendor library run the call (cuDNN's fused
//             attention for 16-bit inputs on an H100/H200: Kernels::library_attention_forward),
//             the library runs it instead, both ways, on the same tensors.
//   composed: matmul, mask, softmax, dropout, matmul, each op recording its own backward; PyTorch's
//             "math" backend and the reference of the fused kernels.
// A query row that sees no key: the composed softmax of all -inf gives NaN, as PyTorch's math
// backend. The fused kernels write 0 and logsumexp -inf there (ops/kernels.h); only an explicit mask
// can hide every key of a row, and a mask always takes the composed path, so the two cannot differ.
#include "ops/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/logical.h"
#include "ops/matmul.h"
#include "ops/rearrange.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/softmax.h"
#include "ops/view.h"

namespace minidl {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

struct Geometry {
  Shape batch;  // the broadcast batch dims
  int64_t B = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
};

Shape batch_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

bool broadcastable(const Shape& a, const Shape& b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

Geometry check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                      bool is_causal, std::optional<double> scale) {
  MINIDL_CHECK(q.defined() && k.defined() && v.defined(), kOp, ": query, key and value must all be defined");
  MINIDL_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, kOp,
               ": expected query [..., L, E], key [..., S, E] and value [..., S, Ev] of at least 2 dimensions, got "
               "shapes ",
               q.shape(), ", ", k.shape(), " and ", v.shape());
  MINIDL_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), kOp,
               ": expected query, key and value of one dtype, got ", q.dtype(), ", ", k.dtype(), " and ", v.dtype());
  MINIDL_CHECK(is_floating(q.dtype()), kOp, ": expected floating query, key and value, got ", q.dtype());
  check_same_device(kOp, {q, k, v, mask});
  MINIDL_CHECK(q.size(-1) == k.size(-1), kOp, ": query's last dim E = ", q.size(-1), " (shape ", q.shape(),
               ") differs from key's ", k.size(-1), " (shape ", k.shape(), ")");
  MINIDL_CHECK(k.size(-2) == v.size(-2), kOp, ": key has S = ", k.size(-2), " positions (shape ", k.shape(),
               "), value has ", v.size(-2), " (shape ", v.shape(), ")");
  MINIDL_CHECK(dropout_p >= 0 && dropout_p <= 1, kOp, ": expected dropout_p in [0, 1], got ", dropout_p);
  MINIDL_CHECK(!(is_causal && mask.defined()), kOp,
               ": an explicit attn_mask should not be set when is_causal=true (PyTorch's rule); fold the causal "
               "mask into attn_mask instead");
  const Shape bq = batch_dims(q), bk = batch_dims(k), bv = batch_dims(v);
  MINIDL_CHECK(broadcastable(bq, bk) && broadcastable(bq, bv) && broadcastable(bk, bv), kOp,
               ": the batch dims (all but the last two: batch, heads, ...) of query ", bq, ", key ", bk, " and value ",
               bv, " do not broadcast together (shapes ", q.shape(), ", ", k.shape(), " and ", v.shape(), ")");
  Geometry g;
  g.batch = broadcast_shapes(broadcast_shapes(batch_dims(q), batch_dims(k), kOp), batch_dims(v), kOp);
  g.B = shape_numel(g.batch);
  g.L = q.size(-2);
  g.S = k.size(-2);
  g.E = q.size(-1);
  g.Ev = v.size(-1);
  g.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(g.E));
  if (mask.defined()) {
    MINIDL_CHECK(mask.dtype() == kBool || is_floating(mask.dtype()), kOp,
                 ": expected a bool attn_mask (true = may attend) or a floating one (added to the scores), got ",
                 mask.dtype());
    const Shape scores = with_matrix(g.batch, g.L, g.S);
    MINIDL_CHECK(broadcasts_to(mask.shape(), scores), kOp, ": attn_mask of shape ", mask.shape(),
                 " does not broadcast to the scores' shape [..., L, S] = ", scores);
  }
  return g;
}

// enable_gqa: key and value repeated along their heads dim (-3) to query's heads, each key head
// serving Hq / Hk consecutive query heads (PyTorch's repeat_interleave). Unchanged without it, or
// where the heads already agree.
std::pair<Tensor, Tensor> grouped_key_value(const Tensor& q, const Tensor& k, const Tensor& v, bool enable_gqa) {
  if (!enable_gqa) return {k, v};
  MINIDL_CHECK(q.defined() && k.defined() && v.defined(), kOp, ": query, key and value must all be defined");
  MINIDL_CHECK(q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3, kOp,
               ": enable_gqa expects query [..., Hq, L, E], key [..., Hk, S, E] and value [..., Hv, S, Ev] with a "
               "heads dim, got shapes ",
               q.shape(), ", ", k.shape(), " and ", v.shape());
  const int64_t hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
  MINIDL_CHECK(hk > 0 && hv > 0 && hq % hk == 0 && hq % hv == 0, kOp,
               ": with enable_gqa the heads of key (", hk, ") and value (", hv, ") must divide query's (", hq, ")");
  return {hk == hq ? k : repeat_interleave(k, hq / hk, -3), hv == hq ? v : repeat_interleave(v, hq / hv, -3)};
}

// t [..., rows, cols] broadcast to the batch and flattened to [B, rows, cols] (recorded ops: the
// gradient of a broadcast input is summed back).
Tensor flatten_batch(const Tensor& t, const Geometry& g, int64_t rows, int64_t cols) {
  return reshape(expand(t, with_matrix(g.batch, rows, cols)), {g.B, rows, cols});
}

// Whether the kernels can read t [..., rows, cols] where it lies (ops/kernels.h): a unit last
// stride, and a start and other strides that are multiples of 8 elements, so that every row starts
// on 16 bytes in every dtype (the CUDA kernels' cp.async and float4 loads; they would copy a
// tensor without it). A size-1 dim's stride never moves a pointer.
bool kernel_readable(const Tensor& t) {
  if (t.stride(-1) != 1 || t.offset() % 8 != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) % 8 != 0) return false;
  return true;
}

// Whether q, k, v go to the kernels as they are: 3-D or 4-D, one batch shape, readable in place.
bool fused_in_place(const Tensor& q, const Tensor& k, const Tensor& v) {
  return (q.dim() == 3 || q.dim() == 4) && k.dim() == q.dim() && v.dim() == q.dim() &&
         batch_dims(q) == batch_dims(k) && batch_dims(q) == batch_dims(v) && kernel_readable(q) &&
         kernel_readable(k) && kernel_readable(v);
}

// A new batch + [rows, cols] tensor for batch [B] or [B1, B2]; with two batch dims laid out as
// [B1, rows, B2, cols] (PyTorch's flash attention layout), so that its transpose(1, 2) is contiguous.
Tensor empty_heads(const Shape& batch, int64_t rows, int64_t cols, DType dtype, Device device) {
  if (batch.size() == 1) return Tensor::empty({batch[0], rows, cols}, dtype, device);
  return Tensor::empty({batch[0], rows, batch[1], cols}, dtype, device).transpose(1, 2);
}

// Whether q, k and v are the heads of one packed projection: qkv [B, T, 3C] contiguous, split in
// three along its last dim and each viewed as [B, T, H, E] and transposed to [B, H, T, E] (nanoGPT's
// and MultiheadAttention's in-projection). One storage, one layout, k C elements after q, v after k.
bool packed_heads(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.dim() != 4 || k.shape() != q.shape() || v.shape() != q.shape() || k.strides() != q.strides() ||
      v.strides() != q.strides() || k.dtype() != q.dtype() || v.dtype() != q.dtype() ||
      k.impl().storage != q.impl().storage || v.impl().storage != q.impl().storage)
    return false;
  const int64_t heads = q.size(1), T = q.size(2), E = q.size(3), C = heads * E;
  const Strides& s = q.strides();
  return s[3] == 1 && s[1] == E && s[2] == 3 * C && s[0] == T * 3 * C && k.offset() == q.offset() + C &&
         v.offset() == k.offset() + C;
}

// The gradients of q, k and v in new memory: for packed heads, at their places in one new
// [B, T, 3C] tensor, so that split's backward takes that tensor whole (ops/slice.cpp) instead of
// copying three gradients into one; else each in the [B1, rows, B2, cols] layout of empty_heads.
std::array<Tensor, 3> gradient_tensors(const Tensor& q, const Tensor& k, const Tensor& v, const Geometry& g) {
  if (packed_heads(q, k, v)) {
    const int64_t C = q.size(1) * q.size(3);
    Tensor packed = Tensor::empty({q.size(0), q.size(2), 3 * C}, q.dtype(), q.device());
    return {Tensor::make_view(packed, q.shape(), q.strides(), 0), Tensor::make_view(packed, k.shape(), k.strides(), C),
            Tensor::make_view(packed, v.shape(), v.strides(), 2 * C)};
  }
  const Shape batch = batch_dims(q);
  return {empty_heads(batch, g.L, g.E, q.dtype(), q.device()), empty_heads(batch, g.S, g.E, k.dtype(), k.device()),
          empty_heads(batch, g.S, g.Ev, v.dtype(), v.device())};
}

// tril(ones(L, S)) as bool, made on the device by kernels alone: tril's arange is copied from the
// host, a synchronizing copy that no CUDA graph capture may contain (cuda::GraphedStep's steps).
Tensor causal_keep_mask(int64_t L, int64_t S, Device device) {
  Tensor row = cumsum(ones({L, 1}, kFloat32, device), 0), col = cumsum(ones({1, S}, kFloat32, device), 1);
  return le(col, row);  // key j + 1 <= query i + 1; exact in float32 below 2^24 positions
}

// softmax over the keys; 16-bit scores take theirs in float32, as autocast runs softmax.
Tensor attention_probabilities(const Tensor& scores) {
  if (!is_reduced_floating(scores.dtype())) return softmax(scores, -1);
  return softmax(scores.to(kFloat32), -1).to(scores.dtype());
}

// The fused kernels' gradients from recorded ops, for a create_graph backward (so attention is
// differentiable twice, which PyTorch's fused kernels are not): the probabilities P made again from
// q and k as given, then dV = P^T dO, dS = P (dP - rowsum(dP P)) with dP = dO V^T, dQ = scale dS K
// and dK = scale dS^T Q. The dropout mask lives inside the kernels, so a create_graph backward
// through dropout is refused.
std::vector<Tensor> fused_attention_backward_recorded(const Tensor& grad, const Tensor& q, const Tensor& k,
                                                      const Tensor& v, const Geometry& g, bool causal,
                                                      double dropout_p) {
  MINIDL_CHECK(dropout_p == 0, kOp, ": a create_graph backward through the fused kernels with dropout_p = ",
               dropout_p, " is not supported (their dropout mask is drawn inside the kernels); pass an attn_mask to "
               "take the composed path, which is differentiable twice");
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), g.scale);
  if (causal) {
    scores = masked_fill(scores, logical_not(causal_keep_mask(g.L, g.S, q.device())),
                         -std::numeric_limits<double>::infinity());
  }
  const Tensor p = attention_probabilities(scores);
  const Tensor dp = matmul(grad, transpose(v, -2, -1));
  const Tensor ds = mul(p, sub(dp, sum(mul(dp, p), {-1}, true)));
  return {mul(matmul(ds, k), g.scale), mul(matmul(transpose(ds, -2, -1), q), g.scale),
          matmul(transpose(p, -2, -1), grad)};
}

// The fused kernels on q [..., L, E], k [..., S, E], v [..., S, Ev] of one batch shape ([B] or
// [B1, B2]) that the kernels read in place; the gradients go straight back to q, k and v.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Geometry& g, bool causal,
                       double dropout_p) {
  Kernels& kernels = kernels_for(q.device());
  Tensor out = empty_heads(batch_dims(q), g.L, g.Ev, q.dtype(), q.device());
  Tensor logsumexp = Tensor::empty({g.B, g.L}, kFloat32, q.device());
  Tensor rng_state = zeros({3}, kInt64);  // [seed, offset, device state]: Kernels::attention_forward
  // The dropout mask as the backend stores it for the backward (a bit a score on CUDA), where one runs.
  Tensor keep_mask, seed_offset;
  const bool recording = autograd::needs_recording({q, k, v});
  // A vendor library's attention where the backend switch lets one run it (cuDNN's on an H100/H200),
  // else the device's own kernels; the backward follows the forward's choice.
  const bool library =
      kernels.library_attention_forward(q, k, v, g.scale, causal, dropout_p, out, logsumexp, rng_state, seed_offset);
  if (!library)
    kernels.attention_forward(q, k, v, g.scale, causal, dropout_p, out, logsumexp, rng_state,
                              recording ? &keep_mask : nullptr);
  if (recording) {
    autograd::record(kOp, out, {q, k, v}, {q, k, v, out},
                     [q = q.detach(), k = k.detach(), v = v.detach(), o = out.detach(), logsumexp, rng_state,
                      keep_mask, seed_offset, g, causal, dropout_p, library,
                      given = std::array<Tensor, 3>{q, k, v}](const Tensor& grad,
                                                                                    const std::vector<bool>&) {
                       if (grad_mode_enabled())
                         return fused_attention_backward_recorded(grad, given[0], given[1], given[2], g, causal,
                                                                  dropout_p);
                       auto [gq, gk, gv] = gradient_tensors(q, k, v, g);
                       // The incoming gradient is often a view too (of the heads merged back).
                       const Tensor grad_out = kernel_readable(grad) ? grad : grad.contiguous();
                       Kernels& backend = kernels_for(q.device());
                       if (library)
                         backend.library_attention_backward(grad_out, q, k, v, o, logsumexp, seed_offset, g.scale,
                                                            causal, dropout_p, gq, gk, gv);
                       else
                         backend.attention_backward(grad_out, q, k, v, o, logsumexp, rng_state, keep_mask, g.scale,
                                                    causal, dropout_p, gq, gk, gv);
                       return std::vector<Tensor>{gq, gk, gv};
                     }, true);
  }
  return out;
}

Tensor math_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double dropout_p,
                      bool is_causal, const Geometry& g, Tensor* attn_weights) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor scores = matmul(flatten_batch(q, g, g.L, g.E) * g.scale, transpose(flatten_batch(k, g, g.S, g.E), 1, 2));
  // The mask broadcasts against the scores in their batch shape (a view), not copied to [B, L, S].
  scores = reshape(scores, with_matrix(g.batch, g.L, g.S));
  if (is_causal) scores = masked_fill(scores, logical_not(causal_keep_mask(g.L, g.S, q.device())), -inf);
  if (mask.defined()) {
    if (mask.dtype() == kBool) scores = masked_fill(scores, logical_not(mask), -inf);
    else scores = add(scores, mask.to(scores.dtype()));
  }
  Tensor weights = attention_probabilities(scores);
  if (dropout_p > 0) weights = dropout(weights, dropout_p, true);
  if (attn_weights) *attn_weights = weights;
  Tensor out = matmul(reshape(weights, {g.B, g.L, g.S}), flatten_batch(v, g, g.S, g.Ev));
  return reshape(out, with_matrix(g.batch, g.L, g.Ev));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key_given, const Tensor& value_given,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  MINIDL_AUTOCAST(scaled_dot_product_attention, scaled_dot_product_attention, query, key_given, value_given,
                  attn_mask, dropout_p, is_causal, scale, enable_gqa);
  const auto [key, value] = grouped_key_value(query, key_given, value_given, enable_gqa);
  const Geometry g = check_inputs(query, key, value, attn_mask, dropout_p, is_causal, scale);
  const bool fused = !attn_mask.defined() && g.L > 0 && g.S > 0 && g.E > 0 && g.Ev > 0 &&
                     kernels_for(query.device()).fused_attention_supports(query.dtype(), g.E, g.Ev, dropout_p > 0);
  if (!fused) return math_attention(query, key, value, attn_mask, dropout_p, is_causal, g, nullptr);
  if (fused_in_place(query, key, value)) return fused_attention(query, key, value, g, is_causal, dropout_p);
  Tensor out = fused_attention(contiguous(flatten_batch(query, g, g.L, g.E)),
                               contiguous(flatten_batch(key, g, g.S, g.E)),
                               contiguous(flatten_batch(value, g, g.S, g.Ev)), g, is_causal, dropout_p);
  return reshape(out, with_matrix(g.batch, g.L, g.Ev));
}

Tensor scaled_dot_product_attention_math(const Tensor& query, const Tensor& key_given, const Tensor& value_given,
                                         const Tensor& attn_mask, double dropout_p, bool is_causal,
                                         std::optional<double> scale, Tensor* attn_weights, bool enable_gqa) {
  const auto [key, value] = grouped_key_value(query, key_given, value_given, enable_gqa);
  const Geometry g = check_inputs(query, key, value, attn_mask, dropout_p, is_causal, scale);
  return math_attention(query, key, value, attn_mask, dropout_p, is_causal, g, attn_weights);
}

}  // namespace minidl
