#pragma once
// The kernel interface: the small set of device primitives every op is built from. Each device
// type implements it once (ops/cpu/ on Eigen + OpenMP, ops/cuda/ on cuBLAS, cuDNN, CUB and our
// .cu kernels). Ops allocate outputs and call kernels_for(device); they never branch on the device.
//
// Conventions: tensors passed as outputs are allocated by the caller, contiguous, on the same
// device and of the same dtype as the inputs unless a comment says otherwise. Inputs are
// contiguous unless a comment says "any strides".
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace minidl {

enum class UnaryOp {
  Neg, Exp, Log, Sqrt, Relu, Sigmoid, Tanh,
  LeakyRelu,  // x > 0 ? x : scalar * x   (scalar = negative_slope)
  Gelu,       // x * Phi(x), Phi the standard normal CDF (exact, by erf)
  GeluTanh,   // PyTorch's approximate="tanh": 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
  Silu,       // x * sigmoid(x)
  // Math (ops/math.cpp), floating x. Sign and BitwiseNot also take integral x.
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Floor, Ceil, Trunc,
  Round,      // half to even; scalar = decimals: nearbyint(x * 10^d) / 10^d (d < 0: by 10^-d), as torch.round
  Sign,       // -1, 0 or 1 (0 for 0, -0 and NaN)
  Rsqrt, Reciprocal, Log1p, Expm1, Log2, Log10, Erf,
  Asinh, Acosh, Atanh,
  // Special functions (ops/math.cpp; the scalar formulas in ops/special_functions.h), floating x.
  Erfc, Erfinv, Lgamma, Digamma,
  Polygamma,  // the scalar-th derivative of digamma (scalar = n >= 0, a whole number)
  Ndtri,      // the standard normal's quantile function
  I0, I0e, I1, I1e,  // modified Bessel functions of the first kind (e: times exp(-|x|))
  BitwiseNot,  // ~x, integral x only
  // Activations (ops/activation.cpp), floating x.
  Softplus,     // x > scalar ? x : log1p(exp(x))   (scalar = threshold; the op applies beta around it)
  Elu,          // x > 0 ? x : scalar * expm1(x)   (scalar = alpha)
  Selu,         // scale * (x > 0 ? x : alpha * expm1(x)), PyTorch's fixed alpha and scale
  Mish,         // x * tanh(log1p(exp(x)))
  Hardsigmoid,  // min(max(x + 3, 0), 6) / 6
  Hardswish,    // x * hardsigmoid(x)
};

enum class BinaryOp {
  Add, Sub, Mul, Div, Pow,
  FloorDivide,      // floor(a / b), toward negative infinity, as Python's //; integral b != 0 (checked by the op)
  Remainder,        // a - floor(a / b) * b, with b's sign, as Python's %
  Eq,               // 1 where a == b else 0; also for int64
  ReluBackward,     // a = grad, b = input:  a * (b > 0)
  SigmoidBackward,  // a = grad, b = output: a * b * (1 - b)
  TanhBackward,     // a = grad, b = output: a * (1 - b * b)
  LeakyReluBackward,  // a = grad, b = input: b > 0 ? a : scalar * a   (scalar = negative_slope)
  GeluBackward,       // a = grad, b = input: a * d/dx gelu(b)
  GeluTanhBackward,   // a = grad, b = input: a * d/dx of the tanh approximation at b
  SiluBackward,       // a = grad, b = input: a * s * (1 + b * (1 - s)), s = sigmoid(b)
  // Math (ops/math.cpp).
  Atan2,
  Maximum, Minimum,  // NaN wins, as PyTorch's
  Fmod,              // C's fmod: the result takes a's sign; integral b != 0 (checked by the op)
  Hypot,             // sqrt(a^2 + b^2) without overflow or underflow, floating only
  Copysign,          // |a| with b's sign bit (-0 and NaN's sign bit count), floating only
  Nextafter,         // the next representable value after a toward b, floating only
  Gcd,               // the greatest common divisor, >= 0 (gcd(0, 0) = 0), integral only
  BitwiseAnd, BitwiseOr, BitwiseXor,  // integral only
  // Activation gradients (ops/activation.cpp), a = grad.
  SoftplusBackward,     // b = the scaled input y: y > scalar ? a : a * sigmoid(y)   (scalar = threshold)
  EluBackward,          // b = input: b > 0 ? a : a * scalar * exp(b)   (scalar = alpha)
  SeluBackward,         // b = input: scale * (b > 0 ? a : a * alpha * exp(b))
  MishBackward,         // b = input: a * (t + b * sigmoid(b) * (1 - t * t)), t = tanh(log1p(exp(b)))
  HardsigmoidBackward,  // b = input: -3 < b < 3 ? a / 6 : 0
  HardswishBackward,    // b = input: b < -3 ? 0 : b <= 3 ? a * (b / 3 + 0.5) : a
};

enum class ReduceOp { Sum, Max, Prod };

/// Cumulative ops of Kernels::scan (ops/scan.cpp). Max and Min propagate NaN; LogAddExp (floating
/// only) is log(exp(a) + exp(b)) without overflow, logcumsumexp's step.
enum class ScanOp { Sum, Prod, Max, Min, LogAddExp };

/// Elementwise comparisons (ops/compare.cpp); each writes a bool.
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge };

/// index_select / index_add see the indexed tensor as [outer, rows, inner] with rows along `dim`,
/// and the gathered one as [outer, k, inner].
struct IndexGeometry {
  int64_t outer = 1, rows = 1, inner = 1, k = 0;
};

inline IndexGeometry index_geometry(const Shape& indexed, int64_t dim, int64_t k) {
  IndexGeometry g;
  g.k = k;
  g.rows = indexed[static_cast<size_t>(dim)];
  for (int64_t d = 0; d < dim; ++d) g.outer *= indexed[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < indexed.size(); ++d) g.inner *= indexed[d];
  return g;
}

/// Geometry of a 2-D convolution over [N, C, H, W] images (also used by pooling).
struct ConvGeometry {
  int64_t channels, height, width;
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h, out_w;
};

struct SgdConfig {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the momentum buffer is initialized with the gradient, as in PyTorch
  // CUDA: a 0-d tensor of the parameter's dtype on its device holding lr, read there instead of
  // `lr`, so that a step captured in a CUDA graph follows learning-rate changes. Null: use `lr`.
  const Tensor* lr_on_device = nullptr;
  // GradScaler: a 0-d float32 tensor on the parameters' device; where it holds a nonzero value the
  // step changes nothing (parameters and momentum buffers), read on the device, with no host sync.
  const Tensor* found_inf = nullptr;
  // Autocast's 16-bit copies of float32 parameters (ops/autocast_masters.h), one per parameter,
  // undefined where there is none, all of one dtype: written with the updated values.
  const std::vector<Tensor>* copies = nullptr;
};

struct AdamConfig {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW
  int64_t step;                 // 1 on the first step
  bool amsgrad = false;         // the denominator uses the running maximum of exp_avg_sq
  bool maximize = false;        // ascend: the gradient's sign flipped
  Tensor* max_exp_avg_sq = nullptr;  // amsgrad's running maximum (CPU adam_step only)
};

/// The tensors of one multi-tensor Adam step (adam_step_multi): one entry per parameter in each list,
/// all of one device and dtype; max_exp_avg_sqs is empty without amsgrad. steps are the parameters'
/// step counts as 0-d float32 tensors on their device (as torch's capturable Adam keeps them).
struct AdamTensorLists {
  std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
};

/// adam_step_multi's scalars. The learning rate, the step counts and found_inf are read on the
/// device, so that a step captured in a CUDA graph follows a schedule and skips after an overflow.
struct AdamMultiConfig {
  double beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay, amsgrad, maximize;
  const Tensor* lr = nullptr;  // 0-d, of the parameters' dtype, on their device
  // GradScaler: 0-d float32 on the device; nonzero leaves parameters, moments and step counts unchanged.
  const Tensor* found_inf = nullptr;
  // Autocast's 16-bit copies of float32 parameters, as SgdConfig::copies: written with the updated values.
  const std::vector<Tensor>* copies = nullptr;
};

/// Embedding's backward adds each id's rows into this many interleaved partial sums (a fixed order
/// of the additions, the same on every device: Kernels::embedding_backward), so that the GPU sums
/// a common id's thousands of rows in parallel chains rather than one.
inline constexpr int kEmbeddingGradLanes = 32;

class Kernels {
 public:
  virtual ~Kernels() = default;

  // ---- memory (ops/copy.cpp, ops/creation.cpp) ----
  /// dst = src elementwise; same shape, any strides for both, dtypes may differ (converting).
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& dst, double value) = 0;
  /// values[i] into the one-element *dsts[i] (fill_scalars_): one fill each, unless the device
  /// does better.
  virtual void fill_scalars(const std::vector<Tensor*>& dsts, const std::vector<double>& values) {
    for (size_t i = 0; i < dsts.size(); ++i) fill(*dsts[i], values[i]);
  }
  /// dst (contiguous, any dtype but bool) [i] = start + i * step, computed in double and converted as
  /// copy converts a double: made where it is used, so a CUDA graph can capture it.
  virtual void arange(Tensor& dst, double start, double step) = 0;
  /// out takes slice index[k] of src along `dim` as its slice k: index is int64 [K], out is src's
  /// shape with K at `dim`. Any dtype. An index out of range is an error.
  virtual void index_select(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) = 0;
  /// The adjoint of index_select: dst (not cleared) gets slice k of src added at slice index[k] along
  /// `dim`; repeated indices accumulate (atomics on CUDA, so float sums may differ in the last bits
  /// run to run, unless set_deterministic(true): then sorted, in index order). Floating dtypes.
  virtual void index_add(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst) = 0;
  /// Embedding's backward (ops/embedding.cpp): grad_weight [V, D] (overwritten) gets in row v the sum
  /// of the rows of grad [N, D] whose id (ids int64 [N]) is v, divided by v's count when
  /// `scale_grad_by_freq`; the row of padding_idx (-1: none) stays zero. The order of the additions is
  /// fixed: v's k-th row in position order goes into partial sum k % kEmbeddingGradLanes, and the
  /// partial sums are added in lane order. The same bits every run on every device (CUDA sorts the
  /// ids; no atomics); 16-bit dtypes sum in float32.
  /// `plan` is embedding_backward_plan's for these ids, or undefined.
  virtual void embedding_backward(const Tensor& grad, const Tensor& ids, const Tensor& plan, int64_t padding_idx,
                                  bool scale_grad_by_freq, Tensor& grad_weight) = 0;
  /// The part of embedding_backward that depends on the ids alone, made where they are known:
  /// embedding() asks for it in the forward. CUDA sorts the ids there on the side stream, beside the
  /// rest of the forward, rather than at the end of the backward (a GPT's two sorts: 25 us of its
  /// step's last stretch, which nothing else overlapped). Undefined where a device makes none (the
  /// CPU: its counting sort is cheap beside the sums).
  virtual Tensor embedding_backward_plan(const Tensor& /*ids*/, int64_t /*rows*/) { return Tensor(); }
  /// embedding_sum's forward (ops/embedding.cpp): out [N, D] (contiguous) gets in row r the sum of
  /// row ids_a[r] of a [Va, D] and row ids_b[r % M] of b [Vb, D] (ids int64 [N] and [M], M dividing N;
  /// a and b contiguous, of one dtype), computed as the two lookups and their addition would be.
  /// False where a device has no such kernel (the CPU: the op composes them).
  virtual bool embedding_add(const Tensor& /*a*/, const Tensor& /*ids_a*/, const Tensor& /*b*/,
                             const Tensor& /*ids_b*/, Tensor& /*out*/) {
    return false;
  }

  // ---- gather and scatter along a dim (ops/gather_scatter.cpp, ops/indexing.cpp) ----
  // For every position p of index's shape (index int64, any strides, values already checked by the
  // op to lie in [0, size of `dim`)), q is p with q[dim] = index[p]. src and dst take any strides
  // (a dim of stride 1 overlapping others is fine: advanced indexing gathers through such a view).
  /// out[p] = src[q]; out contiguous of index's shape, src's dtype (any).
  virtual void gather(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) = 0;
  /// dst[q] = src[p], or dst[q] += src[p] when `accumulate` (not bool). Repeated q: the CPU writes in
  /// index order (the last one wins, sums in order); CUDA adds with atomics, unless
  /// set_deterministic(true): then one thread per line along `dim` writes it in index order, as the CPU.
  virtual void scatter(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, bool accumulate) = 0;
  /// dst[q] = op(dst[q], src[p]) for op Prod, Max or Min (ops/scan_step.h's steps: a NaN wins the
  /// maximum and minimum; 16-bit values combine in float32), in index order on both devices (CUDA runs
  /// one thread per line along `dim`), so every run gives the same bits. scatter_reduce's kernel.
  virtual void scatter_reduce(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, ScanOp op) = 0;
  /// The positions of x's nonzero elements (x contiguous, any dtype) in row-major order, as a new int64
  /// [n, x.dim()] tensor: n is known only after counting, so CUDA waits for the device here.
  virtual Tensor nonzero(const Tensor& x) = 0;

  // ---- random, from the default generator (ops/creation.cpp, ops/dropout.cpp) ----
  virtual void uniform(Tensor& dst, double low, double high) = 0;
  virtual void normal(Tensor& dst, double mean, double stddev) = 0;
  /// Inverted dropout in one pass: mask (bool, x's shape) is true with probability keep_prob, and
  /// out = x / keep_prob where mask, else 0. x, out and mask contiguous; keep_prob > 0.
  virtual void dropout(const Tensor& x, double keep_prob, Tensor& out, Tensor& mask) = 0;
  /// grad_in = grad_out / keep_prob where mask, else 0 (all contiguous, one shape).
  virtual void dropout_backward(const Tensor& grad_out, const Tensor& mask, double keep_prob, Tensor& grad_in) = 0;

  // ---- elementwise (ops/elementwise.cpp) ----
  /// Inputs have out's shape with any strides (0 on broadcast axes). `out` may be `x` or `a`.
  /// `scalar` is the op's parameter where it has one (LeakyRelu*: negative_slope), else ignored.
  virtual void unary(UnaryOp op, const Tensor& x, Tensor& out, double scalar = 0) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, double scalar = 0) = 0;
  /// wide (float32) + narrow (bfloat16 or float16) widened, both contiguous and of one shape, as a new
  /// float32 tensor made in one pass: a residual stream's sum with a 16-bit branch under autocast,
  /// without the widened copy that promotion would make. Undefined where the device has no such
  /// kernel (the op then promotes and adds).
  virtual Tensor add_widening(const Tensor& wide, const Tensor& narrow) {
    (void)wide, (void)narrow;
    return Tensor();
  }

  /// The backward of GELU where its output is wanted too (a layer that made it again rather than
  /// keep it: linear_gelu_linear): output = gelu(input), grad *= gelu'(input) in place. All three
  /// contiguous, of one shape and dtype; `tanh` picks the approximation. One pass on CUDA.
  virtual void gelu_backward_with_output(bool tanh, const Tensor& input, Tensor& grad, Tensor& output);
  /// output = gelu(input) and derivative = gelu'(input), for a backward that multiplies by the
  /// derivative inside a product (linear_gelu_linear with gemm_times). As gelu_backward_with_output.
  virtual void gelu_with_derivative(bool tanh, const Tensor& input, Tensor& output, Tensor& derivative);

  // ---- comparisons and selection (ops/compare.cpp) ----
  /// out (bool) = a op b; a and b have one dtype (any, bool included) and out's shape with any strides.
  virtual void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out) = 0;
  /// out = cond ? a : b; cond is bool, a and b have out's dtype; all three have out's shape with any strides.
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) = 0;

  // ---- reductions (ops/reduce.cpp) ----
  /// x viewed as [outer, n, inner] is reduced over n into out [outer, inner]. For Max, `argmax`
  /// (int64, [outer, inner]) receives the index of the first maximum when not null.
  virtual void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out,
                      Tensor* argmax) = 0;

  // ---- scans and sorting (ops/scan.cpp, ops/sort.cpp) ----
  /// out [outer, n, inner] = the inclusive scan `op` (sum, product, max, ...) of x [outer, n, inner]
  /// over n, from the first element, or from the last when `reverse`. float32 accumulates in double.
  virtual void scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse,
                    Tensor& out) = 0;
  /// The gradient of cumprod over n, exact where x has zeros (no division): grad_in[i] = the sum over
  /// j >= i of grad_out[j] times the product of x[m] for m <= j, m != i. Floating dtypes.
  virtual void cumprod_backward(const Tensor& x, const Tensor& grad_out, int64_t outer, int64_t n, int64_t inner,
                                Tensor& grad_in) = 0;
  /// Sorts each of the `rows` contiguous rows of x [rows, n] stably (equal elements keep their order),
  /// ascending or descending, NaN as the largest value: values [rows, n] (x's dtype) and indices
  /// (int64 [rows, n], positions within the row). Floating and integral dtypes.
  virtual void sort(const Tensor& x, int64_t rows, int64_t n, bool descending, Tensor& values, Tensor& indices) = 0;

  // ---- matrix products (ops/matmul.cpp) ----
  /// c = alpha * op(a) @ op(b) + beta * c, row-major. c is [M, N] or [B, M, N]; a is [M, K] (or
  /// [K, M] when trans_a), b is [K, N] (or [N, K] when trans_b), each 2-D or batched [B, ...]; a 2-D
  /// operand is shared by every batch.
  virtual void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
                    double beta) = 0;
  /// One product of gemm_concurrent and gemm_row_sums: c = op(a) @ op(b) and, when row_sums is
  /// given, row_sums [M] = op(a) summed over k (a linear layer's bias gradient, op(a) = grad^T,
  /// next to its weight gradient).
  struct GemmCall {
    const Tensor& a;
    bool trans_a;
    const Tensor& b;
    bool trans_b;
    Tensor& c;
    Tensor* row_sums = nullptr;
  };
  /// One GemmCall (alpha 1, beta 0). The default is gemm, then reduce for the row sums; CUDA does
  /// both in one kernel for a narrow c (at most 16 rows: a classifier's weight gradient).
  virtual void gemm_row_sums(const GemmCall& call);
  /// c = (op(a) @ op(b)) * factor in one product whose epilogue multiplies before its one rounding
  /// (a GELU's stored derivative: linear_gelu_linear's backward). a, b, factor and c 2-D of one
  /// dtype, factor and c contiguous. False, doing nothing, where the device has no such product for
  /// these (the caller composes gemm and a multiply).
  virtual bool gemm_times(const Tensor& /*a*/, bool /*trans_a*/, const Tensor& /*b*/, bool /*trans_b*/,
                          const Tensor& /*factor*/, Tensor& /*c*/) {
    return false;
  }
  /// Whether gemm_times can run products of `dtype` here whose contiguous operands have rows of k
  /// (op(a) [m, k]) and n (op(b) [k, n], factor and c): asked before a forward stores what the
  /// backward's gemm_times reads, so that a layer gemm_times would decline keeps its usual tensors.
  virtual bool gemm_times_supported(DType /*dtype*/, int64_t /*k*/, int64_t /*n*/) const { return false; }
  /// Only the row sums of a GemmCall, by reduce.
  void sum_rows_of_a(const GemmCall& call);
  /// Two independent products (alpha 1, beta 0) that a backend may run at the same time: CUDA runs
  /// the second on a side stream (small GEMMs leave most of the GPU idle) and leaves it there: the
  /// compute stream waits for it only where its tensors are used next by the autograd engine, a copy
  /// to the host, cuda::synchronize or a free (core/cuda/side_stream.cpp); a direct caller reads
  /// the second's results after cuda::join_side_streams(). The default runs them in order. Used for
  /// the input and weight gradients of a linear layer.
  virtual void gemm_concurrent(const GemmCall& first, const GemmCall& second) {
    gemm_row_sums(first);
    gemm_row_sums(second);
  }
  /// c [M, N] = op(a) @ op(b) + bias [N] on every row, then max(., 0) when `relu`; 2-D only, c is
  /// overwritten. The default composes copy, gemm and unary (ops/matmul.cpp); CUDA puts the bias and
  /// the ReLU in the GEMM's epilogue, so the output is written once.
  virtual void gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                         Tensor& c);
  /// The backward of ReLU(linear) up to its GEMMs: grad_pre [M, N] = grad_out * (out > 0), and
  /// grad_bias [N] = grad_pre summed over the rows; `out` is the ReLU's output. One pass on CUDA.
  virtual void relu_bias_backward(const Tensor& grad_out, const Tensor& out, Tensor& grad_pre, Tensor& grad_bias);
  /// The gradients of ReLU(linear) whose input needs none (an MLP's first layer): grad_weight [N, K]
  /// = (grad_out * (out > 0))^T op(x) and, when given, grad_bias [N] = that masked gradient summed
  /// over the rows; grad_out and out [M, N], op(x) [M, K]. The default is relu_bias_backward, then
  /// gemm_row_sums; CUDA masks inside the product, in float32 over at most 64 rows.
  virtual void relu_weight_grad(const Tensor& grad_out, const Tensor& out, const Tensor& x, bool trans_x,
                                Tensor& grad_weight, Tensor* grad_bias);
  /// Two linear layers with a ReLU between (linear_relu_linear): hidden [M, H] = relu(op(x) @ op(w1)
  /// + b1), then out [M, N] = hidden @ op(w2) + b2; b2 may be undefined. The default is two
  /// gemm_bias; CUDA, where the first product is split along k and N <= 16, adds the slices, b1 and
  /// the ReLU and computes the second product in one kernel.
  virtual void linear_relu_linear(const Tensor& x, bool trans_x, const Tensor& w1, bool trans_w1, const Tensor& b1,
                                  const Tensor& w2, bool trans_w2, const Tensor& b2, Tensor& hidden, Tensor& out);
  /// Its backward up to the first layer's GEMMs: grad_pre [M, H] = (grad_out [M, N] @ op(w2)) *
  /// (hidden > 0) and grad_bias1 [H] = grad_pre summed over the rows; and, where `second` is given,
  /// the second layer's weight (and bias) gradient, which a backend may run beside, as
  /// gemm_concurrent's second. The default is gemm_concurrent, then relu_bias_backward; CUDA, for
  /// N <= 16 with `second` given, masks grad_out @ w2 in one kernel and makes the three bias and
  /// weight gradients in one pass beside it, on the side stream (joined as gemm_concurrent's second is).
  virtual void linear_relu_linear_backward(const Tensor& grad_out, const Tensor& w2, bool trans_w2,
                                           const Tensor& hidden, Tensor& grad_pre, Tensor& grad_bias1,
                                           const GemmCall* second);

  // ---- fused attention (ops/attention.cpp) ----
  // q [B, L, E], k [B, S, E], v [B, S, Ev] of one floating dtype, each 3-D or each 4-D [B1, B2, rows,
  // cols] (B = B1 B2: batch b1 B2 + b2) with the same batch dims; any strides but a unit last one, so
  // that [batch, heads] views of a packed projection are read in place. The CUDA kernels read rows
  // with 16-byte loads: an input whose start or strides are not multiples of 16 bytes is copied
  // first, and outputs (out, grad_q/k/v: the inputs' shapes, any strides, unit last) must have them.
  // logsumexp is float32 [B, L] or [B1, B2, L], contiguous. scores = scale * q k^T; with `causal`,
  // query i sees keys j <= i (PyTorch's top-left tril(ones(L, S))). No other mask: the op composes
  // masked attention.
  /// Whether this device has a fused kernel for this dtype, head sizes and dropout.
  virtual bool fused_attention_supports(DType dtype, int64_t e, int64_t ev, bool dropout) const {
    (void)dtype, (void)e, (void)ev, (void)dropout;
    return false;
  }
  /// out [B, L, Ev] = dropout(softmax(scores)) v without storing scores; logsumexp (float32 [B, L])
  /// = the log of each row's sum of exp(scores), saved for the backward (-inf for a row that sees
  /// no key). With dropout_p > 0 the kept mask comes from the default generator, and rng_state
  /// (int64 [3], CPU: Philox seed, offset, a graph's device state pointer or 0) records where, for the backward.
  /// Given keep_mask (a forward whose backward will run), a backend may also store the mask it drew
  /// there, in a layout of its own, for the backward to read instead of drawing it again; it stays
  /// undefined where the backend does not.
  virtual void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                 double dropout_p, Tensor& out, Tensor& logsumexp, Tensor& rng_state,
                                 Tensor* keep_mask) {
    (void)q, (void)k, (void)v, (void)scale, (void)causal, (void)dropout_p, (void)out, (void)logsumexp,
        (void)rng_state, (void)keep_mask;
    MINIDL_FAIL("attention_forward: this device has no fused attention kernel");
  }
  /// grad_q, grad_k, grad_v (overwritten, the shapes of q, k, v) from grad_out (out's shape, any
  /// strides but a unit last one), recomputing the probabilities from q, k and logsumexp, and the
  /// dropout mask from keep_mask where the forward stored one, else from rng_state.
  virtual void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& logsumexp, const Tensor& rng_state,
                                  const Tensor& keep_mask, double scale, bool causal, double dropout_p,
                                  Tensor& grad_q, Tensor& grad_k, Tensor& grad_v) {
    (void)grad_out, (void)q, (void)k, (void)v, (void)out, (void)logsumexp, (void)rng_state, (void)keep_mask,
        (void)scale, (void)causal, (void)dropout_p, (void)grad_q, (void)grad_k, (void)grad_v;
    MINIDL_FAIL("attention_backward: this device has no fused attention kernel");
  }

  /// Whether attention_backend() and the inputs (dtype, head size, layout, the device) let
  /// library_attention_forward run this call (it may still find no engine, and return false).
  virtual bool library_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p) const {
    (void)q, (void)k, (void)v, (void)dropout_p;
    return false;
  }
  /// A vendor library's fused attention (cuDNN's on CUDA, ops/cuda/cudnn_attention.cpp) for 16-bit
  /// inputs where attention_backend() (ops/backend_setting.h) allows it and the library has an
  /// engine for the call: the arguments of attention_forward without keep_mask. With dropout,
  /// seed_offset receives the device tensor the library drew its mask from (int64 [2, 2]: the Philox
  /// seed at [0][0], the offset at [1][0], each on 16 bytes; written on the device, so that a graph's
  /// replays differ), from which the backward draws it again. Returns false, having done nothing,
  /// otherwise.
  virtual bool library_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                         double dropout_p, Tensor& out, Tensor& logsumexp, Tensor& rng_state,
                                         Tensor& seed_offset) {
    (void)q, (void)k, (void)v, (void)scale, (void)causal, (void)dropout_p, (void)out, (void)logsumexp,
        (void)rng_state, (void)seed_offset;
    return false;
  }
  /// The backward of a call library_attention_forward ran, as attention_backward's.
  virtual void library_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& out, const Tensor& logsumexp, const Tensor& seed_offset,
                                          double scale, bool causal, double dropout_p, Tensor& grad_q, Tensor& grad_k,
                                          Tensor& grad_v) {
    (void)grad_out, (void)q, (void)k, (void)v, (void)out, (void)logsumexp, (void)seed_offset, (void)scale,
        (void)causal, (void)dropout_p, (void)grad_q, (void)grad_k, (void)grad_v;
    MINIDL_FAIL("library_attention_backward: this device ran no library attention forward");
  }

  // ---- softmax and losses (ops/softmax.cpp, ops/loss.cpp) ----
  /// (log-)softmax of x viewed as [outer, n, inner] over n.
  virtual void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out) = 0;
  /// grad_in from grad_out and the forward's output, same [outer, n, inner] view.
  virtual void softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t outer, int64_t n, int64_t inner,
                                bool log, Tensor& grad_in) = 0;
  // Class targets are int64 [N]; a row whose target is `ignore_index` counts for nothing, and any
  // other target outside [0, C) is an error.
  /// The NLL per row of log_probs [N, C]: row_loss [N] = -w[t] * log_probs[i, t] with t = target[i]
  /// and w = *weight [C] (ones when null), 0 on ignored rows; total_weight (0-d) = the sum of w[t]
  /// over the rows not ignored: the divisor of the mean.
  virtual void nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor* weight, int64_t ignore_index,
                        Tensor& row_loss, Tensor& total_weight) = 0;
  /// grad_log_probs [N, C] (overwritten) = -grad_rows[i] * w[t] at (i, t = target[i]), 0 elsewhere
  /// and on ignored rows; grad_rows [N].
  virtual void nll_loss_backward(const Tensor& grad_rows, const Tensor& target, const Tensor* weight,
                                 int64_t ignore_index, Tensor& grad_log_probs) = 0;
  /// Fused log_softmax + mean NLL over logits [N, C]: `count` (0-d) = the number of rows not ignored,
  /// loss (0-d) = -(sum of log_softmax[i, target[i]] over those rows) / count. With `grad_logits`, also
  /// the loss's gradient for a loss gradient of one, which the backward then reuses or scales:
  /// (softmax - one_hot(target)) / count on rows not ignored, 0 on ignored rows.
  /// 16-bit logits are computed in float32; loss and count are then float32 or of the logits' dtype,
  /// and so is grad_logits (autocast's loss reads 16-bit logits with no cast: ops/loss.cpp).
  virtual void cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Tensor& loss,
                             Tensor& count, Tensor* grad_logits) = 0;
  /// out = log(sigmoid(x)) = -(max(-x, 0) + log1p(exp(-|x|))): finite for every finite x. Contiguous.
  virtual void log_sigmoid(const Tensor& x, Tensor& out) = 0;
  /// grad_x = grad_out * sigmoid(-x); all of x's shape, contiguous.
  virtual void log_sigmoid_backward(const Tensor& grad_out, const Tensor& x, Tensor& grad_x) = 0;

  // ---- convolution and pooling (ops/conv2d.cpp, ops/max_pool2d.cpp) ----
  /// x [N, C, H, W] -> cols [N, C*kh*kw, out_h*out_w].
  virtual void im2col(const Tensor& x, const ConvGeometry& g, Tensor& cols) = 0;
  /// The adjoint of im2col: x_grad [N, C, H, W] (overwritten) = sum of cols back into image positions.
  virtual void col2im(const Tensor& cols, const ConvGeometry& g, Tensor& x_grad) = 0;
  /// out [N, C, out_h, out_w] and indices (int64, the argmax's flat position h*W+w in its plane).
  /// Padding counts as -infinity.
  virtual void max_pool2d(const Tensor& x, const ConvGeometry& g, Tensor& out, Tensor& indices) = 0;
  /// grad_in [N, C, H, W] (overwritten) gets each grad_out element added at its index.
  virtual void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const ConvGeometry& g,
                                   Tensor& grad_in) = 0;

  // ---- a convolution's epilogue, fused (ops/conv2d_relu.cpp) ----
  // x and y are [N, C, H, W] contiguous, bias [C] or null (no bias), grad_bias [C] or null.
  /// y = x + bias[c], then max(., 0) when `relu`; y may be x.
  virtual void conv_bias_act(const Tensor& x, const Tensor* bias, bool relu, Tensor& y) = 0;
  /// The backward of conv_bias_act with relu: grad_pre = grad_out * (y > 0), and grad_bias the sum
  /// of grad_pre over N, H and W.
  virtual void conv_bias_relu_backward(const Tensor& grad_out, const Tensor& y, Tensor& grad_pre,
                                       Tensor* grad_bias) = 0;
  /// out [N, C, H/k, W/k] = max(max over each k x k window (stride k) of (x + bias[c]), 0): the
  /// same values as max_pool2d(relu(x + bias)), read from x once.
  virtual void bias_relu_max_pool2d(const Tensor& x, const Tensor* bias, int64_t k, Tensor& out) = 0;
  /// Its backward: grad_pre [N, C, H, W] (overwritten) holds grad_out at the first maximum of each
  /// window where out > 0, as max_pool2d then relu would route it, and 0 elsewhere; grad_bias the sum
  /// of grad_pre over N, H and W.
  virtual void bias_relu_max_pool2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor* bias,
                                             const Tensor& out, int64_t k, Tensor& grad_pre, Tensor* grad_bias) = 0;

  /// conv2d_relu of x [N, 1, H, W] (one channel, contiguous) with weight [O, 1, kh, kw] and bias [O]
  /// (or null) into y [N, O, out_h, out_w] channels-last, in one pass, for bfloat16 and float16 on
  /// CUDA (ops/cuda/conv2d_direct.cu says where it applies and why). False, doing nothing, elsewhere.
  virtual bool conv2d_relu_direct(const Tensor& /*x*/, const Tensor& /*weight*/, const Tensor* /*bias*/,
                                  const ConvGeometry& /*g*/, Tensor& /*y*/) {
    return false;
  }
  /// Its weight and bias gradients (overwritten; grad_bias may be null) from grad_y and y, both
  /// channels-last, in x's dtype or both in float32 (master weights'); x's gradient is not made (a
  /// first layer's input needs none).
  virtual bool conv2d_relu_direct_backward(const Tensor& /*grad_y*/, const Tensor& /*y*/, const Tensor& /*x*/,
                                           const ConvGeometry& /*g*/, Tensor& /*grad_weight*/,
                                           Tensor* /*grad_bias*/) {
    return false;
  }

  // ---- average pooling and nearest resizing (ops/avg_pool2d.cpp, ops/upsample.cpp) ----
  /// out [N, C, out_h, out_w]: the mean of each window of x [N, C, H, W] (g has dilation 1). As in
  /// PyTorch, the divisor is the window clipped to the padded image when count_include_pad (a
  /// ceil_mode window hanging past the padding counts only its part inside), else the number of
  /// image elements in the window.
  virtual void avg_pool2d(const Tensor& x, const ConvGeometry& g, bool count_include_pad, Tensor& out) = 0;
  /// grad_in [N, C, H, W] (overwritten): each grad_out element divided as in the forward and added
  /// over its window.
  virtual void avg_pool2d_backward(const Tensor& grad_out, const ConvGeometry& g, bool count_include_pad,
                                   Tensor& grad_in) = 0;
  /// out [N, C, oh, ow] from x [N, C, H, W]: output row i averages input rows
  /// [floor(i * H / oh), ceil((i + 1) * H / oh)), and columns likewise (PyTorch's adaptive windows).
  virtual void adaptive_avg_pool2d(const Tensor& x, Tensor& out) = 0;
  /// grad_in [N, C, H, W] (overwritten) from grad_out [N, C, oh, ow].
  virtual void adaptive_avg_pool2d_backward(const Tensor& grad_out, Tensor& grad_in) = 0;
  /// out [N, C, oh, ow] and indices (int64 [N, C, oh, ow], the flat position h*W+w in its plane):
  /// the max of x [N, C, H, W] over adaptive_avg_pool2d's windows, the first maximum winning and a
  /// NaN over numbers (ops/adaptive_max_pool2d.cpp; its backward is index_add).
  virtual void adaptive_max_pool2d(const Tensor& x, Tensor& out, Tensor& indices) = 0;
  /// out [N, C, oh, ow]: row i of out reads row min(floor(i * scale_h), H - 1) of x [N, C, H, W],
  /// computed in float as PyTorch does; columns likewise.
  virtual void upsample_nearest2d(const Tensor& x, float scale_h, float scale_w, Tensor& out) = 0;
  /// grad_in [N, C, H, W] (overwritten): the sum of grad_out over the outputs that read each element.
  virtual void upsample_nearest2d_backward(const Tensor& grad_out, float scale_h, float scale_w, Tensor& grad_in) = 0;

  // ---- normalization (ops/normalization.cpp) ----
  // x is [N, C, L]; out has x's numel; weight and bias [C] may be null (1 and 0). Statistics are the
  // mean and invstd = 1 / sqrt(biased variance + eps), saved for the backward.
  /// Batch norm, statistics per channel over N and L. training: the batch's, written to save_mean
  /// and save_invstd [C], and running_mean / running_var [C] (when not null) updated in place to
  /// (1 - momentum) * running + momentum * stat, with the unbiased variance. Otherwise the running
  /// statistics (both given) are used and saved.
  virtual void batch_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, Tensor* running_mean,
                          Tensor* running_var, bool training, double momentum, double eps, Tensor& out,
                          Tensor& save_mean, Tensor& save_invstd) = 0;
  /// Gradients of batch_norm (each null output skipped; grad_x has x's numel, grad_weight and
  /// grad_bias [C]). training: the statistics were the batch's, so grad_x includes their gradient.
  virtual void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor* weight,
                                   const Tensor& save_mean, const Tensor& save_invstd, bool training,
                                   Tensor* grad_x, Tensor* grad_weight, Tensor* grad_bias) = 0;
  /// Group norm: statistics per sample and group of C / groups channels, over those channels and L,
  /// saved as save_mean, save_invstd [N, groups]. Layer norm is one group of L = 1.
  virtual void group_norm(const Tensor& x, int64_t groups, const Tensor* weight, const Tensor* bias, double eps,
                          Tensor& out, Tensor& save_mean, Tensor& save_invstd) = 0;
  /// Gradients of group_norm, as batch_norm_backward's.
  virtual void group_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t groups, const Tensor* weight,
                                   const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_x,
                                   Tensor* grad_weight, Tensor* grad_bias) = 0;
  /// dropout_add_layer_norm in one pass over rows of d = x.size(-1): sum = residual + dropout(x)
  /// (mask drawn as dropout() draws it; residual undefined: none) and out = the layer norm of sum in
  /// out's dtype; save_mean and save_invstd [rows] in sum's dtype. All contiguous. Where keep_prob < 1
  /// the kernel sets `mask` to the dropout mask in a layout of its own, which only its backward reads.
  /// Returns false, doing nothing, where the device has no kernel for these dtypes, d or alignment
  /// (the op then composes dropout, add and layer_norm).
  virtual bool dropout_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor* weight,
                                      const Tensor* bias, double keep_prob, double eps, Tensor& out, Tensor& sum,
                                      Tensor& mask, Tensor& save_mean, Tensor& save_invstd) {
    (void)x, (void)residual, (void)weight, (void)bias, (void)keep_prob, (void)eps, (void)out, (void)sum, (void)mask;
    (void)save_mean, (void)save_invstd;
    return false;
  }
  /// dropout_add_layer_norm of x = embedding_add's rows (table [Va, d] at ids [N], other_table [Vb, d]
  /// at other_ids [M], M dividing N) with no residual: a transformer's first seam, the embeddings'
  /// sum never written. Same outputs, mask and backward as dropout_add_layer_norm's; false where the
  /// device has no kernel (the op then runs embedding_sum and dropout_add_layer_norm).
  virtual bool embedding_dropout_layer_norm(const Tensor& table, const Tensor& ids, const Tensor& other_table,
                                            const Tensor& other_ids, const Tensor* weight, const Tensor* bias,
                                            double keep_prob, double eps, Tensor& out, Tensor& sum, Tensor& mask,
                                            Tensor& save_mean, Tensor& save_invstd) {
    (void)table, (void)ids, (void)other_table, (void)other_ids, (void)weight, (void)bias, (void)keep_prob, (void)eps;
    (void)out, (void)sum, (void)mask, (void)save_mean, (void)save_invstd;
    return false;
  }
  /// Its backward, after a forward that returned true: grad_residual = grad_sum + the layer norm's
  /// input gradient from grad_out (out's dtype), and grad_x = grad_residual through the dropout, in
  /// x's dtype.
  /// grad_sum (undefined where no gradient reached sum) and each output may be null.
  virtual void dropout_add_layer_norm_backward(const Tensor& grad_out, const Tensor* grad_sum, const Tensor& sum,
                                               const Tensor& save_mean, const Tensor& save_invstd,
                                               const Tensor* weight, const Tensor& mask, double keep_prob,
                                               Tensor* grad_x, Tensor* grad_residual, Tensor* grad_weight,
                                               Tensor* grad_bias) {
    (void)grad_out, (void)grad_sum, (void)sum, (void)save_mean, (void)save_invstd, (void)weight, (void)mask;
    (void)keep_prob, (void)grad_x, (void)grad_residual, (void)grad_weight, (void)grad_bias;
    MINIDL_FAIL("dropout_add_layer_norm_backward: this device has no fused kernel");
  }

  // ---- optional cuDNN path (ops/cuda/cudnn.cpp), taken when conv_backend() says Cudnn ----
  // Each returns false, doing nothing, where the device has no such path (the CPU, a build without
  // cuDNN); the op then falls back to the kernels above.
  /// The memory format conv2d_cudnn and its backward take x, weight, out and their gradients in, for
  /// a convolution of `dtype` (each laid out as is_contiguous(format) says).
  virtual MemoryFormat conv2d_cudnn_format(DType /*dtype*/) const { return MemoryFormat::Contiguous; }
  /// out [N, O, out_h, out_w] = x [N, C, H, W] cross-correlated with weight [O, C, kh, kw], plus
  /// bias [O] when not null.
  virtual bool conv2d_cudnn(const Tensor& /*x*/, const Tensor& /*weight*/, const Tensor* /*bias*/,
                            const ConvGeometry& /*g*/, Tensor& /*out*/) {
    return false;
  }
  /// Gradients of conv2d_cudnn; each output that is null is skipped. grad_x [N, C, H, W],
  /// grad_weight [O, C, kh, kw] and grad_bias [O] are overwritten; grad_weight may be in any layout
  /// and floating dtype (a contiguous float32 master weight's gradient). x is read only for
  /// grad_weight and weight only for grad_x: the other may be undefined.
  virtual bool conv2d_backward_cudnn(const Tensor& /*grad_out*/, const Tensor& /*x*/, const Tensor& /*weight*/,
                                     const ConvGeometry& /*g*/, Tensor* /*grad_x*/, Tensor* /*grad_weight*/,
                                     Tensor* /*grad_bias*/) {
    return false;
  }
  /// ConvBackend::Auto: true when cuDNN ran this convolution (forward, the weight's gradient and, with
  /// `input_grad`, the input's) faster than the im2col kernels; measured the first time a shape comes
  /// (outside graph capture) and cached, apart for the two values of `input_grad`.
  virtual bool conv2d_cudnn_is_faster(DType /*dtype*/, int64_t /*batch*/, int64_t /*out_channels*/,
                                      const ConvGeometry& /*g*/, bool /*input_grad*/) {
    return false;
  }
  /// out [N, C, out_h, out_w]: max over each window, padding counting as -infinity (no indices:
  /// the backward recomputes them from x and out).
  virtual bool max_pool2d_cudnn(const Tensor& /*x*/, const ConvGeometry& /*g*/, Tensor& /*out*/) { return false; }
  /// grad_in [N, C, H, W] (overwritten) from grad_out and the forward's x and out.
  virtual bool max_pool2d_backward_cudnn(const Tensor& /*grad_out*/, const Tensor& /*x*/, const Tensor& /*out*/,
                                         const ConvGeometry& /*g*/, Tensor& /*grad_in*/) {
    return false;
  }
  /// A multi-layer recurrent network as cuDNN runs it (ops/rnn.cpp, ops/cuda/cudnn_rnn.cpp).
  struct RnnConfig {
    int cell = 0;  // 0 relu RNN, 1 tanh RNN, 2 LSTM, 3 GRU (cuDNN's numbering)
    int64_t input_size = 0, hidden_size = 0, num_layers = 1, seq_len = 0, batch = 0;
    bool bidirectional = false, has_biases = true;
    bool training = false;  // keep what rnn_cudnn_backward needs in `state`
  };
  /// y [L, N, D*H], hy (and cy, LSTM only) [layers*D, N, H] from x [L, N, I], hx, cx (LSTM only,
  /// else undefined) and params in PyTorch's order, all contiguous. With c.training, `state` gets
  /// what the backward reads (the packed weights, cuDNN's reserve). False, doing nothing, where cuDNN
  /// cannot run it (no cuDNN, its refusal of the configuration or dtype).
  virtual bool rnn_cudnn(const RnnConfig& /*c*/, const Tensor& /*x*/, const Tensor& /*hx*/, const Tensor& /*cx*/,
                         const std::vector<Tensor>& /*params*/, Tensor& /*y*/, Tensor& /*hy*/, Tensor& /*cy*/,
                         std::vector<Tensor>& /*state*/) {
    return false;
  }
  /// Gradients of rnn_cudnn from dy, dhy, dcy (the last two may be undefined: zero): dx, dhx, dcx
  /// (LSTM) and, when `weight_grads`, one gradient per param, all allocated here.
  virtual bool rnn_cudnn_backward(const RnnConfig& /*c*/, const Tensor& /*x*/, const Tensor& /*hx*/,
                                  const Tensor& /*cx*/, const Tensor& /*y*/, const Tensor& /*dy*/,
                                  const Tensor& /*dhy*/, const Tensor& /*dcy*/, const std::vector<Tensor>& /*params*/,
                                  const std::vector<Tensor>& /*state*/, bool /*weight_grads*/, Tensor& /*dx*/,
                                  Tensor& /*dhx*/, Tensor& /*dcx*/, std::vector<Tensor>& /*dparams*/) {
    return false;
  }

  // ---- optional oneDNN path on the CPU (ops/cpu/onednn_conv.cpp), for float32 ----
  // Each returns false, doing nothing, where there is no such path (CUDA, a build without oneDNN,
  // another dtype); the op then takes the im2col kernels. The results do not depend on the thread
  // count (the file says how).
  /// out [N, O, out_h, out_w] = x [N, C, H, W] cross-correlated with weight [O, C, kh, kw], no bias.
  virtual bool conv2d_onednn(const Tensor& /*x*/, const Tensor& /*weight*/, const ConvGeometry& /*g*/,
                             Tensor& /*out*/) {
    return false;
  }
  /// grad_x [N, C, H, W] (overwritten) of conv2d_onednn, from grad_out [N, O, out_h, out_w].
  virtual bool conv2d_backward_data_onednn(const Tensor& /*grad_out*/, const Tensor& /*weight*/,
                                           const ConvGeometry& /*g*/, Tensor& /*grad_x*/) {
    return false;
  }
  /// grad_weight [O, C, kh, kw] (overwritten) of conv2d_onednn, from grad_out and the input x.
  virtual bool conv2d_backward_weights_onednn(const Tensor& /*grad_out*/, const Tensor& /*x*/,
                                              const ConvGeometry& /*g*/, Tensor& /*grad_weight*/) {
    return false;
  }

  // ---- mixed precision: GradScaler's device passes (ops/amp.cpp) ----
  /// Every tensor of `grads` (floating, any mix of dtypes) multiplied by *inv_scale in place, and
  /// found_inf set to 1 where any value is inf or NaN (never reset to 0): one pass over all of them.
  /// found_inf and inv_scale are 0-d float32 tensors on the grads' device.
  virtual void amp_non_finite_check_and_unscale(std::vector<Tensor>& grads, Tensor& found_inf,
                                                const Tensor& inv_scale) = 0;
  /// torch._amp_update_scale_: if *found_inf, scale *= backoff and tracker = 0; else tracker += 1,
  /// and when it reaches growth_interval, scale *= growth and tracker = 0. scale and found_inf are
  /// 0-d float32, growth_tracker 0-d int32, all on one device.
  virtual void amp_update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                                double backoff_factor, int64_t growth_interval) = 0;
  /// dst[i] = src[i] converted, for float32 sources and 16-bit destinations of their shapes, all
  /// contiguous: autocast's low-precision copies of the master weights refreshed in one pass
  /// (ops/autocast_masters.cpp; one launch on CUDA).
  virtual void copy_multi(const std::vector<Tensor>& src, std::vector<Tensor>& dst) {
    for (size_t i = 0; i < src.size(); ++i) copy(src[i], dst[i]);
  }

  // ---- optimizer updates, in place (optim/) ----
  /// One SGD step on `param`; `momentum_buf` is null when momentum == 0.
  virtual void sgd_step(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& config) = 0;
  /// One SGD step on several parameters of one dtype at once: `momentum_bufs` is empty when
  /// momentum == 0, else one per parameter. The CUDA kernels update them all in one launch.
  virtual void sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                              std::vector<Tensor>& momentum_bufs, const SgdConfig& config) {
    for (size_t i = 0; i < params.size(); ++i) {
      sgd_step(params[i], grads[i], momentum_bufs.empty() ? nullptr : &momentum_bufs[i], config);
      if (!config.copies || !(*config.copies)[i].defined()) continue;
      Tensor copy_of_param = (*config.copies)[i];  // a handle on the same memory
      copy(params[i], copy_of_param);
    }
  }
  virtual void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                         const AdamConfig& config) = 0;
  /// One Adam(W) step on several parameters at once with no host sync (CUDA: a few launches for
  /// all): each step count advances by one, then gives the bias corrections. The CPU steps through
  /// adam_step instead.
  virtual void adam_step_multi(AdamTensorLists& /*tensors*/, const AdamMultiConfig& /*config*/) {
    MINIDL_FAIL("adam_step_multi: this device has no multi-tensor Adam kernel (the CPU uses adam_step)");
  }
  /// clip_grad_norm_'s 2-norm pass over gradients of one device and dtype, with no host sync:
  /// total_norm (0-d, their dtype) = the 2-norm of all of them, then each is scaled in place by
  /// min(1, max_norm / (total_norm + 1e-6)). False where the device has no such pass (the caller
  /// composes elementwise ops and reductions instead).
  virtual bool clip_grad_norm_multi(std::vector<Tensor>& /*grads*/, double /*max_norm*/, Tensor& /*total_norm*/) {
    return false;
  }
};

/// The kernels of `device`'s type. Throws a clear error for CUDA when minidl has no CUDA backend.
Kernels& kernels_for(Device device);

/// Checks that every tensor is on `device`; the message names the op and both devices.
void check_same_device(const char* op, std::initializer_list<Tensor> tensors);

}  // namespace minidl
