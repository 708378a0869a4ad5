// Margin and embedding losses. Shapes:
//   margin_ranking_loss:  input1, input2, target of one number of dims, broadcast together
//   hinge_embedding_loss, soft_margin_loss: input, target broadcast to it
//   cosine_embedding_loss: input1, input2 [N, D] with target [N] -> [N]; or [D] with a 0-d target -> 0-d
//   triplet_margin_loss: anchor, positive, negative of one number of dims, [N, D] -> [N] (or [D] -> 0-d)
//   multilabel_soft_margin_loss: input, target [N, C] (or [C]), weight broadcast to them -> [N]
//   multi_margin_loss: input [N, C] (or [C]), int64 target [N] (0-d or [1]), weight [C] -> [N]
//   multilabel_margin_loss: input, int64 target [N, C] (or [C]) -> [N] (0-d)
// Each is written as PyTorch's own definition (aten/src/ATen/native/Loss.cpp, LossMultiMargin.cpp,
// LossMultiLabelMargin.cpp, torch/nn/functional.py) out of recorded ops: their backwards give the
// gradients, on any device. The class-indexed losses pick x[y] with a comparison against arange and
// a masked sum, not gather, so their only host read is the one range check of the target.
#include "ops/loss_margin.h"

#include "ops/arithmetic.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/distance.h"
#include "ops/elementwise.h"
#include "ops/logical.h"
#include "ops/loss_reduce.h"
#include "ops/math.h"
#include "ops/scan.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace {

using detail::check_floating_inputs;
using detail::reduce_loss;

void check_target_broadcasts(const char* op, const Tensor& input, const Tensor& target) {
  MINIDL_CHECK(broadcasts_to(target.shape(), input.shape()), op, ": expected a target that broadcasts to the input's shape ",
               input.shape(), ", got target of shape ", target.shape());
}

// The target's smallest and largest values, read on the host (a device sync on CUDA) to check them.
void check_class_range(const char* op, const Tensor& target, int64_t low, int64_t classes) {
  if (target.numel() == 0) return;
  Tensor bounds = stack({amin(target), amax(target)}).to(Device::cpu());
  const std::vector<int64_t> b = bounds.to_vector<int64_t>();
  MINIDL_CHECK(b[0] >= low && b[1] < classes, op, ": expected target values in [", low, ", ", classes, ") for ",
               classes, " classes, got ", (b[0] < low ? b[0] : b[1]));
}

}  // namespace

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                           Reduction reduction) {
  MINIDL_AUTOCAST(margin_ranking_loss, margin_ranking_loss, input1, input2, target, margin, reduction);
  const char* op = "margin_ranking_loss";
  check_floating_inputs(op, {{"input1", input1}, {"input2", input2}, {"target", target}});
  MINIDL_CHECK(input1.dim() == input2.dim() && input2.dim() == target.dim(), op,
               ": expected input1, input2 and target of one number of dims, got shapes ", input1.shape(), ", ",
               input2.shape(), " and ", target.shape());
  broadcast_shapes(broadcast_shapes(input1.shape(), input2.shape(), op), target.shape(), op);
  return reduce_loss(op, clamp(neg(target) * sub(input1, input2) + margin, Scalar(0.0)), reduction);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin, Reduction reduction) {
  MINIDL_AUTOCAST(hinge_embedding_loss, hinge_embedding_loss, input, target, margin, reduction);
  const char* op = "hinge_embedding_loss";
  check_floating_inputs(op, {{"input", input}, {"target", target}});
  check_target_broadcasts(op, input, target);
  // As PyTorch: a target of neither 1 nor -1 takes both terms.
  Tensor margin_term = where(ne(target, Scalar(1.0)), clamp(margin - input, Scalar(0.0)), Scalar(0.0));
  Tensor self_term = where(ne(target, Scalar(-1.0)), input, Scalar(0.0));
  return reduce_loss(op, add(margin_term, self_term), reduction);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  MINIDL_AUTOCAST(soft_margin_loss, soft_margin_loss, input, target, reduction);
  const char* op = "soft_margin_loss";
  check_floating_inputs(op, {{"input", input}, {"target", target}});
  check_target_broadcasts(op, input, target);
  // log(1 + exp(-z)) = -log_sigmoid(z): the same values as PyTorch's log1p(exp(-z)), without its
  // overflow to infinity for a large -z.
  return reduce_loss(op, neg(log_sigmoid(mul(target, input))), reduction);
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                             Reduction reduction) {
  MINIDL_AUTOCAST(cosine_embedding_loss, cosine_embedding_loss, input1, input2, target, margin, reduction);
  const char* op = "cosine_embedding_loss";
  check_floating_inputs(op, {{"input1", input1}, {"input2", input2}});
  MINIDL_CHECK(target.defined(), op, ": target is undefined");
  check_same_device(op, {input1, target});
  const int64_t dim = target.dim();
  MINIDL_CHECK(dim <= 1, op, ": expected a 0-d or 1-D target (multi-target is not supported), got target of shape ",
               target.shape());
  MINIDL_CHECK(input1.dim() == dim + 1 && input2.dim() == dim + 1, op, ": a ", dim, "-D target expects ", dim + 1,
               "-D inputs ([N, D] with [N], or [D] with 0-d), got input1 of shape ", input1.shape(), ", input2 of shape ",
               input2.shape(), " and target of shape ", target.shape());
  const Shape both = broadcast_shapes(input1.shape(), input2.shape(), op);
  MINIDL_CHECK(dim == 0 || target.size(0) == both[0] || target.size(0) == 1 || both[0] == 1, op,
               ": expected a target of shape [", both[0], "] for inputs of shapes ", input1.shape(), " and ",
               input2.shape(), ", got target of shape ", target.shape());
  // PyTorch's form: 1e-12 added to each squared magnitude, not cosine_similarity's eps on the norms.
  const double kEps = 1e-12;
  Tensor prod_sum = sum(mul(input1, input2), {dim});
  Tensor mag1 = sum(mul(input1, input1), {dim}) + kEps;
  Tensor mag2 = sum(mul(input2, input2), {dim}) + kEps;
  Tensor cos = div(prod_sum, sqrt(mul(mag1, mag2)));
  Tensor pos = where(eq(target, Scalar(1.0)), 1.0 - cos, Scalar(0.0));
  Tensor negative = where(eq(target, Scalar(-1.0)), clamp(cos - margin, Scalar(0.0)), Scalar(0.0));
  return reduce_loss(op, add(pos, negative), reduction);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin,
                           double p, double eps, bool swap, Reduction reduction) {
  MINIDL_AUTOCAST(triplet_margin_loss, triplet_margin_loss, anchor, positive, negative, margin, p, eps, swap,
                  reduction);
  const char* op = "triplet_margin_loss";
  check_floating_inputs(op, {{"anchor", anchor}, {"positive", positive}, {"negative", negative}});
  MINIDL_CHECK(anchor.dim() == positive.dim() && positive.dim() == negative.dim(), op,
               ": expected anchor, positive and negative of one number of dims, got anchor ", anchor.dim(),
               "-D (shape ", anchor.shape(), "), positive ", positive.dim(), "-D (shape ", positive.shape(),
               ") and negative ", negative.dim(), "-D (shape ", negative.shape(), ")");
  MINIDL_CHECK(anchor.dim() >= 1, op, ": expected inputs of at least 1 dim, got 0-d ones");
  MINIDL_CHECK(p > 0, op, ": expected a norm degree p > 0, got ", p);
  broadcast_shapes(broadcast_shapes(anchor.shape(), positive.shape(), op), negative.shape(), op);
  Tensor dist_pos = pairwise_distance(anchor, positive, p, eps);
  Tensor dist_neg = pairwise_distance(anchor, negative, p, eps);
  if (swap) dist_neg = minimum(dist_neg, pairwise_distance(positive, negative, p, eps));
  return reduce_loss(op, clamp(sub(dist_pos, dist_neg) + margin, Scalar(0.0)), reduction);
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   Reduction reduction) {
  const char* op = "multilabel_soft_margin_loss";
  check_floating_inputs(op, {{"input", input}, {"target", target}});
  MINIDL_CHECK(input.dim() >= 1, op, ": expected input [N, C] or [C], got a 0-d tensor");
  MINIDL_CHECK(input.shape() == target.shape(), op, ": expected a target of the input's shape ", input.shape(),
               ", got target of shape ", target.shape());
  Tensor loss = neg(add(mul(target, log_sigmoid(input)), mul(1.0 - target, log_sigmoid(neg(input)))));
  if (weight.defined()) {
    check_floating_inputs(op, {{"input", input}, {"weight", weight}});
    MINIDL_CHECK(broadcasts_to(weight.shape(), input.shape()), op, ": expected a weight that broadcasts to the input's shape ",
                 input.shape(), " (usually [", input.size(-1), "]), got weight of shape ", weight.shape());
    loss = mul(loss, weight);
  }
  return reduce_loss(op, mean(loss, {input.dim() - 1}), reduction);
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin, const Tensor& weight,
                         Reduction reduction) {
  MINIDL_AUTOCAST(multi_margin_loss, multi_margin_loss, input, target, p, margin, weight, reduction);
  const char* op = "multi_margin_loss";
  MINIDL_CHECK(p == 1 || p == 2, op, ": only p == 1 and p == 2 are supported, got p = ", p);
  check_floating_inputs(op, {{"input", input}});
  MINIDL_CHECK((input.dim() == 1 || input.dim() == 2) && input.size(-1) > 0, op,
               ": expected a non-empty input [N, C] or [C], got shape ", input.shape());
  MINIDL_CHECK(target.defined() && target.dtype() == kInt64, op, ": expected an int64 target of class indices, got ",
               target.defined() ? target.dtype() : kInt64, target.defined() ? "" : " (undefined)");
  check_same_device(op, {input, target});
  const int64_t n = input.dim() == 2 ? input.size(0) : 1, classes = input.size(-1);
  const bool target_ok = input.dim() == 2 ? target.dim() == 1 && target.numel() == n : target.dim() <= 1 && target.numel() == 1;
  MINIDL_CHECK(target_ok, op, ": expected a target of shape [", n, "]", input.dim() == 1 ? " (or 0-d)" : "",
               " for input of shape ", input.shape(), ", got target of shape ", target.shape());
  if (weight.defined()) {
    check_floating_inputs(op, {{"input", input}, {"weight", weight}});
    MINIDL_CHECK(weight.dim() <= 1 && weight.numel() == classes, op, ": expected a weight of shape [", classes,
                 "] for input of shape ", input.shape(), ", got weight of shape ", weight.shape());
  }
  check_class_range(op, target, 0, classes);
  Tensor x = reshape(input, {n, classes}), t = reshape(target, {n, 1});
  Tensor is_target = eq(t, reshape(arange(classes, kInt64, input.device()), {1, classes}));  // [N, C]
  Tensor x_target = sum(where(is_target, x, Scalar(0.0)), {1}, /*keepdim=*/true);        // [N, 1]
  Tensor z = clamp(margin - x_target + x, Scalar(0.0));
  if (p == 2) z = mul(z, z);
  if (weight.defined()) z = mul(z, sum(where(is_target, reshape(weight, {1, classes}), Scalar(0.0)), {1}, true));
  Tensor rows = div(sum(where(is_target, Scalar(0.0), z), {1}), Scalar(static_cast<double>(classes)));
  if (reduction == Reduction::None && target.dim() == 0) rows = reshape(rows, {});
  return reduce_loss(op, rows, reduction);
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  MINIDL_AUTOCAST(multilabel_margin_loss, multilabel_margin_loss, input, target, reduction);
  const char* op = "multilabel_margin_loss";
  check_floating_inputs(op, {{"input", input}});
  MINIDL_CHECK((input.dim() == 1 || input.dim() == 2) && input.size(-1) > 0, op,
               ": expected a non-empty input [N, C] or [C], got shape ", input.shape());
  MINIDL_CHECK(target.defined() && target.dtype() == kInt64, op, ": expected an int64 target of class indices, got ",
               target.defined() ? target.dtype() : kInt64, target.defined() ? "" : " (undefined)");
  check_same_device(op, {input, target});
  MINIDL_CHECK(target.shape() == input.shape(), op, ": expected a target of the input's shape ", input.shape(),
               ", got target of shape ", target.shape());
  const int64_t n = input.dim() == 2 ? input.size(0) : 1, classes = input.size(-1);
  check_class_range(op, target, -1, classes);
  Tensor x = reshape(input, {n, classes}), t = reshape(target, {n, classes});
  // A sample's targets are the entries before its first -1.
  Tensor listed = eq(cumsum(eq(t, Scalar(-1)), 1), Scalar(0));                                   // [N, J]
  Tensor match = eq(unsqueeze(t, 2), reshape(arange(classes, kInt64, input.device()), {1, 1, classes}));  // [N, J, I]
  match = logical_and(match, unsqueeze(listed, 2));
  Tensor is_target = any(match, 1);                                                             // [N, I]
  Tensor x_listed = sum(where(match, unsqueeze(x, 1), Scalar(0.0)), {2});                       // [N, J]: x[y_j]
  Tensor terms = clamp(1.0 - unsqueeze(x_listed, 2) + unsqueeze(x, 1), Scalar(0.0));             // [N, J, I]
  Tensor counted = logical_and(unsqueeze(listed, 2), unsqueeze(logical_not(is_target), 1));
  Tensor rows = div(sum(where(counted, terms, Scalar(0.0)), {1, 2}), Scalar(static_cast<double>(classes)));
  if (reduction == Reduction::None && input.dim() == 1) rows = reshape(rows, {});
  return reduce_loss(op, rows, reduction);
}

}  // namespace minidl
