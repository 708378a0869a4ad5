// embedding and embedding_renorm_. Shapes: weight [V, D], indices [...] -> out [..., D]. The lookup
// is index_select's row gather; the backward is a kernel of its own (Kernels::embedding_backward)
// rather than index_select's index_add, for padding_idx, scale_grad_by_freq and the same bits on
// every CUDA run without turning on deterministic mode for the whole program.
#include "ops/embedding.h"

#include <algorithm>
#include <vector>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/indexing.h"
#include "ops/kernels.h"
#include "ops/reduce.h"

namespace minidl {

namespace {

void check_embedding_args(const char* op, const Tensor& weight, const Tensor& indices) {
  check_same_device(op, {weight, indices});
  MINIDL_CHECK(weight.dim() == 2, op, ": expected a 2-D weight [num_embeddings, embedding_dim], got shape ",
               weight.shape());
  MINIDL_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, op,
               ": expected int64 or int32 indices, got ", indices.dtype());
}

// The ids as the kernels read them: int64, flat, contiguous.
Tensor flat_ids(const Tensor& indices) {
  NoGradGuard no_grad;
  return indices.reshape({indices.numel()}).to(kInt64).contiguous();
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx,
                 bool scale_grad_by_freq, bool sparse) {
  check_embedding_args("embedding", weight, indices);
  MINIDL_CHECK(!sparse, "embedding: sparse=true asks for a sparse gradient, and minidl has no sparse tensors; "
               "use sparse=false (a dense gradient of the weight's shape)");
  const int64_t rows = weight.size(0), width = weight.size(1);
  int64_t padding = -1;
  if (padding_idx) {
    MINIDL_CHECK(*padding_idx >= -rows && *padding_idx < rows, "embedding: padding_idx must be within [", -rows,
                 ", ", rows, ") for a weight of ", rows, " rows, got ", *padding_idx);
    padding = *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
  }
  Tensor ids = flat_ids(indices);
  Shape out_shape = indices.shape();
  out_shape.push_back(width);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  {
    NoGradGuard no_grad;  // plumbing: the tape gets one entry for the whole op
    Tensor out_rows = out.view({ids.numel(), width});
    try {
      kernels_for(weight.device()).index_select(weight.contiguous(), 0, ids, out_rows);
    } catch (const Error&) {
      // The CPU kernel finds a bad id (CUDA reports one at the next synchronization, as index_select
      // does); name it in embedding's terms. Only this error path reads the ids back.
      const std::vector<int64_t> v = ids.to_vector<int64_t>();
      for (size_t i = 0; i < v.size(); ++i)
        MINIDL_CHECK(v[i] >= 0 && v[i] < rows, "embedding: id ", v[i], " at position ", i,
                     " of the indices is out of range for a weight of ", rows, " rows (expected 0 <= id < ", rows,
                     ")");
      throw;
    }
  }
  if (autograd::needs_recording({weight})) {
    // What the backward needs of the ids alone, made now (Kernels::embedding_backward_plan).
    Tensor plan = kernels_for(weight.device()).embedding_backward_plan(ids, rows);
    autograd::record("embedding", out, {weight}, {ids}, [ids, plan, padding, scale_grad_by_freq, rows, width](
                                                    const Tensor& g, const std::vector<bool>&) {
      Tensor grad_weight = Tensor::empty({rows, width}, g.dtype(), g.device());
      kernels_for(g.device()).embedding_backward(g.contiguous().view({ids.numel(), width}), ids, plan, padding,
                                                 scale_grad_by_freq, grad_weight);
      return std::vector<Tensor>{grad_weight};
    });
  }
  return out;
}

namespace detail {

std::optional<EmbeddingSumRows> embedding_sum_rows(const char* op, const Tensor& weight, const Tensor& indices,
                                                   const Tensor& other_weight, const Tensor& other_indices) {
  check_embedding_args(op, weight, indices);
  check_embedding_args(op, other_weight, other_indices);
  check_same_device(op, {weight, indices, other_weight, other_indices});
  MINIDL_CHECK(weight.dtype() == other_weight.dtype() && weight.size(1) == other_weight.size(1), op,
               ": expected two weights of one dtype and width, got ", weight.dtype(), " ", weight.shape(), " and ",
               other_weight.dtype(), " ", other_weight.shape());
  const Shape ids_shape = broadcast_shapes(indices.shape(), other_indices.shape(), op);
  // One kernel where the second ids repeat along leading dims of the first (a context's positions
  // beside a batch of tokens): the flat second ids then tile the flat first ones.
  Shape trailing = other_indices.shape();
  while (!trailing.empty() && trailing.front() == 1) trailing.erase(trailing.begin());
  const auto suffix = ids_shape.end() - static_cast<std::ptrdiff_t>(std::min(trailing.size(), ids_shape.size()));
  const bool tiles = ids_shape == indices.shape() && trailing.size() <= ids_shape.size() &&
                     std::equal(trailing.begin(), trailing.end(), suffix);
  if (!tiles || other_indices.numel() == 0) return std::nullopt;
  EmbeddingSumRows r;
  r.ids = flat_ids(indices), r.other_ids = flat_ids(other_indices);
  r.n = indices.numel(), r.m = other_indices.numel(), r.width = weight.size(1);
  r.rows = weight.size(0), r.other_rows = other_weight.size(0);
  r.out_shape = ids_shape;
  r.out_shape.push_back(r.width);
  return r;
}

void EmbeddingSumRows::make_plans(Kernels& kernels, bool weight, bool other_weight) {
  if (weight) plan = kernels.embedding_backward_plan(ids, rows);
  if (other_weight) other_plan = kernels.embedding_backward_plan(other_ids, other_rows);
}

std::vector<Tensor> EmbeddingSumRows::backward(const Tensor& g_rows, const std::vector<bool>& needs) const {
  Kernels& k = kernels_for(g_rows.device());
  Tensor grad, other_grad;
  if (needs[0]) {
    grad = Tensor::empty({rows, width}, g_rows.dtype(), g_rows.device());
    k.embedding_backward(g_rows, ids, plan, -1, false, grad);
  }
  if (needs[1]) {
    // The broadcast addition's gradient, then the second lookup's.
    const Tensor per_id = sum_to_shape(g_rows.view({n / m, m, width}), {m, width});
    other_grad = Tensor::empty({other_rows, width}, g_rows.dtype(), g_rows.device());
    k.embedding_backward(per_id.contiguous(), other_ids, other_plan, -1, false, other_grad);
  }
  return {grad, other_grad};
}

}  // namespace detail

Tensor embedding_sum(const Tensor& weight, const Tensor& indices, const Tensor& other_weight,
                     const Tensor& other_indices) {
  const char* op = "embedding_sum";
  if (std::optional<detail::EmbeddingSumRows> rows =
          detail::embedding_sum_rows(op, weight, indices, other_weight, other_indices)) {
    Tensor out = Tensor::empty(rows->out_shape, weight.dtype(), weight.device());
    Kernels& kernels = kernels_for(weight.device());
    Tensor out_rows = out.view({rows->n, rows->width});
    if (kernels.embedding_add(weight.contiguous(), rows->ids, other_weight.contiguous(), rows->other_ids, out_rows)) {
      if (autograd::needs_recording({weight, other_weight})) {
        rows->make_plans(kernels, weight.requires_grad(), other_weight.requires_grad());
        autograd::record(op, out, {weight, other_weight}, {rows->ids, rows->other_ids},
                         [r = *rows](const Tensor& g, const std::vector<bool>& needs) {
                           return r.backward(g.contiguous().view({r.n, r.width}), needs);
                         });
      }
      return out;
    }
  }
  return embedding(weight, indices) + embedding(other_weight, other_indices);
}

Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
  check_embedding_args("embedding_renorm_", weight, indices);
  MINIDL_CHECK(max_norm >= 0, "embedding_renorm_: expected max_norm >= 0, got ", max_norm);
  NoGradGuard no_grad;  // a write to the table, as PyTorch's: no part of any graph
  Tensor ids = flat_ids(indices);
  if (ids.numel() == 0) return weight;
  Tensor rows = index_select(weight, 0, ids);
  if (is_reduced_floating(rows.dtype())) rows = rows.to(kFloat32);  // the norm summed in float32
  Tensor norms = norm(rows, norm_type, {1}, /*keepdim=*/true);
  Tensor scale = where(gt(norms, max_norm), max_norm / (norms + 1e-7), 1.0);
  // A repeated id writes the same rescaled row each time, so the order of the writes does not matter.
  index_put_(weight, {ids}, (rows * scale).to(weight.dtype()));
  return weight;
}

}  // namespace minidl
