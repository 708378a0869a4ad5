// Batch, layer and group normalization, each one forward kernel (statistics, then one elementwise
// pass) and one analytic backward kernel; RMS normalization, composed of elementwise ops and a mean
// (its gradient theirs).
//
// Shapes. Every op hands the kernels x viewed as [N, C, L]:
//   batch_norm  x [N, C, *]  -> [N, C, L = prod(*)]; statistics per channel over N and L:
//                               save_mean, save_invstd [C]; weight, bias, running stats [C].
//   group_norm  x [N, C, *]  -> [N, C, L]; statistics per (sample, group) over C/G channels and L:
//                               save_mean, save_invstd [N, G]; weight, bias [C].
//   layer_norm  x [*, S]     -> [M, K, 1] with one group (K = prod(S)): the group norm of K channels of
//                               one element each, so weight and bias (shape S) act per channel.
// xhat = (x - mean) * invstd, invstd = 1 / sqrt(var + eps) with the biased variance; out = xhat * w + b.
// Backward, with sums and means over the elements that share a statistic:
//   grad_b = sum g, grad_w = sum g * xhat (per channel, over N and L)
//   grad_x = invstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) where the statistics came from x,
//   grad_x = invstd * w * g where they were constants (batch norm in evaluation).
// The forward saves mean and invstd, so the backward recomputes neither.
#include "ops/normalization.h"

#include <limits>
#include <sstream>

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/kernels.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

// A detached contiguous handle to t (t itself when already contiguous): what the kernels read and
// the backward saves, never a node of the graph.
Tensor plain(const Tensor& t) {
  if (!t.defined()) return t;
  NoGradGuard no_grad;
  return t.detach().contiguous();
}

Tensor view3(const Tensor& t, int64_t n, int64_t c, int64_t l) {
  NoGradGuard no_grad;
  return view(t, {n, c, l});
}

const Tensor* or_null(const Tensor& t) { return t.defined() ? &t : nullptr; }

void check_x(const char* op, const Tensor& x) {
  MINIDL_CHECK(x.defined(), op, ": x is undefined");
  MINIDL_CHECK(is_floating(x.dtype()), op, ": expected a floating x, got ", x.dtype());
}

// weight, bias and running statistics: `expected` shape and x's dtype (or float32 for a 16-bit x: mixed
// precision keeps its parameters in float32, as PyTorch's norms allow); `why` says where the shape
// comes from.
void check_param(const char* op, const char* name, const Tensor& t, const Tensor& x, const Shape& expected,
                 const char* why) {
  if (!t.defined()) return;
  MINIDL_CHECK(t.shape() == expected, op, ": expected ", name, " of shape ", expected, " (", why, " of x of shape ",
               x.shape(), "), got shape ", t.shape());
  const bool mixed = is_reduced_floating(x.dtype()) && t.dtype() == kFloat32;
  MINIDL_CHECK(t.dtype() == x.dtype() || mixed, op, ": expected ", name, " of dtype ", x.dtype(),
               is_reduced_floating(x.dtype()) ? " (as x) or float32" : " (as x)", ", got ", t.dtype());
}

// The checks of a norm over the trailing dims normalized_shape (layer_norm, rms_norm); returns how
// many dims lead them.
int64_t leading_dims(const char* op, const Tensor& x, const Shape& normalized_shape) {
  check_x(op, x);
  MINIDL_CHECK(!normalized_shape.empty(), op, ": expected a normalized_shape of at least one dim, got []");
  const int64_t k = static_cast<int64_t>(normalized_shape.size()), lead = x.dim() - k;
  bool matches = lead >= 0;
  for (int64_t d = 0; matches && d < k; ++d) matches = x.size(lead + d) == normalized_shape[static_cast<size_t>(d)];
  if (!matches) {
    std::ostringstream tail;
    for (int64_t s : normalized_shape) tail << ", " << s;
    MINIDL_FAIL(op, ": given normalized_shape=", normalized_shape, ", expected x of shape [*", tail.str(),
                "], but got shape ", x.shape());
  }
  return lead;
}

int64_t trailing_numel(const Tensor& x, int64_t from) {
  int64_t n = 1;
  for (int64_t d = from; d < x.dim(); ++d) n *= x.size(d);
  return n;
}

// The dtype of the saved mean and invstd: float32 for a 16-bit x, so the backward normalizes with
// the statistics the forward used, not their 16-bit roundings.
DType stats_dtype(const Tensor& x) { return is_reduced_floating(x.dtype()) ? kFloat32 : x.dtype(); }

// Group norm of x viewed as [n, c, l] in `groups` groups; layer_norm and group_norm differ only in
// the view and in the shape of weight and bias (any shape of c elements).
Tensor grouped_norm(const char* op, const Tensor& x, int64_t n, int64_t c, int64_t l, int64_t groups,
                    const Tensor& weight, const Tensor& bias, double eps) {
  const Tensor x3 = view3(plain(x), n, c, l);
  const Tensor w = plain(weight), b = plain(bias);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean = Tensor::empty({n, groups}, stats_dtype(x), x.device());
  Tensor invstd = Tensor::empty({n, groups}, stats_dtype(x), x.device());
  // The parameters' gradients take the parameters' dtypes (float32 beside a 16-bit x).
  const DType w_dtype = weight.defined() ? weight.dtype() : x.dtype();
  const DType b_dtype = bias.defined() ? bias.dtype() : x.dtype();
  {
    Widened wide(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = wide.output(out), mean32 = wide.output(mean), invstd32 = wide.output(invstd);
    OptionalWide w32 = widen_input(wide, or_null(w)), b32 = widen_input(wide, or_null(b));
    wide.kernels().group_norm(wide.input(x3), groups, w32.get(), b32.get(), eps, out32, mean32, invstd32);
    wide.finish();
  }
  if (autograd::needs_recording({x, weight, bias})) {
    autograd::record(op, out, {x, weight, bias}, {x3, w},
                     [x3, w, mean, invstd, groups, w_dtype, b_dtype, x_shape = x.shape(),
                      w_shape = weight.defined() ? weight.shape() : Shape{c}](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       const Tensor g = view3(plain(grad), x3.size(0), x3.size(1), x3.size(2));
                       Tensor gx, gw, gb;
                       if (needs[0]) gx = Tensor::empty(x_shape, g.dtype(), g.device());
                       if (needs[1]) gw = Tensor::empty(w_shape, w_dtype, g.device());
                       if (needs[2]) gb = Tensor::empty(w_shape, b_dtype, g.device());
                       Widened wide(kernels_for(g.device()));
                       OptionalWide gx32 = widen_output(wide, needs[0] ? &gx : nullptr);
                       OptionalWide gw32 = widen_output(wide, needs[1] ? &gw : nullptr);
                       OptionalWide gb32 = widen_output(wide, needs[2] ? &gb : nullptr);
                       OptionalWide w32 = widen_input(wide, or_null(w));
                       wide.kernels().group_norm_backward(wide.input(g), wide.input(x3), groups, w32.get(),
                                                          wide.input(mean), wide.input(invstd), gx32.get(),
                                                          gw32.get(), gb32.get());
                       wide.finish();
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  // Only x and the affine parameters: the running statistics are updated in place, so never copied.
  if (autocast::is_active() && (!running_mean.defined() || running_mean.dtype() == kFloat32)) {
    const autocast::Target target = autocast::plan(autocast::Op::batch_norm, x, weight, bias);
    if (target.cast)
      return autocast::call(
          target,
          [&](const Tensor& xc, const Tensor& wc, const Tensor& bc) {
            return batch_norm(xc, running_mean, running_var, wc, bc, training, momentum, eps);
          },
          x, weight, bias);
  }
  check_x("batch_norm", x);
  MINIDL_CHECK(x.dim() >= 2, "batch_norm: expected x of shape [N, C, *] (at least 2-D), got shape ", x.shape(), " (",
               x.dim(), "-D)");
  const int64_t n = x.size(0), c = x.size(1), l = trailing_numel(x, 2);
  check_param("batch_norm", "weight", weight, x, {c}, "one per channel");
  check_param("batch_norm", "bias", bias, x, {c}, "one per channel");
  MINIDL_CHECK(running_mean.defined() == running_var.defined(),
               "batch_norm: expected both running_mean and running_var, or neither, got only ",
               running_mean.defined() ? "running_mean" : "running_var");
  MINIDL_CHECK(training || running_mean.defined(),
               "batch_norm: running_mean and running_var are needed in evaluation (training=false)");
  check_param("batch_norm", "running_mean", running_mean, x, {c}, "one per channel");
  check_param("batch_norm", "running_var", running_var, x, {c}, "one per channel");
  check_same_device("batch_norm", {x, running_mean, running_var, weight, bias});
  MINIDL_CHECK(!training || n * l > 1, "batch_norm: Expected more than 1 value per channel when training, got input size ",
               x.shape());

  const Tensor x3 = view3(plain(x), n, c, l);
  const Tensor w = plain(weight), b = plain(bias);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean = Tensor::empty({c}, stats_dtype(x), x.device());
  Tensor invstd = Tensor::empty({c}, stats_dtype(x), x.device());
  // The parameters' gradients take the parameters' dtypes (float32 beside a 16-bit x).
  const DType w_dtype = weight.defined() ? weight.dtype() : x.dtype();
  const DType b_dtype = bias.defined() ? bias.dtype() : x.dtype();
  // Handles that share the caller's storage: the kernel updates the running statistics in place.
  Tensor rm = running_mean, rv = running_var;
  {
    Widened wide(kernels_for(x.device()));  // 16-bit through float32 (ops/widen_16bit.h)
    Tensor out32 = wide.output(out), mean32 = wide.output(mean), invstd32 = wide.output(invstd);
    OptionalWide w32 = widen_input(wide, or_null(w)), b32 = widen_input(wide, or_null(b));
    OptionalWide rm32 = widen_output(wide, rm.defined() ? &rm : nullptr);
    OptionalWide rv32 = widen_output(wide, rv.defined() ? &rv : nullptr);
    wide.kernels().batch_norm(wide.input(x3), w32.get(), b32.get(), rm32.get(), rv32.get(), training, momentum, eps,
                              out32, mean32, invstd32);
    wide.finish();
  }
  if (training && rm.defined()) {  // written in place: counted as every in-place write is
    rm.bump_version();
    rv.bump_version();
  }
  if (autograd::needs_recording({x, weight, bias})) {
    autograd::record("batch_norm", out, {x, weight, bias}, {x3, w},
                     [x3, w, mean, invstd, training, w_dtype, b_dtype, x_shape = x.shape()](
                         const Tensor& grad, const std::vector<bool>& needs) {
                       const int64_t c = x3.size(1);
                       const Tensor g = view3(plain(grad), x3.size(0), c, x3.size(2));
                       Tensor gx, gw, gb;
                       if (needs[0]) gx = Tensor::empty(x_shape, g.dtype(), g.device());
                       if (needs[1]) gw = Tensor::empty({c}, w_dtype, g.device());
                       if (needs[2]) gb = Tensor::empty({c}, b_dtype, g.device());
                       Widened wide(kernels_for(g.device()));
                       OptionalWide gx32 = widen_output(wide, needs[0] ? &gx : nullptr);
                       OptionalWide gw32 = widen_output(wide, needs[1] ? &gw : nullptr);
                       OptionalWide gb32 = widen_output(wide, needs[2] ? &gb : nullptr);
                       OptionalWide w32 = widen_input(wide, or_null(w));
                       wide.kernels().batch_norm_backward(wide.input(g), wide.input(x3), w32.get(), wide.input(mean),
                                                          wide.input(invstd), training, gx32.get(), gw32.get(),
                                                          gb32.get());
                       wide.finish();
                       return std::vector<Tensor>{gx, gw, gb};
                     });
  }
  return out;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  MINIDL_AUTOCAST(layer_norm, layer_norm, x, normalized_shape, weight, bias, eps);
  const int64_t lead = leading_dims("layer_norm", x, normalized_shape);
  check_param("layer_norm", "weight", weight, x, normalized_shape, "normalized_shape, the trailing dims");
  check_param("layer_norm", "bias", bias, x, normalized_shape, "normalized_shape, the trailing dims");
  check_same_device("layer_norm", {x, weight, bias});
  int64_t rows = 1;
  for (int64_t d = 0; d < lead; ++d) rows *= x.size(d);
  return grouped_norm("layer_norm", x, rows, shape_numel(normalized_shape), 1, 1, weight, bias, eps);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  MINIDL_AUTOCAST(rms_norm, rms_norm, x, normalized_shape, weight, eps);
  const int64_t lead = leading_dims("rms_norm", x, normalized_shape);
  check_param("rms_norm", "weight", weight, x, normalized_shape, "normalized_shape, the trailing dims");
  check_same_device("rms_norm", {x, weight});
  // A 16-bit x is normalized in float32 and rounded once at the end, as PyTorch's composite does;
  // eps defaults to the machine epsilon of that computing dtype.
  const Tensor wide = is_reduced_floating(x.dtype()) ? x.to(kFloat32) : x;
  const double e = eps.value_or(wide.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                         : std::numeric_limits<float>::epsilon());
  std::vector<int64_t> dims;
  for (int64_t d = lead; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = mul(wide, rsqrt(add(mean(mul(wide, wide), dims, /*keepdim=*/true), e)));
  if (weight.defined()) y = mul(y, weight);
  return y.dtype() == x.dtype() ? y : y.to(x.dtype());
}

namespace {

// What a seam's kernel saved for its backward.
struct SeamSaved {
  Tensor sum, w, mean, invstd, mask;
  double keep;
  DType x_dtype, out_type;
};

// The gradients {x, residual, weight, bias} of a seam whose kernel ran, from those of {out, sum}.
std::vector<Tensor> seam_backward(const SeamSaved& saved, const std::vector<Tensor>& grads, bool need_x,
                                  bool need_residual, bool need_weight, bool need_bias) {
  const Tensor& s = saved.sum;
  const Tensor g_sum = plain(grads[1]);
  const bool norm_reached = grads[0].defined();
  if (!norm_reached && (!g_sum.defined() || !need_x))  // nothing reaches x through the mask
    return {Tensor(), need_residual ? g_sum : Tensor(), Tensor(), Tensor()};
  // Where only the sum's gradient came, the norm's is zero: the kernel passes the sum's through the
  // mask, which only it reads, and the residual's is the sum's.
  const Tensor g_out = norm_reached ? grads[0] : zeros(s.shape(), saved.out_type, s.device());
  Tensor gx, gr, gw, gb;
  if (need_x) gx = Tensor::empty(s.shape(), saved.x_dtype, s.device());
  if (need_residual) gr = norm_reached ? Tensor::empty(s.shape(), s.dtype(), s.device()) : g_sum;
  if (need_weight && norm_reached) gw = Tensor::empty(saved.w.shape(), saved.w.dtype(), s.device());
  if (need_bias && norm_reached) gb = Tensor::empty({s.size(-1)}, s.dtype(), s.device());
  kernels_for(s.device())
      .dropout_add_layer_norm_backward(plain(g_out.to(saved.out_type)), or_null(g_sum), s, saved.mean, saved.invstd,
                                       or_null(saved.w), saved.mask, saved.keep, gx.defined() ? &gx : nullptr,
                                       norm_reached && gr.defined() ? &gr : nullptr, gw.defined() ? &gw : nullptr,
                                       gb.defined() ? &gb : nullptr);
  return {gx, gr, gw, gb};
}

// The checks of a seam's weight, bias, p and out_dtype beside the stream `stream` (its sum's dtype)
// and x's dtype; returns the out dtype.
DType check_seam(const char* op, const Tensor& stream, DType x_dtype, const Tensor& weight, const Tensor& bias,
                 double p, std::optional<DType> out_dtype) {
  const DType out_type = out_dtype.value_or(x_dtype);
  MINIDL_CHECK(out_type == x_dtype || (x_dtype == kFloat32 && is_reduced_floating(out_type)), op,
               ": expected out_dtype to be x's dtype ", x_dtype, x_dtype == kFloat32 ? " or a 16-bit one" : "",
               ", got ", out_type);
  MINIDL_CHECK(p >= 0 && p <= 1, op, ": expected a probability p in [0, 1], got ", p);
  const int64_t d = stream.size(-1);
  check_param(op, "weight", weight, stream, {d}, "the last dim");
  check_param(op, "bias", bias, stream, {d}, "the last dim");
  return out_type;
}

}  // namespace

std::tuple<Tensor, Tensor> dropout_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                  const Tensor& bias, double p, bool training, double eps,
                                                  std::optional<DType> out_dtype) {
  const char* op = "dropout_add_layer_norm";
  check_x(op, x);
  MINIDL_CHECK(x.dim() >= 1, op, ": expected x of at least one dim, got a scalar");
  // The sum's dtype: the residual's, or x's where there is none (the stream starts here).
  const DType sum_dtype = residual.defined() ? residual.dtype() : x.dtype();
  if (residual.defined()) {
    check_x(op, residual);
    MINIDL_CHECK(x.shape() == residual.shape(), op, ": expected x and residual of one shape, got ", x.shape(),
                 " and ", residual.shape());
    MINIDL_CHECK(x.dtype() == residual.dtype() || (residual.dtype() == kFloat32 && is_reduced_floating(x.dtype())),
                 op, ": expected x in residual's dtype ", residual.dtype(),
                 residual.dtype() == kFloat32 ? " or a 16-bit one" : "", ", got ", x.dtype());
  }
  const Tensor& stream = residual.defined() ? residual : x;  // weight and bias take the sum's dtype
  const DType out_type = check_seam(op, stream, x.dtype(), weight, bias, p, out_dtype);
  check_same_device(op, {x, residual, weight, bias});
  const int64_t d = x.size(-1);
  const double keep = training ? 1 - p : 1;
  if (keep > 0 && x.numel() > 0) {  // p = 1 keeps nothing to scale: the composition's dropout zeroes
    const Tensor xc = plain(x), rc = residual.defined() ? plain(residual) : Tensor(), w = plain(weight),
                 b = plain(bias);
    Tensor out = Tensor::empty(x.shape(), out_type, x.device());
    Tensor sum = Tensor::empty(x.shape(), sum_dtype, x.device());
    Tensor mask;  // the kernel's, in its own layout
    Tensor mean = Tensor::empty({x.numel() / d}, sum_dtype, x.device());
    Tensor invstd = Tensor::empty({x.numel() / d}, sum_dtype, x.device());
    Kernels& kernels = kernels_for(x.device());
    if (kernels.dropout_add_layer_norm(xc, rc, or_null(w), or_null(b), keep, eps, out, sum, mask, mean, invstd)) {
      if (autograd::needs_recording({x, residual, weight, bias})) {
        autograd::record_multi(op, {&out, &sum}, {x, residual, weight, bias}, {sum, w},
                               [saved = SeamSaved{sum.detach(), w, mean, invstd, mask, keep, x.dtype(), out_type}](
                                   const std::vector<Tensor>& grads, const std::vector<bool>& needs) {
                                 return seam_backward(saved, grads, needs[0], needs[1], needs[2], needs[3]);
                               });
      }
      return {out, sum};
    }
  }
  Tensor dropped = dropout(x, p, training);
  Tensor sum = residual.defined() ? residual + dropped : dropped;
  return {layer_norm(sum, {d}, weight, bias, eps).to(out_type), sum};
}

std::tuple<Tensor, Tensor> embedding_dropout_layer_norm(const Tensor& table, const Tensor& indices,
                                                        const Tensor& other_table, const Tensor& other_indices,
                                                        const Tensor& weight, const Tensor& bias, double p,
                                                        bool training, double eps, std::optional<DType> out_dtype) {
  const char* op = "embedding_dropout_layer_norm";
  std::optional<detail::EmbeddingSumRows> rows =
      detail::embedding_sum_rows(op, table, indices, other_table, other_indices);
  const double keep = training ? 1 - p : 1;
  if (rows && keep > 0 && rows->n > 0) {
    MINIDL_CHECK(is_floating(table.dtype()), op, ": expected floating tables, got ", table.dtype());
    const DType out_type = check_seam(op, table, table.dtype(), weight, bias, p, out_dtype);
    check_same_device(op, {table, weight, bias});
    const Tensor tc = table.contiguous(), oc = other_table.contiguous(), w = plain(weight), b = plain(bias);
    Tensor out = Tensor::empty(rows->out_shape, out_type, table.device());
    Tensor sum = Tensor::empty(rows->out_shape, table.dtype(), table.device());
    Tensor mask;
    Tensor mean = Tensor::empty({rows->n}, table.dtype(), table.device());
    Tensor invstd = Tensor::empty({rows->n}, table.dtype(), table.device());
    Kernels& kernels = kernels_for(table.device());
    if (kernels.embedding_dropout_layer_norm(tc, rows->ids, oc, rows->other_ids, or_null(w), or_null(b), keep, eps,
                                             out, sum, mask, mean, invstd)) {
      if (autograd::needs_recording({table, other_table, weight, bias})) {
        rows->make_plans(kernels, table.requires_grad(), other_table.requires_grad());
        autograd::record_multi(
            op, {&out, &sum}, {table, other_table, weight, bias}, {sum, w, rows->ids, rows->other_ids},
            [saved = SeamSaved{sum.detach(), w, mean, invstd, mask, keep, table.dtype(), out_type}, r = *rows](
                const std::vector<Tensor>& grads, const std::vector<bool>& needs) {
              // The seam's gradient of the embeddings' sum, then the two lookups'.
              std::vector<Tensor> g = seam_backward(saved, grads, needs[0] || needs[1], false, needs[2], needs[3]);
              std::vector<Tensor> tables{Tensor(), Tensor()};
              if (g[0].defined()) tables = r.backward(g[0].view({r.n, r.width}), {needs[0], needs[1]});
              return std::vector<Tensor>{tables[0], tables[1], g[2], g[3]};
            });
      }
      return {out, sum};
    }
  }
  return dropout_add_layer_norm(embedding_sum(table, indices, other_table, other_indices), Tensor(), weight, bias, p,
                                training, eps, out_dtype);
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  MINIDL_AUTOCAST(group_norm, group_norm, x, num_groups, weight, bias, eps);
  check_x("group_norm", x);
  MINIDL_CHECK(x.dim() >= 2, "group_norm: expected x of shape [N, C, *] (at least 2-D), got shape ", x.shape(), " (",
               x.dim(), "-D)");
  MINIDL_CHECK(num_groups > 0, "group_norm: expected num_groups > 0, got ", num_groups);
  const int64_t n = x.size(0), c = x.size(1);
  MINIDL_CHECK(c % num_groups == 0, "group_norm: expected the channels of x to be divisible by num_groups, but got x "
               "of shape ", x.shape(), " (", c, " channels) and num_groups=", num_groups);
  check_param("group_norm", "weight", weight, x, {c}, "one per channel");
  check_param("group_norm", "bias", bias, x, {c}, "one per channel");
  check_same_device("group_norm", {x, weight, bias});
  return grouped_norm("group_norm", x, n, c, trailing_numel(x, 2), num_groups, weight, bias, eps);
}

}  // namespace minidl
