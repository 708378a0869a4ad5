// Fused attention through cuDNN's graph API (ops/kernels.h's library_attention_forward/backward).
// cuDNN has no "attention" call: its fused flash-attention engines are found by describing attention
// as a graph of primitive operations (products, pointwise ops, reductions, a Philox RNG) in the one
// arrangement its engines recognize, the arrangement cuDNN's own frontend library emits:
//   forward:  S = (Q K^T) * scale; causal: S = select(row >= col, S, -inf); M = max S; E = exp(S - M);
//             Z = sum E; stats = M + log Z; P = E / Z; dropout: P = P * bernoulli(1 - p) * 1 / (1 - p);
//             O = P V
//   backward: the softmax sum D = rowsum(dO * O) * (1 - p); S and the mask again; E = exp(S - stats);
//             dV = (E * mask / (1 - p))^T dO; dS = (dO V^T * mask - D) * E / (1 - p) * scale;
//             dK = dS^T Q; dQ = dS K, accumulated in float32 and converted.
// Everything between the products stays on chip; stats is the logsumexp of the scaled scores,
// the same quantity minidl's kernels keep. cuDNN draws the dropout mask from (seed, offset) tensors
// on the device, written by a kernel from the draw rng_state records, so a captured graph draws anew
// on every replay. Plans are built once per geometry and cached (the first call of a shape builds
// them: keep that out of a graph capture, as a warm-up step does); a geometry cuDNN has no engine for
// is remembered and runs minidl's kernels.
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/launch.cuh"
#include "core/deterministic.h"
#include "core/random.h"
#include "ops/backend_setting.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cudnn_attention.h"
#include "ops/cuda/cudnn_backend.h"
#include "ops/cuda/cudnn_plan.h"

namespace minidl {

namespace cudnn {

namespace {

using namespace backend;
using Dims = std::array<int64_t, 4>;

// A tensor as cuDNN sees it: [b, h, rows, cols] with strides, or a [1, 1, 1, 1] scalar.
struct TensorSpec {
  Dims dims{}, strides{};
};

class GraphBuilder;

/// One finalized execution plan and the ids its variant pack binds.
class AttentionPlan {
 public:
  ~AttentionPlan() { destroy_all(keep_); }
  /// Queues the plan on `handle`'s stream: `ids` and `pointers` for the device tensors; `scalars`
  /// (id, value) for every by-value float a graph of its kind may hold, of which the plan binds its own
  /// (a pack that named a by-value tensor its graph did not use failed with
  /// CUDNN_STATUS_BAD_PARAM_NULL_POINTER).
  void run(cudnnHandle_t handle, std::vector<int64_t> ids, std::vector<void*> pointers,
           std::vector<std::pair<int64_t, float>> scalars, void* workspace) const {
    for (auto& [id, value] : scalars) {
      if (std::find(scalar_ids_.begin(), scalar_ids_.end(), id) == scalar_ids_.end()) continue;
      ids.push_back(id);
      pointers.push_back(&value);
    }
    execute(handle, plan_, ids.data(), pointers.data(), static_cast<int64_t>(ids.size()), workspace);
  }
  size_t workspace() const { return workspace_; }

 private:
  friend class GraphBuilder;  // fills it in finish
  std::vector<cudnnBackendDescriptor_t> keep_;  // the graph, the engine and the plan
  cudnnBackendDescriptor_t plan_ = nullptr;
  std::vector<int64_t> scalar_ids_;
  size_t workspace_ = 0;
};

// Builds one operation graph: tensors by id, operations in order, then the plan of the first engine
// configuration cuDNN's heuristics offer that finalizes. Holds every descriptor it made.
class GraphBuilder {
 public:
  explicit GraphBuilder(cudnnHandle_t handle) : handle_(handle) {}
  ~GraphBuilder() { destroy_all(keep_); }

  /// A tensor the variant pack binds (is_virtual false) or one that lives on chip (true).
  cudnnBackendDescriptor_t tensor(int64_t id, cudnnDataType_t type, const TensorSpec& t, bool is_virtual) {
    return make_tensor(id, type, t, is_virtual, false);
  }
  cudnnBackendDescriptor_t on_chip(cudnnDataType_t type, const TensorSpec& t) {
    return make_tensor(next_virtual_++, type, t, true, false);
  }
  /// A float passed by value in the variant pack (its value is bound per call, by id).
  cudnnBackendDescriptor_t scalar(int64_t id) {
    return make_tensor(id, CUDNN_DATA_FLOAT, TensorSpec{{1, 1, 1, 1}, {1, 1, 1, 1}}, false, true);
  }

  /// y = mode(x[, b[, t]]); `axis` for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y,
                 cudnnBackendDescriptor_t b = nullptr, cudnnBackendDescriptor_t t = nullptr, int64_t axis = -1,
                 cudnnDataType_t math = CUDNN_DATA_FLOAT) {
    cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, keep_);
    CUDNN_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    CUDNN_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math));
    if (axis >= 0) set<int64_t>(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, {axis});
    CUDNN_CHECK(cudnnBackendFinalize(pw));
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, keep_);
    set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t) set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    set_descriptor(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    set<float>(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, {1.f});
    set<float>(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, {1.f});
    add(op);
  }
  /// y = reduce(x) over the dims where y has size 1.
  void reduction(cudnnReduceTensorOp_t reduce, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t r = float_math(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_ATTR_REDUCTION_COMP_TYPE);
    CUDNN_CHECK(cudnnBackendSetAttribute(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1,
                                         &reduce));
    CUDNN_CHECK(cudnnBackendFinalize(r));
    operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_REDUCTION_DESC, r},
                                                             {CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
                                                             {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y}});
  }
  /// c = a b over the last two dims, batched over the first two, accumulated in float32.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = float_math(CUDNN_BACKEND_MATMUL_DESCRIPTOR, CUDNN_ATTR_MATMUL_COMP_TYPE);
    CUDNN_CHECK(cudnnBackendFinalize(mm));
    operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a}, {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
               {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c}, {CUDNN_ATTR_OPERATION_MATMUL_DESC, mm}});
  }
  /// y = bernoulli(keep) from Philox at (seed, offset), both int64 tensors on the device.
  void bernoulli(double keep, cudnnBackendDescriptor_t seed, cudnnBackendDescriptor_t offset,
                 cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t rng = make(CUDNN_BACKEND_RNG_DESCRIPTOR, keep_);
    const cudnnRngDistribution_t distribution = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    CUDNN_CHECK(
        cudnnBackendSetAttribute(rng, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &distribution));
    set<double>(rng, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, {keep});
    CUDNN_CHECK(cudnnBackendFinalize(rng));
    operation(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_RNG_YDESC, y}, {CUDNN_ATTR_OPERATION_RNG_DESC, rng},
               {CUDNN_ATTR_OPERATION_RNG_SEED, seed}, {CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, offset}});
  }
  /// y: x seen with other dims and strides (a transpose that moves no data).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    operation(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x}, {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y}});
  }

  /// The graph's plan, moved out with the descriptors it needs; null where cuDNN has no engine.
  std::unique_ptr<AttentionPlan> finish(std::vector<int64_t> scalar_ids);

 private:
  cudnnBackendDescriptor_t make_tensor(int64_t id, cudnnDataType_t type, const TensorSpec& t, bool is_virtual,
                                       bool by_value) {
    return backend::tensor(keep_, id, type, 4, t.dims.data(), t.strides.data(), is_virtual, by_value);
  }
  void add(cudnnBackendDescriptor_t op) {
    CUDNN_CHECK(cudnnBackendFinalize(op));
    ops_.push_back(op);
  }
  /// An operation of `type` whose attributes are descriptors, set in the order given, added to the graph.
  void operation(cudnnBackendDescriptorType_t type,
                 std::initializer_list<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>> descs) {
    cudnnBackendDescriptor_t op = make(type, keep_);
    for (const auto& [attribute, desc] : descs) set_descriptor(op, attribute, desc);
    add(op);
  }
  /// A descriptor of `type` whose compute type (`attribute`) is float32, not yet finalized.
  cudnnBackendDescriptor_t float_math(cudnnBackendDescriptorType_t type, cudnnBackendAttributeName_t attribute) {
    cudnnBackendDescriptor_t d = make(type, keep_);
    const cudnnDataType_t math = CUDNN_DATA_FLOAT;
    CUDNN_CHECK(cudnnBackendSetAttribute(d, attribute, CUDNN_TYPE_DATA_TYPE, 1, &math));
    return d;
  }

  cudnnHandle_t handle_;
  std::vector<cudnnBackendDescriptor_t> keep_, ops_;
  int64_t next_virtual_ = 1000;
};

std::unique_ptr<AttentionPlan> GraphBuilder::finish(std::vector<int64_t> scalar_ids) {
  std::unique_ptr<AttentionPlan> plan(new AttentionPlan());
  plan->scalar_ids_ = std::move(scalar_ids);
  std::vector<cudnnBackendDescriptor_t>& keep = plan->keep_;
  keep = std::move(keep_);  // the plan keeps the graph it was made from
  keep_.clear();
  const cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, keep);
  CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       static_cast<int64_t>(ops_.size()), ops_.data()));
  CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_));
  if (cudnnBackendFinalize(graph) != CUDNN_STATUS_SUCCESS) return nullptr;
  for (cudnnBackendDescriptor_t config : heuristic_configs(graph, keep)) {
    cudnnBackendDescriptor_t candidate = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, keep);
    set_descriptor(candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    cudnnBackendSetAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_);
    if (cudnnBackendFinalize(candidate) != CUDNN_STATUS_SUCCESS) continue;
    int64_t bytes = 0, got = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                         &bytes));
    plan->plan_ = candidate;
    plan->workspace_ = static_cast<size_t>(std::max<int64_t>(bytes, 0));
    return plan;
  }
  return nullptr;
}

// ---- the tensors' ids in the graphs and the variant packs ----
enum : int64_t {
  kQ = 1, kKt, kVt, kV, kO, kStats, kSeed, kOffset, kGradOut, kGradQ, kGradK, kGradV, kSoftmaxSum, kGradQAccum,
  kScale = 100, kMinusInf, kDropScale, kKeepProb,
};

// [b, h, rows, cols] of a 3-D or 4-D tensor: 3-D [B, rows, cols] as h = 1.
TensorSpec spec_of(const Tensor& t) {
  if (t.dim() == 3)
    return {{t.size(0), 1, t.size(1), t.size(2)}, {t.stride(0), t.size(1) * t.stride(1), t.stride(1), 1}};
  return {{t.size(0), t.size(1), t.size(2), t.size(3)}, {t.stride(0), t.stride(1), t.stride(2), 1}};
}
TensorSpec transposed(TensorSpec t) {
  std::swap(t.dims[2], t.dims[3]);
  std::swap(t.strides[2], t.strides[3]);
  return t;
}
// Contiguous [b, h, rows, cols].
TensorSpec dense(int64_t b, int64_t h, int64_t rows, int64_t cols) {
  return {{b, h, rows, cols}, {h * rows * cols, rows * cols, cols, 1}};
}

struct Key {
  int dtype, device;
  bool causal, backward;
  double keep;                  // 1 - dropout_p
  std::vector<int64_t> layout;  // every bound tensor's dims and strides
  auto tie() const { return std::tie(dtype, device, causal, backward, keep, layout); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// S = (Q K^T) * scale, masked where causal: [b, h, L, S] float32 on chip.
cudnnBackendDescriptor_t scores(GraphBuilder& g, cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
                                const TensorSpec& s, bool causal, cudnnBackendDescriptor_t scale,
                                std::vector<int64_t>& scalars, cudnnBackendDescriptor_t stats = nullptr) {
  cudnnBackendDescriptor_t product = g.on_chip(CUDNN_DATA_FLOAT, s);
  g.matmul(q, kt, product);
  cudnnBackendDescriptor_t scaled = g.on_chip(CUDNN_DATA_FLOAT, s);
  g.pointwise(CUDNN_POINTWISE_MUL, product, scaled, scale);
  if (stats) {  // the backward subtracts the logsumexp before the mask, as cuDNN's pattern has it
    cudnnBackendDescriptor_t shifted = g.on_chip(CUDNN_DATA_FLOAT, s);
    g.pointwise(CUDNN_POINTWISE_SUB, scaled, shifted, stats);
    scaled = shifted;
  }
  if (!causal) return scaled;
  cudnnBackendDescriptor_t minus_inf = g.scalar(kMinusInf);
  scalars.push_back(kMinusInf);
  cudnnBackendDescriptor_t row = g.on_chip(CUDNN_DATA_INT32, s), col = g.on_chip(CUDNN_DATA_INT32, s);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, row, nullptr, nullptr, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, col, nullptr, nullptr, 3);
  cudnnBackendDescriptor_t visible = g.on_chip(CUDNN_DATA_BOOLEAN, s);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, visible, col, nullptr, -1, CUDNN_DATA_BOOLEAN);
  cudnnBackendDescriptor_t masked = g.on_chip(CUDNN_DATA_FLOAT, s);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, masked, minus_inf, visible);
  return masked;
}

std::unique_ptr<AttentionPlan> build_forward(cudnnHandle_t handle, cudnnDataType_t io, const TensorSpec& q,
                                             const TensorSpec& k, const TensorSpec& v, const TensorSpec& o,
                                             bool causal, double keep) {
  const bool dropout = keep < 1;
  const int64_t b = q.dims[0], h = q.dims[1], L = q.dims[2], S = k.dims[2];
  GraphBuilder g(handle);
  auto tq = g.tensor(kQ, io, q, false), tkt = g.tensor(kKt, io, transposed(k), false),
       tv = g.tensor(kV, io, v, false), to = g.tensor(kO, io, o, false);
  auto stats = g.tensor(kStats, CUDNN_DATA_FLOAT, dense(b, h, L, 1), false);
  auto scale = g.scalar(kScale);
  std::vector<int64_t> scalars{kScale};
  const TensorSpec s = dense(b, h, L, S), row = dense(b, h, L, 1);
  cudnnBackendDescriptor_t x = scores(g, tq, tkt, s, causal, scale, scalars);
  // softmax, keeping its logsumexp
  auto max = g.on_chip(CUDNN_DATA_FLOAT, row), shifted = g.on_chip(CUDNN_DATA_FLOAT, s),
       e = g.on_chip(CUDNN_DATA_FLOAT, s), sum = g.on_chip(CUDNN_DATA_FLOAT, row),
       log_sum = g.on_chip(CUDNN_DATA_FLOAT, row);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, x, max);
  g.pointwise(CUDNN_POINTWISE_SUB, x, shifted, max);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, e);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, max, stats, log_sum);
  // The probabilities go to the second product in the inputs' type.
  auto p = g.on_chip(dropout ? CUDNN_DATA_FLOAT : io, s);
  g.pointwise(CUDNN_POINTWISE_DIV, e, p, sum);
  if (dropout) {
    const TensorSpec one{{1, 1, 1, 1}, {1, 1, 1, 1}};
    auto seed = g.tensor(kSeed, CUDNN_DATA_INT64, one, false), offset = g.tensor(kOffset, CUDNN_DATA_INT64, one, false);
    auto mask = g.on_chip(CUDNN_DATA_FLOAT, s), kept = g.on_chip(CUDNN_DATA_FLOAT, s), dropped = g.on_chip(io, s);
    g.bernoulli(keep, seed, offset, mask);
    g.pointwise(CUDNN_POINTWISE_MUL, p, kept, mask);
    auto drop_scale = g.scalar(kDropScale);
    g.pointwise(CUDNN_POINTWISE_MUL, kept, dropped, drop_scale);
    p = dropped;
    scalars.push_back(kDropScale);
  }
  g.matmul(p, tv, to);
  return g.finish(scalars);
}

std::unique_ptr<AttentionPlan> build_backward(cudnnHandle_t handle, cudnnDataType_t io, const TensorSpec& q,
                                              const TensorSpec& k, const TensorSpec& v, const TensorSpec& o,
                                              const TensorSpec& dout, const TensorSpec& dq, const TensorSpec& dk,
                                              const TensorSpec& dv, bool causal, double keep) {
  const bool dropout = keep < 1;
  const int64_t b = q.dims[0], h = q.dims[1], L = q.dims[2], S = k.dims[2], E = q.dims[3];
  GraphBuilder g(handle);
  auto tq = g.tensor(kQ, io, q, false), tkt = g.tensor(kKt, io, transposed(k), false),
       tvt = g.tensor(kVt, io, transposed(v), false), to = g.tensor(kO, io, o, false),
       tdo = g.tensor(kGradOut, io, dout, false), tdq = g.tensor(kGradQ, io, dq, false),
       tdk = g.tensor(kGradK, io, dk, false), tdv = g.tensor(kGradV, io, dv, false);
  const TensorSpec s = dense(b, h, L, S), row = dense(b, h, L, 1);
  auto stats = g.tensor(kStats, CUDNN_DATA_FLOAT, row, false);
  auto softmax_sum = g.tensor(kSoftmaxSum, CUDNN_DATA_FLOAT, row, false);
  auto dq_accum = g.tensor(kGradQAccum, CUDNN_DATA_FLOAT, dense(b, h, L, E), false);
  auto scale = g.scalar(kScale), keep_prob = g.scalar(kKeepProb);
  std::vector<int64_t> scalars{kScale, kKeepProb};
  cudnnBackendDescriptor_t drop_scale = nullptr, mask = nullptr;
  if (dropout) {
    const TensorSpec one{{1, 1, 1, 1}, {1, 1, 1, 1}};
    auto seed = g.tensor(kSeed, CUDNN_DATA_INT64, one, false), offset = g.tensor(kOffset, CUDNN_DATA_INT64, one, false);
    mask = g.on_chip(CUDNN_DATA_FLOAT, s);
    g.bernoulli(keep, seed, offset, mask);
    drop_scale = g.scalar(kDropScale);
    scalars.push_back(kDropScale);
  }
  // D = rowsum(dO * O) * keep, kept in memory for the passes that read it
  auto do_o = g.on_chip(CUDNN_DATA_FLOAT, TensorSpec{{b, h, L, E}, {h * L * E, L * E, h * E, 1}});
  auto do_o_sum = g.on_chip(CUDNN_DATA_FLOAT, row);
  g.pointwise(CUDNN_POINTWISE_MUL, tdo, do_o, to);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, do_o_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, do_o_sum, softmax_sum, keep_prob);
  // E = exp(S - stats), the probabilities before dropout
  cudnnBackendDescriptor_t x = scores(g, tq, tkt, s, causal, scale, scalars, stats);
  auto e = g.on_chip(CUDNN_DATA_FLOAT, s);
  g.pointwise(CUDNN_POINTWISE_EXP, x, e);
  cudnnBackendDescriptor_t p = e;
  if (dropout) {
    auto kept = g.on_chip(CUDNN_DATA_FLOAT, s), scaled = g.on_chip(CUDNN_DATA_FLOAT, s);
    g.pointwise(CUDNN_POINTWISE_MUL, e, kept, mask);
    g.pointwise(CUDNN_POINTWISE_MUL, kept, scaled, drop_scale);
    p = scaled;
  }
  // dV = P^T dO
  auto pt = g.on_chip(io, TensorSpec{{b, h, S, L}, {h * L * S, L * S, 1, S}});
  g.reshape(p, pt);
  g.matmul(pt, tdo, tdv);
  // dS = (dO V^T * mask - D) * E / keep * scale
  auto dp = g.on_chip(CUDNN_DATA_FLOAT, s);
  g.matmul(tdo, tvt, dp);
  if (dropout) {
    auto masked = g.on_chip(CUDNN_DATA_FLOAT, s);
    g.pointwise(CUDNN_POINTWISE_MUL, dp, masked, mask);
    dp = masked;
  }
  auto centered = g.on_chip(CUDNN_DATA_FLOAT, s), ds = g.on_chip(CUDNN_DATA_FLOAT, s);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, centered, softmax_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, centered, ds, e);
  if (dropout) {
    auto scaled = g.on_chip(CUDNN_DATA_FLOAT, s);
    g.pointwise(CUDNN_POINTWISE_MUL, ds, scaled, drop_scale);
    ds = scaled;
  }
  auto ds_scaled = g.on_chip(CUDNN_DATA_FLOAT, s);
  g.pointwise(CUDNN_POINTWISE_MUL, ds, ds_scaled, scale);
  // dK = dS^T Q
  auto dst = g.on_chip(io, TensorSpec{{b, h, S, L}, {h * L * S, L * S, 1, S}});
  g.reshape(ds_scaled, dst);
  g.matmul(dst, tq, tdk);
  // dQ = dS K, accumulated in float32, then converted
  auto k_rows = g.on_chip(io, k);
  g.reshape(tkt, k_rows);
  g.matmul(ds_scaled, k_rows, dq_accum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, tdq);
  return g.finish(scalars);
}

// Whether cuDNN reads t where it lies: 3-D or 4-D, a unit last stride, rows on 16 bytes.
bool library_readable(const Tensor& t) {
  if ((t.dim() != 3 && t.dim() != 4) || t.stride(-1) != 1) return false;
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) % 8 != 0) return false;
  return true;
}

void append_layout(std::vector<int64_t>& layout, const TensorSpec& t) {
  layout.insert(layout.end(), t.dims.begin(), t.dims.end());
  layout.insert(layout.end(), t.strides.begin(), t.strides.end());
}

// The plan for `key`, built by `build` the first time; null (remembered) where cuDNN has none or
// refuses a part of the graph.
template <class Build>
const AttentionPlan* cached_plan(const Key& key, Build&& build) {
  static std::mutex mutex;
  static auto* plans = new std::map<Key, std::unique_ptr<AttentionPlan>>();
  std::lock_guard lock(mutex);
  auto it = plans->find(key);
  if (it == plans->end()) {
    std::unique_ptr<AttentionPlan> plan;
    try {
      plan = build();
    } catch (const Error&) {
      plan = nullptr;  // a descriptor cuDNN would not finalize: this cuDNN has no such graph
    }
    it = plans->emplace(key, std::move(plan)).first;
  }
  return it->second.get();
}

// cuDNN 9.6 and later zero the float32 dQ accumulator themselves; earlier ones need the caller to.
bool library_version_ok() { return cudnnGetVersion() >= 90600; }

// What one call binds to a plan's graph, by id: device pointers, and floats passed by value.
struct Bindings {
  std::vector<int64_t> ids;
  std::vector<void*> pointers;
  std::vector<std::pair<int64_t, float>> scalars;

  // The dropout's (seed, offset) pair on the device (write_philox_seed_offset's [2, 2]) and scale.
  void dropout(const Tensor& seed_offset, double dropout_p) {
    ids.push_back(kSeed), ids.push_back(kOffset);
    pointers.push_back(seed_offset.raw_data());
    pointers.push_back(static_cast<int64_t*>(seed_offset.raw_data()) + 2);
    scalars.emplace_back(kDropScale, static_cast<float>(1.0 / (1.0 - dropout_p)));
  }
  // Runs the plan on them, with a workspace from the stream's pool.
  void run(const AttentionPlan& plan, cudnnHandle_t handle, Device device) const {
    Tensor workspace = Tensor::empty({static_cast<int64_t>(std::max<size_t>(plan.workspace(), 1))}, kUInt8, device);
    plan.run(handle, ids, pointers, scalars, workspace.raw_data());
  }
};

}  // namespace

}  // namespace cudnn

bool CudaKernels::library_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v,
                                             double dropout_p) const {
  const AttentionBackend backend = attention_backend();
  if (backend == AttentionBackend::Minidl || !cudnn::library_version_ok()) return false;
  if ((q.dtype() != kBFloat16 && q.dtype() != kFloat16) || q.numel() == 0 || k.numel() == 0) return false;
  if (dropout_p > 0 && is_deterministic()) return false;  // cuDNN's dQ sums with atomics
  if (dropout_p >= 1) return false;  // every weight dropped: minidl's kernels write the zeros
  const int64_t E = q.size(-1);
  if (v.size(-1) != E || (E != 64 && E != 128)) return false;
  if (!cuda::hopper_or_later(device_)) return false;  // the engines are Hopper's and later
  return cudnn::library_readable(q) && cudnn::library_readable(k) && cudnn::library_readable(v);
}

bool CudaKernels::library_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                            bool causal, double dropout_p, Tensor& out, Tensor& logsumexp,
                                            Tensor& rng_state, Tensor& seed_offset) {
  if (!library_attention_supports(q, k, v, dropout_p) || !cudnn::library_readable(out)) return false;
  const bool dropout = dropout_p > 0;
  const cudnn::TensorSpec tq = cudnn::spec_of(q), tk = cudnn::spec_of(k), tv = cudnn::spec_of(v),
                          to = cudnn::spec_of(out);
  cudnn::Key key{static_cast<int>(q.dtype()), device_, causal, false, 1.0 - dropout_p, {}};
  for (const auto* t : {&tq, &tk, &tv, &to}) cudnn::append_layout(key.layout, *t);
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn::cudnn_handle(device_);
  const cudnn::AttentionPlan* plan = cudnn::cached_plan(key, [&] {
    return cudnn::build_forward(handle, cudnn::cudnn_type(q.dtype()), tq, tk, tv, to, causal, 1.0 - dropout_p);
  });
  if (!plan) return false;
  cudnn::Bindings bind{{cudnn::kQ, cudnn::kKt, cudnn::kV, cudnn::kO, cudnn::kStats},
                       {q.raw_data(), k.raw_data(), v.raw_data(), out.raw_data(), logsumexp.raw_data()},
                       {{cudnn::kScale, static_cast<float>(scale)},
                        {cudnn::kMinusInf, -std::numeric_limits<float>::infinity()}}};
  if (dropout) {
    const int64_t matrices = q.numel() / (q.size(-2) * q.size(-1));
    const PhiloxDraw draw =
        default_generator().philox_draw(cuda::attention_dropout_draws(matrices, q.size(-2), k.size(-2)));
    int64_t* state = static_cast<int64_t*>(rng_state.raw_data());
    state[0] = static_cast<int64_t>(draw.seed);
    state[1] = static_cast<int64_t>(draw.offset);
    state[2] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(draw.device_state));
    seed_offset = Tensor::empty({2, 2}, kInt64, q.device());
    cuda::write_philox_seed_offset(rng_state, seed_offset, stream_);
    bind.dropout(seed_offset, dropout_p);
  }
  bind.run(*plan, handle, q.device());
  return true;
}

void CudaKernels::library_attention_backward(const Tensor& grad_out_in, const Tensor& q, const Tensor& k,
                                             const Tensor& v, const Tensor& out, const Tensor& logsumexp,
                                             const Tensor& seed_offset, double scale, bool causal, double dropout_p,
                                             Tensor& grad_q, Tensor& grad_k, Tensor& grad_v) {
  const bool dropout = dropout_p > 0;
  const Tensor grad_out = cudnn::library_readable(grad_out_in) ? grad_out_in : grad_out_in.contiguous();
  MINIDL_CHECK(cudnn::library_readable(grad_q) && cudnn::library_readable(grad_k) && cudnn::library_readable(grad_v),
               "library_attention_backward: expected gradients with 16-byte rows and a unit last stride");
  const cudnn::TensorSpec tq = cudnn::spec_of(q), tk = cudnn::spec_of(k), tv = cudnn::spec_of(v),
                          to = cudnn::spec_of(out), tdo = cudnn::spec_of(grad_out), tdq = cudnn::spec_of(grad_q),
                          tdk = cudnn::spec_of(grad_k), tdv = cudnn::spec_of(grad_v);
  cudnn::Key key{static_cast<int>(q.dtype()), device_, causal, true, 1.0 - dropout_p, {}};
  for (const auto* t : {&tq, &tk, &tv, &to, &tdo, &tdq, &tdk, &tdv}) cudnn::append_layout(key.layout, *t);
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn::cudnn_handle(device_);
  const cudnn::AttentionPlan* plan = cudnn::cached_plan(key, [&] {
    return cudnn::build_backward(handle, cudnn::cudnn_type(q.dtype()), tq, tk, tv, to, tdo, tdq, tdk, tdv, causal,
                                 1.0 - dropout_p);
  });
  MINIDL_CHECK(plan, "scaled_dot_product_attention: cuDNN ran the forward but has no engine for its backward (",
               q.dtype(), ", q ", q.shape(), ", causal ", causal, ", dropout ", dropout_p,
               "); set_attention_backend(AttentionBackend::Minidl) runs minidl's kernels for both");
  const int64_t b = tq.dims[0], h = tq.dims[1], L = tq.dims[2], E = tq.dims[3];
  Tensor softmax_sum = Tensor::empty({b * h * L}, kFloat32, q.device());
  Tensor dq_accum = Tensor::empty({b * h * L * E}, kFloat32, q.device());
  cudnn::Bindings bind{{cudnn::kQ, cudnn::kKt, cudnn::kVt, cudnn::kO, cudnn::kGradOut, cudnn::kStats, cudnn::kGradQ,
                        cudnn::kGradK, cudnn::kGradV, cudnn::kSoftmaxSum, cudnn::kGradQAccum},
                       {q.raw_data(), k.raw_data(), v.raw_data(), out.raw_data(), grad_out.raw_data(),
                        logsumexp.raw_data(), grad_q.raw_data(), grad_k.raw_data(), grad_v.raw_data(),
                        softmax_sum.raw_data(), dq_accum.raw_data()},
                       {{cudnn::kScale, static_cast<float>(scale)},
                        {cudnn::kMinusInf, -std::numeric_limits<float>::infinity()},
                        {cudnn::kKeepProb, static_cast<float>(1.0 - dropout_p)}}};
  if (dropout) {
    MINIDL_CHECK(seed_offset.defined() && seed_offset.dtype() == kInt64 && seed_offset.numel() == 4 &&
                     seed_offset.device() == q.device(),
                 "library_attention_backward: expected the forward's seed_offset, an int64 [2, 2] tensor on ",
                 q.device());
    bind.dropout(seed_offset, dropout_p);
  }
  bind.run(*plan, handle, q.device());
}

}  // namespace minidl
