// The one autocast table. The rows follow PyTorch's lists in aten/src/ATen/autocast_mode.cpp:
// CUDA runs softmax, log_softmax, the norms, sums and exp/log in float32, the CPU runs them in the
// input dtype; both run the losses in float32. Two choices differ from PyTorch, and say why:
//   einsum on the CPU: lower precision (PyTorch's CPU einsum decomposes into bmm, which is).
//   batch_norm: float32 on both (as PyTorch's MPS list), since minidl's norm kernels take one dtype
//   for the input and the parameters, where cuDNN takes a 16-bit input with float32 parameters.
#include "ops/autocast_policy.h"

#include "core/autograd.h"
#include "core/error.h"
#include "core/type_promotion.h"
#include "ops/copy.h"

namespace minidl::autocast {

namespace {

constexpr Policy LP = Policy::LowerPrecision, F32 = Policy::Float32, PRO = Policy::Promote, NONE = Policy::None,
                 BAN = Policy::Banned;

const std::vector<PolicyRow> kTable = {
    //  op                                 name                                cuda  cpu
    {Op::matmul, "matmul", LP, LP},
    {Op::mm, "mm", LP, LP},
    {Op::bmm, "bmm", LP, LP},
    {Op::mv, "mv", LP, NONE},
    {Op::dot, "dot", PRO, NONE},
    {Op::addmm, "addmm", LP, LP},
    {Op::baddbmm, "baddbmm", LP, LP},
    {Op::addbmm, "addbmm", LP, LP},
    {Op::addmv, "addmv", LP, NONE},
    {Op::addr, "addr", LP, NONE},
    {Op::linear, "linear", LP, LP},
    {Op::linear_relu, "linear_relu", LP, LP},
    {Op::linear_relu_linear, "linear_relu_linear", LP, LP},
    {Op::linear_gelu_linear, "linear_gelu_linear", LP, LP},
    {Op::conv1d, "conv1d", LP, LP},
    {Op::conv2d, "conv2d", LP, LP},
    {Op::conv2d_relu, "conv2d_relu", LP, LP},
    {Op::conv2d_relu_max_pool2d, "conv2d_relu_max_pool2d", LP, LP},
    {Op::conv_transpose2d, "conv_transpose2d", LP, LP},
    {Op::einsum, "einsum", LP, LP},
    {Op::scaled_dot_product_attention, "scaled_dot_product_attention", LP, LP},
    {Op::softmax, "softmax", F32, NONE},
    {Op::log_softmax, "log_softmax", F32, NONE},
    {Op::layer_norm, "layer_norm", F32, NONE},
    {Op::rms_norm, "rms_norm", F32, NONE},
    {Op::group_norm, "group_norm", F32, NONE},
    {Op::batch_norm, "batch_norm", F32, F32},
    {Op::exp, "exp", F32, NONE},
    {Op::log, "log", F32, NONE},
    {Op::pow, "pow", F32, NONE},
    {Op::sum, "sum", F32, NONE},
    {Op::prod, "prod", F32, F32},
    {Op::logsumexp, "logsumexp", F32, NONE},
    {Op::norm, "norm", F32, NONE},
    {Op::addcmul, "addcmul", PRO, NONE},
    {Op::addcdiv, "addcdiv", PRO, NONE},
    {Op::cross_entropy, "cross_entropy", F32, F32},
    {Op::nll_loss, "nll_loss", F32, F32},
    {Op::mse_loss, "mse_loss", F32, F32},
    {Op::l1_loss, "l1_loss", F32, F32},
    {Op::smooth_l1_loss, "smooth_l1_loss", F32, F32},
    {Op::huber_loss, "huber_loss", F32, F32},
    {Op::kl_div, "kl_div", F32, F32},
    {Op::binary_cross_entropy, "binary_cross_entropy", BAN, F32},
    {Op::binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits", F32, F32},
    {Op::margin_ranking_loss, "margin_ranking_loss", F32, F32},
    {Op::hinge_embedding_loss, "hinge_embedding_loss", F32, F32},
    {Op::soft_margin_loss, "soft_margin_loss", F32, F32},
    {Op::cosine_embedding_loss, "cosine_embedding_loss", F32, F32},
    {Op::triplet_margin_loss, "triplet_margin_loss", F32, F32},
    {Op::multi_margin_loss, "multi_margin_loss", F32, F32},
    {Op::multilabel_margin_loss, "multilabel_margin_loss", F32, F32},
    {Op::poisson_nll_loss, "poisson_nll_loss", F32, F32},
    {Op::cdist, "cdist", F32, F32},
};

thread_local Dispatch last;

}  // namespace

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::None: return "none";
    case Policy::LowerPrecision: return "lower_precision";
    case Policy::Float32: return "float32";
    case Policy::Promote: return "promote";
    case Policy::Banned: return "banned";
  }
  return "?";
}

const std::vector<PolicyRow>& policy_table() {
  static_assert(static_cast<size_t>(Op::count_) > 0);
  MINIDL_CHECK(kTable.size() == static_cast<size_t>(Op::count_), "autocast policy table: ", kTable.size(),
               " rows for ", static_cast<size_t>(Op::count_), " ops");
  return kTable;
}

Policy policy(Op op, DeviceType type) {
  const PolicyRow& row = kTable.at(static_cast<size_t>(op));
  return type == DeviceType::CUDA ? row.cuda : row.cpu;
}

Tensor cast_input(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  // PyTorch caches the lower-precision casts of float32 leaf weights that require grad, so that a
  // weight used by several ops (or time steps) is cast once per region. Only with grad mode on: a
  // cast made under no_grad records no backward and must not serve a later differentiable use.
  const bool cacheable = is_cache_enabled() && x.dtype() == kFloat32 && is_reduced_floating(dtype) && x.is_leaf() &&
                         x.requires_grad() && grad_mode_enabled();
  if (cacheable) {
    if (Tensor hit = cached_cast(x, dtype); hit.defined()) return hit;
  }
  Tensor cast = to(x, x.device(), dtype);
  if (cacheable) store_cached_cast(x, dtype, cast);
  return cast;
}

namespace detail {

bool eligible(const Tensor& t, DeviceType device) {
  return t.defined() && t.device().type() == device && is_floating(t.dtype()) && t.dtype() != kFloat64;
}

Target plan(Op op, const std::vector<const Tensor*>& tensors) {
  Target target;
  target.op = op;
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors)
    if (t->defined()) {
      first = t;
      break;
    }
  if (!first) return target;
  target.device = first->device().type();
  if (!is_enabled(target.device)) return target;
  target.policy = policy(op, target.device);
  const char* name = kTable.at(static_cast<size_t>(op)).name;
  switch (target.policy) {
    case Policy::None: return target;
    case Policy::Banned:
      MINIDL_FAIL(name, " is unsafe to autocast on ", target.device == DeviceType::CUDA ? "CUDA" : "the CPU",
                  ": its inputs may be float16, which cannot hold the probabilities it needs. Use ", name,
                  "_with_logits (safe under autocast), or run it outside the AutocastGuard on float32 inputs");
    case Policy::LowerPrecision: target.dtype = dtype(target.device); break;
    case Policy::Float32: target.dtype = kFloat32; break;
    case Policy::Promote:
      target.dtype = dtype(target.device);
      for (const Tensor* t : tensors)
        if (eligible(*t, target.device)) target.dtype = promote_types(target.dtype, t->dtype());
      break;
  }
  target.cast = true;
  return target;
}

}  // namespace detail

void note_dispatch(const Target& target) {
  last.op = kTable.at(static_cast<size_t>(target.op)).name;
  last.dtype = target.dtype;
  ++last.count;
}

const Dispatch& last_dispatch() { return last; }

}  // namespace minidl::autocast
