// Matrix products on the GEMM kernel. Shapes:
//   matmul  [M, K] @ [K, N] -> [M, N]
//           [B, M, K] @ [B, K, N] -> [B, M, N]
//           [B, M, K] @ [K, N] -> [B, M, N]   and   [M, K] @ [B, K, N] -> [B, M, N]
//           (the 2-D side is shared by every batch; its gradient is summed over the batch)
//   linear  x [..., in], weight [out, in], bias [out] or undefined -> [..., out]
//   linear_relu_linear, linear_gelu_linear  x [..., in], w1 [hidden, in], b1 [hidden], w2 [out, hidden],
//           b2 [out] -> [..., out] (either bias may be undefined)
// Backward: grad_a = g @ b^T, grad_b = a^T @ g. Transposes are never materialized: a transposed
// view goes to the kernel as its contiguous storage plus a trans flag, and so does every b^T, a^T.
#include "ops/matmul.h"

#include "core/autograd.h"
#include "ops/autocast_masters.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/matmul_operand.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

// Batch slice i of a contiguous 3-D tensor as a 2-D tensor.
Tensor batch_item(const Tensor& t, int64_t i) {
  const int64_t rows = t.size(1), cols = t.size(2);
  return Tensor::make_view(t, {rows, cols}, {cols, 1}, t.offset() + i * rows * cols);
}

// The same contiguous memory viewed with another (contiguous) shape, outside the tape.
Tensor flat_view(const Tensor& t, Shape shape) {
  Strides strides = contiguous_strides(shape);
  return Tensor::make_view(t, std::move(shape), std::move(strides), t.offset());
}

// c = op(a) @ op(b); a 2-D side is shared by a batched other side.
void product(const GemmOperand& a, const GemmOperand& b, Tensor& c) {
  Kernels& k = kernels_for(c.device());
  if (a.data.dim() == 3 && !a.trans && b.data.dim() == 2) {
    // [B, M, K] @ [K, N] is one [B*M, K] @ [K, N] product: a single large GEMM beats B small ones.
    const int64_t rows = a.data.size(0) * a.data.size(1);
    Tensor c2 = flat_view(c, {rows, c.size(-1)});
    k.gemm(flat_view(a.data, {rows, a.data.size(2)}), false, b.data, b.trans, c2, 1, 0);
    return;
  }
  k.gemm(a.data, a.trans, b.data, b.trans, c, 1, 0);
}

// c (2-D) = sum over the batch of op(a)_i @ op(b)_i, for the gradient of a shared 2-D operand.
void product_summed(const GemmOperand& a, const GemmOperand& b, Tensor& c) {
  Kernels& k = kernels_for(c.device());
  const int64_t batch = a.data.size(0);
  if (a.trans && !b.trans) {
    // sum_i A_i^T B_i stacks into one product: [B*M, K]^T @ [B*M, N].
    const int64_t rows = batch * a.data.size(1);
    k.gemm(flat_view(a.data, {rows, a.data.size(2)}), true, flat_view(b.data, {rows, b.data.size(2)}), false, c, 1, 0);
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    k.gemm(batch_item(a.data, i), a.trans, batch_item(b.data, i), b.trans, c, 1, i ? 1 : 0);
  }
}

void check_matmul(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", {a, b});
  MINIDL_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
               "matmul: expected 2-D or 3-D (batched) tensors, got shapes ", a.shape(), " and ", b.shape());
  MINIDL_CHECK(a.dtype() == b.dtype(), "matmul: expected both tensors to have one dtype, got ", a.dtype(), " ",
               a.shape(), " and ", b.dtype(), " ", b.shape());
  MINIDL_CHECK(is_floating(a.dtype()), "matmul: expected floating tensors, got ", a.dtype(), " for shapes ", a.shape(),
               " and ", b.shape());
  MINIDL_CHECK(a.size(-1) == b.size(-2), "matmul: shapes ", a.shape(), " and ", b.shape(),
               " cannot be multiplied (inner dimensions ", a.size(-1), " and ", b.size(-2), " differ)");
  MINIDL_CHECK(a.dim() == 2 || b.dim() == 2 || a.size(0) == b.size(0), "matmul: batch sizes of shapes ", a.shape(),
               " and ", b.shape(), " differ (", a.size(0), " vs ", b.size(0), ")");
}

void check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_device("linear", {x, weight, bias});
  MINIDL_CHECK(weight.dim() == 2, "linear: expected a weight of shape [out, in], got ", weight.shape());
  MINIDL_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input of shape ", x.shape(),
               " does not match weight of shape ", weight.shape(), " (expected input [..., ", weight.size(1), "])");
  MINIDL_CHECK(x.dtype() == weight.dtype() && is_floating(x.dtype()),
               "linear: expected floating input and weight of one dtype, got ", x.dtype(), " and ", weight.dtype());
  if (bias.defined()) {
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: expected a bias of shape [",
                 weight.size(0), "] for weight of shape ", weight.shape(), ", got ", bias.shape());
    MINIDL_CHECK(bias.dtype() == weight.dtype(), "linear: bias has dtype ", bias.dtype(), ", weight has ",
                 weight.dtype());
  }
}

// matmul's gradients from recorded ops, for a create_graph backward: g @ b^T and a^T @ g, summed over
// the batch for a 2-D operand shared by a batched other.
std::vector<Tensor> matmul_backward_recorded(const Tensor& g, const Tensor& a, const Tensor& b, const Shape& sa,
                                             const Shape& sb, const std::vector<bool>& needs) {
  Tensor ga, gb;
  if (needs[0]) {
    ga = matmul(g, transpose(b, -2, -1));
    if (sa.size() == 2 && ga.dim() == 3) ga = sum(ga, {0});
  }
  if (needs[1]) {
    if (sb.size() == 2 && g.dim() == 3) {
      const int64_t k = a.size(-1), n = g.size(-1);
      gb = matmul(transpose(reshape(a, {a.numel() / k, k}), 0, 1), reshape(g, {g.numel() / n, n}));
    } else {
      gb = matmul(transpose(a, -2, -1), g);
    }
  }
  return {ga, gb};
}

// A linear layer in bfloat16 / float16 on the CPU computes in float32: its operands widened (the
// widening recorded, so the gradients come back rounded to 16 bits), its output rounded once. The CPU
// GEMM would widen them anyway (ops/cpu/matmul.cpp), and the bias, ReLU and bias-gradient passes then
// run in float32 too.
bool linear_widens(const Tensor& x) { return x.device().is_cpu() && is_reduced_floating(x.dtype()); }

Tensor widened(const Tensor& t) { return t.defined() ? t.to(kFloat32) : t; }

// Whether the GEMM kernels take a and b as they are: 2-D or 3-D, and two 3-D ones of one batch.
bool direct_matmul(const Tensor& a, const Tensor& b) {
  const bool ranks = (a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3);
  return ranks && (a.dim() == 2 || b.dim() == 2 || a.size(0) == b.size(0));
}

// torch.matmul's other forms, reduced to the 2-D and 3-D products: a 1-D operand becomes a matrix of
// one row (a) or one column (b), removed again from the result; batch dims broadcast, and are
// folded into one (a 2-D b is shared by the folded batch, so a stays a view where it can).
Tensor matmul_broadcast(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", {a, b});
  MINIDL_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: expected tensors of at least one dimension, got shapes ",
               a.shape(), " and ", b.shape());
  const Tensor a2 = a.dim() == 1 ? unsqueeze(a, 0) : a, b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  MINIDL_CHECK(k == b2.size(-2), "matmul: shapes ", a.shape(), " and ", b.shape(),
               " cannot be multiplied (inner dimensions ", k, " and ", b2.size(-2), " differ)");
  const Shape batch_a(a2.shape().begin(), a2.shape().end() - 2), batch_b(b2.shape().begin(), b2.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(batch_a, batch_b, "matmul");
  } catch (const Error&) {
    MINIDL_FAIL("matmul: the batch dims of shapes ", a.shape(), " and ", b.shape(), " (", batch_a, " and ", batch_b,
                ") do not broadcast");
  }
  const int64_t count = shape_numel(batch);
  auto with_matrix = [&](int64_t rows, int64_t cols) {
    Shape s = batch;
    s.insert(s.end(), {rows, cols});
    return s;
  };
  auto folded = [&](const Tensor& t, const Shape& own_batch, int64_t rows, int64_t cols) {
    if (own_batch.empty()) return t;  // a 2-D side, shared by the batch
    return reshape(own_batch == batch ? t : expand(t, with_matrix(rows, cols)), {count, rows, cols});
  };
  Tensor out = reshape(matmul(folded(a2, batch_a, m, k), folded(b2, batch_b, k, n)), with_matrix(m, n));
  if (b.dim() == 1) out = squeeze(out, -1);
  if (a.dim() == 1) out = squeeze(out, -1 - (b.dim() == 1 ? 0 : 1));
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(matmul, matmul, a, b);
  if (!direct_matmul(a, b)) return matmul_broadcast(a, b);
  check_matmul(a, b);
  const bool batched = a.dim() == 3 || b.dim() == 3;
  Shape out_shape{a.size(-2), b.size(-1)};
  if (batched) out_shape.insert(out_shape.begin(), a.dim() == 3 ? a.size(0) : b.size(0));
  GemmOperand oa, ob;
  {
    NoGradGuard no_grad;
    oa = as_operand(a);
    ob = as_operand(b);
  }
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  product(oa, ob, out);
  if (autograd::needs_recording({a, b})) {
    // Each operand is saved only for the other's gradient.
    GemmOperand saved_a = b.requires_grad() ? oa : GemmOperand{};
    GemmOperand saved_b = a.requires_grad() ? ob : GemmOperand{};
    // As given too, for a create_graph backward: it multiplies with recorded ops.
    Tensor a_given = b.requires_grad() ? a : Tensor(), b_given = a.requires_grad() ? b : Tensor();
    autograd::record("matmul", out, {a, b}, {saved_a.data, saved_b.data}, [saved_a, saved_b, a_given, b_given, sa = a.shape(), sb = b.shape()](
                                                const Tensor& g, const std::vector<bool>& needs) {
      if (grad_mode_enabled()) return matmul_backward_recorded(g, a_given, b_given, sa, sb, needs);
      const GemmOperand og = as_operand(g);
      Tensor ga, gb;
      if (needs[0]) {
        ga = Tensor::empty(sa, g.dtype(), g.device());
        if (sa.size() == 2 && g.dim() == 3) product_summed(og, saved_b.transposed(), ga);
        else product(og, saved_b.transposed(), ga);
      }
      if (needs[1]) {
        gb = Tensor::empty(sb, g.dtype(), g.device());
        if (sb.size() == 2 && g.dim() == 3) product_summed(saved_a.transposed(), og, gb);
        else product(saved_a.transposed(), og, gb);
      }
      return std::vector<Tensor>{ga, gb};
    }, true);
  }
  return out;
}

namespace {

// The GEMMs of a linear layer's backward from g, the gradient of its output before any activation:
// gx = g @ W and gw = g^T @ x, each where not null, and the bias gradient (g summed over the rows)
// where gb is not null: with the weight gradient where there is one (one kernel for a narrow layer
// on CUDA), else a reduction in g's layout.
void linear_backward_products(Kernels& k, const GemmOperand& og, const GemmOperand& x, const GemmOperand& w, Tensor* gx,
                              Tensor* gw, Tensor* gb) {
  const int64_t rows = og.trans ? og.data.size(1) : og.data.size(0);
  const int64_t out_features = og.trans ? og.data.size(0) : og.data.size(1);
  Tensor gx2 = gx ? flat_view(*gx, {rows, w.trans ? w.data.size(0) : w.data.size(1)}) : Tensor();
  Tensor* row_sums = gw ? gb : nullptr;
  if (gx && gw) {  // g @ W and g^T @ x are independent: a backend may overlap them
    k.gemm_concurrent({og.data, og.trans, w.data, w.trans, gx2}, {og.data, !og.trans, x.data, x.trans, *gw, row_sums});
  } else if (gx) {
    k.gemm(og.data, og.trans, w.data, w.trans, gx2, 1, 0);
  } else if (gw) {
    k.gemm_row_sums({og.data, !og.trans, x.data, x.trans, *gw, row_sums});
  }
  if (gb && !row_sums) {
    if (og.trans) k.reduce(ReduceOp::Sum, og.data, out_features, rows, 1, *gb, nullptr);
    else k.reduce(ReduceOp::Sum, og.data, 1, rows, out_features, *gb, nullptr);
  }
}

// linear, and with `relu` ReLU(linear) as one op: one GEMM whose epilogue adds the bias (and clamps),
// and a backward that masks the gradient and sums the bias gradient in one pass before its GEMMs.
// Under autocast the weight and bias may be 16-bit copies of float32 masters (ops/autocast_masters.h):
// the tape then records the masters, and the backward writes their gradients in float32.
Tensor linear_op(const char* name, const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu,
                 const autocast::Masters& masters = {}) {
  check_linear(x, weight, bias);
  if (linear_widens(x))
    return linear_op(name, widened(x), widened(weight), widened(bias), relu, masters).to(x.dtype());
  const int64_t in = weight.size(1), out_features = weight.size(0);
  const int64_t rows = in == 0 ? shape_numel(Shape(x.shape().begin(), x.shape().end() - 1)) : x.numel() / in;
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  GemmOperand ox, ow;
  Tensor b;
  {
    NoGradGuard no_grad;
    ox = as_operand(x.dim() == 2 ? x : reshape(x, {rows, in}));
    ow = as_operand(weight);
    // The bias epilogue takes a bias: zeros where ReLU runs without one. A plain product takes none
    // (a zero tensor would cost a memset a call, and a node of every captured step).
    if (bias.defined()) b = bias.contiguous().detach();
    else if (relu) b = zeros({out_features}, x.dtype(), x.device());
  }
  Kernels& k = kernels_for(x.device());
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor out2 = flat_view(out, {rows, out_features});
  if (bias.defined() || relu) k.gemm_bias(ox.data, ox.trans, ow.data, !ow.trans, b, relu, out2);
  else k.gemm(ox.data, ox.trans, ow.data, !ow.trans, out2, 1, 0);

  const Tensor &weight_recorded = autocast::recorded(masters, 1, weight), &bias_recorded = autocast::recorded(masters, 2, bias);
  if (autograd::needs_recording({x, weight_recorded, bias_recorded})) {
    GemmOperand saved_x = weight_recorded.requires_grad() ? ox : GemmOperand{};
    GemmOperand saved_w = x.requires_grad() ? ow : GemmOperand{};
    // ReLU's gradient needs only where its output is positive: the output is saved detached.
    Tensor saved_out = relu ? out2.detach() : Tensor();
    // As given too, for a create_graph backward: it composes mm and sum. A master weight's copy is
    // detached from it: that backward casts the master again, recorded, so that a second derivative
    // reaches the master through this product too.
    Tensor x_given = weight_recorded.requires_grad() ? x : Tensor(), w_given = x.requires_grad() ? weight : Tensor();
    const Tensor w_master = x.requires_grad() && &weight_recorded != &weight ? weight_recorded : Tensor();
    const uint64_t w_master_version = w_master.defined() ? w_master._version() : 0;
    const DType weight_grad_dtype = weight_recorded.dtype();
    const DType bias_grad_dtype = bias_recorded.defined() ? bias_recorded.dtype() : x.dtype();
    autograd::record(name, out, {x, weight_recorded, bias_recorded}, {saved_x.data, saved_w.data, saved_out},
                     [saved_x, saved_w, saved_out, x_given, w_given, w_master, w_master_version, x_shape = x.shape(),
                      rows, in, out_features, weight_grad_dtype,
                      bias_grad_dtype](const Tensor& g, const std::vector<bool>& needs) {
      if (grad_mode_enabled()) {
        Tensor g2 = reshape(g, {rows, out_features});
        if (saved_out.defined()) g2 = mul(g2, gt(saved_out, 0).to(g2.dtype()));  // relu'' is 0: a plain mask
        Tensor w = w_given;
        if (w_master.defined()) {
          MINIDL_CHECK(w_master._version() == w_master_version,
                       "backward: a master weight of a linear op under autocast has been modified by an inplace "
                       "operation since the forward (version ", w_master._version(), ", expected ", w_master_version,
                       "); its second derivative needs the weight as it was");
          w = w_master.to(w_given.dtype());
        }
        return std::vector<Tensor>{needs[0] ? reshape(matmul(g2, w), x_shape) : Tensor(),
                                   needs[1] ? matmul(transpose(g2, 0, 1), reshape(x_given, {rows, in})) : Tensor(),
                                   needs[2] ? sum(g2, {0}) : Tensor()};
      }
      Kernels& kg = kernels_for(g.device());
      Tensor g2 = g.dim() == 2 ? g : reshape(g, {rows, out_features});
      Tensor gx, gw, gb;
      if (needs[2]) gb = Tensor::empty({out_features}, bias_grad_dtype, g.device());
      if (saved_out.defined() && !needs[0] && needs[1]) {  // the first layer: its weight gradient ends the backward
        gw = Tensor::empty({out_features, in}, weight_grad_dtype, g.device());
        kg.relu_weight_grad(g2.contiguous(), saved_out, saved_x.data, saved_x.trans, gw, needs[2] ? &gb : nullptr);
        return std::vector<Tensor>{gx, gw, gb};
      }
      if (saved_out.defined()) {
        Tensor pre = Tensor::empty({rows, out_features}, g.dtype(), g.device());
        if (needs[2]) kg.relu_bias_backward(g2.contiguous(), saved_out, pre, gb);
        else kg.binary(BinaryOp::ReluBackward, g2, saved_out, pre);
        g2 = pre;
      }
      if (needs[0]) gx = Tensor::empty(x_shape, g.dtype(), g.device());
      if (needs[1]) gw = Tensor::empty({out_features, in}, weight_grad_dtype, g.device());
      const bool bias_left = needs[2] && !saved_out.defined();  // else summed with the mask above
      linear_backward_products(kg, as_operand(g2), saved_x, saved_w, needs[0] ? &gx : nullptr,
                               needs[1] ? &gw : nullptr, bias_left ? &gb : nullptr);
      return std::vector<Tensor>{gx, gw, gb};
    }, true);
  }
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const auto run = [](const Tensor& x, const Tensor& w, const Tensor& b, const autocast::Masters& masters) {
    return linear_op("linear", x, w, b, false, masters);
  };
  MINIDL_AUTOCAST_MASTERS(linear, run, x, weight, bias);
  return run(x, weight, bias, {});
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const auto run = [](const Tensor& x, const Tensor& w, const Tensor& b, const autocast::Masters& masters) {
    return linear_op("linear_relu", x, w, b, true, masters);
  };
  MINIDL_AUTOCAST_MASTERS(linear_relu, run, x, weight, bias);
  return run(x, weight, bias, {});
}

namespace {

// Two linear layers, the second taking the first's outputs: the first checked as linear checks it.
void check_two_layers(const char* name, const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                      const Tensor& b2) {
  check_linear(x, w1, b1);
  check_same_device(name, {x, w2, b2});
  MINIDL_CHECK(w2.dim() == 2 && w2.size(1) == w1.size(0), name, ": expected a second weight of shape [out, ",
               w1.size(0), "] after a first of shape ", w1.shape(), ", got ", w2.shape());
  MINIDL_CHECK(w2.dtype() == x.dtype(), name, ": expected a second weight of dtype ", x.dtype(), ", got ", w2.dtype());
  if (b2.defined())
    MINIDL_CHECK(b2.dim() == 1 && b2.size(0) == w2.size(0) && b2.dtype() == x.dtype(), name,
                 ": expected a second bias of shape [", w2.size(0), "] and dtype ", x.dtype(), ", got ", b2.shape(),
                 " ", b2.dtype());
}

// Two layers' sizes and operands as the kernels take them: x flattened to [rows, in], the weights
// as operands, the biases contiguous and detached (or undefined).
struct TwoLayers {
  int64_t in, hidden, out, rows;
  Shape out_shape;
  GemmOperand x, w1, w2;
  Tensor b1, b2;
};

TwoLayers two_layers(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  TwoLayers l;
  l.in = w1.size(1), l.hidden = w1.size(0), l.out = w2.size(0);
  l.rows = l.in == 0 ? shape_numel(Shape(x.shape().begin(), x.shape().end() - 1)) : x.numel() / l.in;
  l.out_shape = x.shape();
  l.out_shape.back() = l.out;
  NoGradGuard no_grad;
  l.x = as_operand(x.dim() == 2 ? x : reshape(x, {l.rows, l.in}));
  l.w1 = as_operand(w1);
  l.w2 = as_operand(w2);
  if (b1.defined()) l.b1 = b1.contiguous().detach();
  if (b2.defined()) l.b2 = b2.contiguous().detach();
  return l;
}

// The tensors a two-layer op records (masters where its weights and biases are their copies), and
// the dtypes of their gradients.
struct Recorded {
  Tensor x, w1, b1, w2, b2;
  DType w1_grad, b1_grad, w2_grad, b2_grad;
};

Recorded recorded_two_layers(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                             const autocast::Masters& m) {
  Recorded r{x, autocast::recorded(m, 1, w1), autocast::recorded(m, 2, b1), autocast::recorded(m, 3, w2),
             autocast::recorded(m, 4, b2), x.dtype(), x.dtype(), x.dtype(), x.dtype()};
  r.w1_grad = r.w1.dtype();
  r.w2_grad = r.w2.dtype();
  if (r.b1.defined()) r.b1_grad = r.b1.dtype();
  if (r.b2.defined()) r.b2_grad = r.b2.dtype();
  return r;
}

Tensor linear_relu_linear_op(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                             const autocast::Masters& masters) {
  check_two_layers("linear_relu_linear", x, w1, b1, w2, b2);
  if (linear_widens(x))
    return linear_relu_linear_op(widened(x), widened(w1), widened(b1), widened(w2), widened(b2), masters)
        .to(x.dtype());
  const TwoLayers l = two_layers(x, w1, b1, w2, b2);
  const int64_t in = l.in, hidden_features = l.hidden, out_features = l.out, rows = l.rows;
  const Shape& out_shape = l.out_shape;
  const GemmOperand &ox = l.x, &ow1 = l.w1, &ow2 = l.w2;
  // The kernel's first epilogue always adds a bias.
  const Tensor bias1 = l.b1.defined() ? l.b1 : zeros({hidden_features}, x.dtype(), x.device()), &bias2 = l.b2;
  Kernels& k = kernels_for(x.device());
  Tensor hidden = Tensor::empty({rows, hidden_features}, x.dtype(), x.device());
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor out2 = flat_view(out, {rows, out_features});
  k.linear_relu_linear(ox.data, ox.trans, ow1.data, !ow1.trans, bias1, ow2.data, !ow2.trans, bias2, hidden, out2);

  const Recorded r = recorded_two_layers(x, w1, b1, w2, b2, masters);
  if (autograd::needs_recording({r.x, r.w1, r.b1, r.w2, r.b2})) {
    const bool first_needed = x.requires_grad() || r.w1.requires_grad() || (r.b1.defined() && r.b1.requires_grad());
    GemmOperand saved_x = r.w1.requires_grad() ? ox : GemmOperand{};
    GemmOperand saved_w1 = x.requires_grad() ? ow1 : GemmOperand{};
    GemmOperand saved_w2 = first_needed ? ow2 : GemmOperand{};
    // The hidden layer's output: the ReLU's mask and the second weight's gradient both read it.
    autograd::record("linear_relu_linear", out, {r.x, r.w1, r.b1, r.w2, r.b2},
                     {saved_x.data, saved_w1.data, saved_w2.data, hidden},
                     [saved_x, saved_w1, saved_w2, hidden, x_shape = x.shape(), rows, in, hidden_features,
                      out_features, r](const Tensor& g, const std::vector<bool>& needs) {
                       Kernels& kg = kernels_for(g.device());
                       Tensor g2 = (g.dim() == 2 ? g : reshape(g, {rows, out_features})).contiguous();
                       Tensor gx, gw1, gb1, gw2, gb2;
                       if (needs[3]) gw2 = Tensor::empty({out_features, hidden_features}, r.w2_grad, g.device());
                       if (needs[4]) gb2 = Tensor::empty({out_features}, r.b2_grad, g.device());
                       // The second layer's weight gradient g^T @ hidden, with its bias gradient.
                       const Kernels::GemmCall second{g2, true, hidden, false, gw2, needs[4] ? &gb2 : nullptr};
                       if (needs[0] || needs[1] || needs[2]) {
                         Tensor pre = Tensor::empty({rows, hidden_features}, g.dtype(), g.device());
                         gb1 = Tensor::empty({hidden_features}, r.b1_grad, g.device());
                         kg.linear_relu_linear_backward(g2, saved_w2.data, saved_w2.trans, hidden, pre, gb1,
                                                        needs[3] ? &second : nullptr);
                         if (!needs[2]) gb1 = Tensor();
                         if (needs[0]) gx = Tensor::empty(x_shape, g.dtype(), g.device());
                         if (needs[1]) gw1 = Tensor::empty({hidden_features, in}, r.w1_grad, g.device());
                         linear_backward_products(kg, as_operand(pre), saved_x, saved_w1, needs[0] ? &gx : nullptr,
                                                  needs[1] ? &gw1 : nullptr, nullptr);
                       } else if (needs[3]) {
                         kg.gemm_row_sums(second);
                       }
                       if (needs[4] && !needs[3]) kg.reduce(ReduceOp::Sum, g2, 1, rows, out_features, gb2, nullptr);
                       return std::vector<Tensor>{gx, gw1, gb1, gw2, gb2};
                     });
  }
  return out;
}

Tensor linear_gelu_linear_op(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                             const std::string& approximate, bool keep_gelu_output, const autocast::Masters& masters) {
  MINIDL_CHECK(approximate == "none" || approximate == "tanh",
               "linear_gelu_linear: expected approximate to be \"none\" or \"tanh\", got \"", approximate, "\"");
  check_two_layers("linear_gelu_linear", x, w1, b1, w2, b2);
  if (linear_widens(x))
    return linear_gelu_linear_op(widened(x), widened(w1), widened(b1), widened(w2), widened(b2), approximate,
                                 keep_gelu_output, masters)
        .to(x.dtype());
  const bool tanh = approximate == "tanh";
  const UnaryOp gelu_op = tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu;
  const BinaryOp gelu_backward_op = tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward;
  const TwoLayers l = two_layers(x, w1, b1, w2, b2);
  const int64_t in = l.in, hidden_features = l.hidden, out_features = l.out, rows = l.rows;
  const Shape& out_shape = l.out_shape;
  const GemmOperand &ox = l.x, &ow1 = l.w1, &ow2 = l.w2;
  const Tensor &bias1 = l.b1, &bias2 = l.b2;
  Kernels& k = kernels_for(x.device());
  // The GELU's input, the one [rows, hidden] tensor the backward keeps (unless it keeps the
  // derivative, below); its output lives only until the second product has read it, and the backward
  // makes it again (unless keep_gelu_output).
  Tensor hidden = Tensor::empty({rows, hidden_features}, x.dtype(), x.device());
  if (bias1.defined()) k.gemm_bias(ox.data, ox.trans, ow1.data, !ow1.trans, bias1, false, hidden);
  else k.gemm(ox.data, ox.trans, ow1.data, !ow1.trans, hidden, 1, 0);
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor out2 = flat_view(out, {rows, out_features});
  const Recorded r = recorded_two_layers(x, w1, b1, w2, b2, masters);
  const bool recording = autograd::needs_recording({r.x, r.w1, r.b1, r.w2, r.b2});
  const bool first_needed = x.requires_grad() || r.w1.requires_grad() || (r.b1.defined() && r.b1.requires_grad());
  // A layer that keeps its GELU's output keeps the GELU's derivative in place of its input (the same
  // bytes) where the device multiplies by it inside the backward's product (gemm_times): that
  // product is then written once, already the GELU input's gradient, instead of written, read back
  // with the input and written again by a pass.
  const bool keep_derivative = recording && keep_gelu_output && first_needed && k.gemm_times_supported(x.dtype(), out_features, hidden_features);
  // The GELU is a pass of its own, not a library product's epilogue: cuBLASLt's GELU epilogues
  // compute the tanh form only, and cuDNN's fused matmul with the exact form ran slower than the
  // product and this pass together (measured on an H200: docs/benchmarks.md, eighteenth section;
  // with the derivative as a second output too, on an H100: the thirty-fourth).
  Tensor activated = Tensor::empty({rows, hidden_features}, x.dtype(), x.device()), derivative;
  if (keep_derivative) {
    derivative = Tensor::empty({rows, hidden_features}, x.dtype(), x.device());
    k.gelu_with_derivative(tanh, hidden, activated, derivative);
  } else {
    k.unary(gelu_op, hidden, activated);
  }
  if (bias2.defined()) k.gemm_bias(activated, false, ow2.data, !ow2.trans, bias2, false, out2);
  else k.gemm(activated, false, ow2.data, !ow2.trans, out2, 1, 0);

  if (recording) {
    GemmOperand saved_x = r.w1.requires_grad() ? ox : GemmOperand{};
    GemmOperand saved_w1 = x.requires_grad() ? ow1 : GemmOperand{};
    GemmOperand saved_w2 = first_needed ? ow2 : GemmOperand{};
    const Tensor saved_activated = keep_gelu_output && r.w2.requires_grad() ? activated : Tensor();
    const Tensor saved_hidden = keep_derivative ? Tensor() : hidden;
    // Not twice differentiable (a create_graph backward stops with the engine's error naming the
    // op), as gelu's own backward is not: the composition could not be differentiated twice either.
    autograd::record("linear_gelu_linear", out, {r.x, r.w1, r.b1, r.w2, r.b2},
                     {saved_x.data, saved_w1.data, saved_w2.data, saved_hidden, saved_activated, derivative},
                     [saved_x, saved_w1, saved_w2, hidden = saved_hidden, saved_activated, derivative, gelu_op,
                      gelu_backward_op, x_shape = x.shape(), rows, in, hidden_features, out_features,
                      r](const Tensor& g, const std::vector<bool>& needs) {
                       Kernels& kg = kernels_for(g.device());
                       Tensor g2 = (g.dim() == 2 ? g : reshape(g, {rows, out_features})).contiguous();
                       Tensor gx, gw1, gb1, gw2, gb2;
                       if (needs[4]) gb2 = Tensor::empty({out_features}, r.b2_grad, g.device());
                       const bool first_layer = needs[0] || needs[1] || needs[2];
                       // The gradient of the GELU's input: (g @ w2) * gelu'(hidden), in place, or in
                       // the product itself where the forward kept the derivative.
                       Tensor pre;
                       if (first_layer) {
                         pre = Tensor::empty({rows, hidden_features}, g.dtype(), g.device());
                         if (!derivative.defined()) {
                           kg.gemm(g2, false, saved_w2.data, saved_w2.trans, pre, 1, 0);
                         } else if (!kg.gemm_times(g2, false, saved_w2.data, saved_w2.trans, derivative, pre)) {
                           kg.gemm(g2, false, saved_w2.data, saved_w2.trans, pre, 1, 0);
                           kg.binary(BinaryOp::Mul, pre, derivative, pre);
                         }
                       }
                       const bool made_again = needs[3] && !saved_activated.defined();
                       if (needs[3]) {
                         // The second layer's weight gradient g^T @ gelu(hidden), with its bias gradient;
                         // the GELU's output kept, or made again (in the pass that takes its gradient,
                         // where that is wanted too) and freed before the first layer's gradients.
                         gw2 = Tensor::empty({out_features, hidden_features}, r.w2_grad, g.device());
                         Tensor activated = saved_activated;
                         if (made_again) {
                           activated = Tensor::empty({rows, hidden_features}, g.dtype(), g.device());
                           const bool tanh = gelu_op == UnaryOp::GeluTanh;
                           if (first_layer) kg.gelu_backward_with_output(tanh, hidden, pre, activated);
                           else kg.unary(gelu_op, hidden, activated);
                         }
                         kg.gemm_row_sums({g2, true, activated, false, gw2, needs[4] ? &gb2 : nullptr});
                       } else if (needs[4]) {
                         kg.reduce(ReduceOp::Sum, g2, 1, rows, out_features, gb2, nullptr);
                       }
                       if (first_layer) {
                         if (!made_again && !derivative.defined()) kg.binary(gelu_backward_op, pre, hidden, pre);
                         if (needs[0]) gx = Tensor::empty(x_shape, g.dtype(), g.device());
                         if (needs[1]) gw1 = Tensor::empty({hidden_features, in}, r.w1_grad, g.device());
                         if (needs[2]) gb1 = Tensor::empty({hidden_features}, r.b1_grad, g.device());
                         linear_backward_products(kg, as_operand(pre), saved_x, saved_w1, needs[0] ? &gx : nullptr,
                                                  needs[1] ? &gw1 : nullptr, needs[2] ? &gb1 : nullptr);
                       }
                       return std::vector<Tensor>{gx, gw1, gb1, gw2, gb2};
                     });
  }
  return out;
}

}  // namespace

Tensor linear_relu_linear(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  MINIDL_AUTOCAST_MASTERS(linear_relu_linear, linear_relu_linear_op, x, w1, b1, w2, b2);
  return linear_relu_linear_op(x, w1, b1, w2, b2, {});
}

Tensor linear_gelu_linear(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                          const std::string& approximate, bool keep_gelu_output) {
  MINIDL_AUTOCAST_MASTERS(linear_gelu_linear, linear_gelu_linear_op, x, w1, b1, w2, b2, approximate, keep_gelu_output);
  return linear_gelu_linear_op(x, w1, b1, w2, b2, approximate, keep_gelu_output, {});
}

// The composed forms, for backends without fused epilogues (and the reference the fused ones are
// tested against).
void Kernels::gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                        Tensor& c) {
  const int64_t rows = c.size(0), cols = c.size(1);
  copy(Tensor::make_view(bias, {rows, cols}, {0, bias.strides()[0]}, bias.offset()), c);
  gemm(a, trans_a, b, trans_b, c, 1, 1);
  if (relu) unary(UnaryOp::Relu, c, c);
}

void Kernels::gelu_backward_with_output(bool tanh, const Tensor& input, Tensor& grad, Tensor& output) {
  unary(tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, input, output);
  binary(tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, grad, input, grad);
}

void Kernels::gelu_with_derivative(bool tanh, const Tensor& input, Tensor& output, Tensor& derivative) {
  unary(tanh ? UnaryOp::GeluTanh : UnaryOp::Gelu, input, output);
  fill(derivative, 1.0);
  binary(tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, derivative, input, derivative);
}

void Kernels::gemm_row_sums(const GemmCall& call) {
  gemm(call.a, call.trans_a, call.b, call.trans_b, call.c, 1, 0);
  if (call.row_sums) sum_rows_of_a(call);
}

void Kernels::sum_rows_of_a(const GemmCall& call) {
  // op(a) is [M, K]: a itself, or a [K, M] read transposed.
  const int64_t m = call.c.size(0);
  if (call.trans_a) reduce(ReduceOp::Sum, call.a, 1, call.a.size(0), m, *call.row_sums, nullptr);
  else reduce(ReduceOp::Sum, call.a, m, call.a.size(1), 1, *call.row_sums, nullptr);
}

void Kernels::linear_relu_linear(const Tensor& x, bool trans_x, const Tensor& w1, bool trans_w1, const Tensor& b1,
                                 const Tensor& w2, bool trans_w2, const Tensor& b2, Tensor& hidden, Tensor& out) {
  gemm_bias(x, trans_x, w1, trans_w1, b1, true, hidden);
  if (b2.defined()) gemm_bias(hidden, false, w2, trans_w2, b2, false, out);
  else gemm(hidden, false, w2, trans_w2, out, 1, 0);
}

void Kernels::linear_relu_linear_backward(const Tensor& grad_out, const Tensor& w2, bool trans_w2,
                                          const Tensor& hidden, Tensor& grad_pre, Tensor& grad_bias1,
                                          const GemmCall* second) {
  Tensor grad_hidden = Tensor::empty(hidden.shape(), hidden.dtype(), hidden.device());
  const GemmCall first{grad_out, false, w2, trans_w2, grad_hidden};
  if (second) gemm_concurrent(first, *second);
  else gemm_row_sums(first);
  relu_bias_backward(grad_hidden, hidden, grad_pre, grad_bias1);
}

void Kernels::relu_weight_grad(const Tensor& grad_out, const Tensor& out, const Tensor& x, bool trans_x,
                               Tensor& grad_weight, Tensor* grad_bias) {
  Tensor pre = Tensor::empty(grad_out.shape(), grad_out.dtype(), grad_out.device());
  if (grad_bias) relu_bias_backward(grad_out, out, pre, *grad_bias);
  else binary(BinaryOp::ReluBackward, grad_out, out, pre);
  gemm_row_sums({pre, true, x, trans_x, grad_weight, nullptr});
}

void Kernels::relu_bias_backward(const Tensor& grad_out, const Tensor& out, Tensor& grad_pre, Tensor& grad_bias) {
  binary(BinaryOp::ReluBackward, grad_out, out, grad_pre);
  reduce(ReduceOp::Sum, grad_pre, 1, grad_pre.size(0), grad_pre.size(1), grad_bias, nullptr);
}

}  // namespace minidl
