#pragma once
// The autocast policy: which op runs in which dtype under AutocastGuard (core/autocast.h), in one
// table (ops/autocast_policy.cpp), following PyTorch's lists (aten/src/ATen/autocast_mode.cpp):
//   lower precision: matmul, linear, convolutions and their fused epilogues run in the autocast
//                    dtype (bfloat16 or float16; the GEMMs accumulate in float32);
//   float32:         softmax, log_softmax, the losses, the norms, sums, exp, log, pow run in float32;
//   promote:         every floating input is cast to the widest of them.
// Only floating tensors on the autocast device are cast; integers, bools and float64 never are.
// An op opts in with one line at its top, MINIDL_AUTOCAST(op, fn, args...), which casts its inputs
// and calls it again with autocast excluded, so the ops it is built from run in the dtypes given.
#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/tensor.h"

namespace minidl::autocast {

enum class Policy : uint8_t {
  None,            // run in the input dtypes (the ops it calls may still autocast)
  LowerPrecision,  // cast to the autocast dtype
  Float32,         // cast to float32
  Promote,         // cast to the widest floating input dtype
  Banned,          // an error under autocast (PyTorch's binary_cross_entropy on CUDA)
};
const char* policy_name(Policy policy);

/// The ops that consult the table (one per op family, not per overload).
enum class Op : uint8_t {
  matmul, mm, bmm, mv, dot, addmm, baddbmm, addbmm, addmv, addr, linear, linear_relu, linear_relu_linear, linear_gelu_linear, conv1d, conv2d, conv2d_relu,
  conv2d_relu_max_pool2d, conv_transpose2d, einsum, scaled_dot_product_attention,
  softmax, log_softmax, layer_norm, rms_norm, group_norm, batch_norm, exp, log, pow, sum, prod,
  logsumexp, norm, addcmul, addcdiv,
  cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss, kl_div,
  binary_cross_entropy, binary_cross_entropy_with_logits, margin_ranking_loss, hinge_embedding_loss,
  soft_margin_loss, cosine_embedding_loss, triplet_margin_loss, multi_margin_loss, multilabel_margin_loss,
  poisson_nll_loss, cdist,
  count_
};

/// One row of the table: the op and its policy on each device type.
struct PolicyRow {
  Op op;
  const char* name;
  Policy cuda, cpu;
};
/// The whole table, one row per Op, in Op order.   `for (auto& row : autocast::policy_table()) ...`
const std::vector<PolicyRow>& policy_table();
/// `op`'s policy on `type`.   `autocast::policy(Op::softmax, kCUDA) == Policy::Float32`
Policy policy(Op op, DeviceType type);

/// What one autocast dispatch does: whether it casts, and to which dtype on which device type.
struct Target {
  bool cast = false;
  Op op;
  DeviceType device;
  DType dtype;
  Policy policy;
};

/// `x` in `dtype` through a differentiable cast; a leaf weight's cast is cached in the region.
Tensor cast_input(const Tensor& x, DType dtype);

namespace detail {
inline void collect(std::vector<const Tensor*>& out, const Tensor& t) { out.push_back(&t); }
inline void collect(std::vector<const Tensor*>& out, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) out.push_back(&t);
}
template <class T>
void collect(std::vector<const Tensor*>&, const T&) {}

bool eligible(const Tensor& t, DeviceType device);
inline Tensor convert(const Target& target, const Tensor& t) {
  return eligible(t, target.device) ? cast_input(t, target.dtype) : t;
}
inline std::vector<Tensor> convert(const Target& target, const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(convert(target, t));
  return out;
}
template <class T>
const T& convert(const Target&, const T& value) {
  return value;
}
Target plan(Op op, const std::vector<const Tensor*>& tensors);
}  // namespace detail

/// Records a dispatch for last_dispatch(): `call` does it, and so does an op that carries out its
/// target itself (cross_entropy, whose kernel widens 16-bit logits in place of the cast).
void note_dispatch(const Target& target);

/// Decides what `op` does with these arguments (only tensors and tensor lists count).
template <class... Args>
Target plan(Op op, const Args&... args) {
  std::vector<const Tensor*> tensors;
  (detail::collect(tensors, args), ...);
  return detail::plan(op, tensors);
}

/// Runs fn on the arguments cast as `target` says, with autocast excluded meanwhile.
template <class Fn, class... Args>
auto call(const Target& target, Fn&& fn, const Args&... args) {
  note_dispatch(target);
  auto converted = std::make_tuple(detail::convert(target, args)...);
  ExcludeGuard exclude;
  return std::apply(fn, converted);
}

/// The last op this thread dispatched through autocast, and the dtype it cast to (for tests: which
/// dtype the op saw).
struct Dispatch {
  std::string op;
  DType dtype = kFloat32;
  int count = 0;  // dispatches since the thread started
};
const Dispatch& last_dispatch();

}  // namespace minidl::autocast

/// The autocast hook at the top of an op: under autocast, casts the inputs as the table says and
/// calls FN again on them (autocast excluded), returning its result.
///   Tensor matmul(const Tensor& a, const Tensor& b) { MINIDL_AUTOCAST(matmul, matmul, a, b); ... }
#define MINIDL_AUTOCAST(OP, FN, ...) MINIDL_AUTOCAST_THROUGH(::minidl::autocast::call, OP, FN, __VA_ARGS__)

/// The hook's body: CALL (autocast::call, or ops/autocast_masters.h's call_with_masters) converts
/// the arguments for the target and calls FN on them.
#define MINIDL_AUTOCAST_THROUGH(CALL, OP, FN, ...)                                                      \
  if (::minidl::autocast::is_active()) {                                                                \
    const ::minidl::autocast::Target autocast_target_ =                                                \
        ::minidl::autocast::plan(::minidl::autocast::Op::OP, __VA_ARGS__);                              \
    if (autocast_target_.cast)                                                                          \
      return CALL(autocast_target_, [&](const auto&... autocast_args_) { return FN(autocast_args_...); }, \
                  __VA_ARGS__);                                                                         \
  }
