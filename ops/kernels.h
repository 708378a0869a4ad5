#pragma once
// The kernel interface: the small set of device primitives every op is built from. Each device
// type implements it once (ops/cpu/ on Eigen + OpenMP, ops/cuda/ on cuBLAS, cuDNN, CUB and our
// .cu kernels). Ops allocate outputs and call kernels_for(device); they never branch on the device.
//
// Conventions: tensors passed as outputs are allocated by the caller, contiguous, on the same
// device and of the same dtype as the inputs unless a comment says otherwise. Inputs are
// contiguous unless a comment says "any strides".
#include <cstdint>

#include "core/tensor.h"

namespace minidl {

enum class UnaryOp { Neg, Exp, Log, Sqrt, Relu, Sigmoid, Tanh };

enum class BinaryOp {
  Add, Sub, Mul, Div, Pow,
  Eq,               // 1 where a == b else 0; also for int64
  ReluBackward,     // a = grad, b = input:  a * (b > 0)
  SigmoidBackward,  // a = grad, b = output: a * b * (1 - b)
  TanhBackward,     // a = grad, b = output: a * (1 - b * b)
};

enum class ReduceOp { Sum, Max };

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
};

struct AdamConfig {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW
  int64_t step;                 // 1 on the first step
};

class Kernels {
 public:
  virtual ~Kernels() = default;

  // ---- memory (ops/copy.cpp, ops/creation.cpp) ----
  /// dst = src elementwise; same shape, any strides for both, dtypes may differ (converting).
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& dst, double value) = 0;
  /// out[i] = src[index[i]] along dim 0; index is int64 [K], out is [K, ...src.shape[1:]].
  virtual void index_select(const Tensor& src, const Tensor& index, Tensor& out) = 0;

  // ---- random, from the default generator (ops/creation.cpp, ops/dropout.cpp) ----
  virtual void uniform(Tensor& dst, double low, double high) = 0;
  virtual void normal(Tensor& dst, double mean, double stddev) = 0;
  /// 1/keep_prob with probability keep_prob, else 0: an inverted-dropout mask.
  virtual void dropout_mask(Tensor& dst, double keep_prob) = 0;

  // ---- elementwise (ops/elementwise.cpp) ----
  /// Inputs have out's shape with any strides (0 on broadcast axes). `out` may be `x` or `a`.
  virtual void unary(UnaryOp op, const Tensor& x, Tensor& out) = 0;
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) = 0;

  // ---- reductions (ops/reduce.cpp) ----
  /// x viewed as [outer, n, inner] is reduced over n into out [outer, inner]. For Max, `argmax`
  /// (int64, [outer, inner]) receives the index of the first maximum when not null.
  virtual void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out,
                      Tensor* argmax) = 0;

  // ---- matrix products (ops/matmul.cpp) ----
  /// c = alpha * op(a) @ op(b) + beta * c, row-major. c is [M, N] or [B, M, N]; a is [M, K] (or
  /// [K, M] when trans_a), b is [K, N] (or [N, K] when trans_b), each 2-D or batched [B, ...]; a 2-D
  /// operand is shared by every batch.
  virtual void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
                    double beta) = 0;
  /// One product of gemm_concurrent: c = op(a) @ op(b).
  struct GemmCall {
    const Tensor& a;
    bool trans_a;
    const Tensor& b;
    bool trans_b;
    Tensor& c;
  };
  /// Two independent products (alpha 1, beta 0) that a backend may run at the same time: CUDA runs
  /// the second on a side stream (small GEMMs leave most of the GPU idle). The default runs them in
  /// order. Used for the input and weight gradients of a linear layer.
  virtual void gemm_concurrent(const GemmCall& first, const GemmCall& second) {
    gemm(first.a, first.trans_a, first.b, first.trans_b, first.c, 1, 0);
    gemm(second.a, second.trans_a, second.b, second.trans_b, second.c, 1, 0);
  }
  /// c [M, N] = op(a) @ op(b) + bias [N] on every row, then max(., 0) when `relu`; 2-D only, c is
  /// overwritten. The default composes copy, gemm and unary (ops/matmul.cpp); CUDA puts the bias and
  /// the ReLU in the GEMM's epilogue, so the output is written once.
  virtual void gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                         Tensor& c);
  /// The backward of ReLU(linear) up to its GEMMs: grad_pre [M, N] = grad_out * (out > 0), and
  /// grad_bias [N] = grad_pre summed over the rows; `out` is the ReLU's output. One pass on CUDA.
  virtual void relu_bias_backward(const Tensor& grad_out, const Tensor& out, Tensor& grad_pre, Tensor& grad_bias);

  // ---- softmax and losses (ops/softmax.cpp, ops/loss.cpp) ----
  /// (log-)softmax of x viewed as [outer, n, inner] over n.
  virtual void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out) = 0;
  /// grad_in from grad_out and the forward's output, same [outer, n, inner] view.
  virtual void softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t outer, int64_t n, int64_t inner,
                                bool log, Tensor& grad_in) = 0;
  /// loss (0-d) = -mean_i log_probs[i, target[i]]; log_probs [N, C], target int64 [N].
  virtual void nll_loss(const Tensor& log_probs, const Tensor& target, Tensor& loss) = 0;
  /// grad_log_probs [N, C] = -grad_loss / N at (i, target[i]), 0 elsewhere; grad_loss is 0-d.
  virtual void nll_loss_backward(const Tensor& grad_loss, const Tensor& target, Tensor& grad_log_probs) = 0;
  /// Fused log_softmax + nll_loss over logits [N, C]: writes the 0-d loss and the log-probs it saves.
  virtual void cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss, Tensor& log_probs) = 0;
  /// grad_logits = (softmax - one_hot(target)) * grad_loss / N.
  virtual void cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs, const Tensor& target,
                                      Tensor& grad_logits) = 0;

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

  // ---- optional cuDNN path (ops/cuda/cudnn.cpp), taken when conv_backend() says Cudnn ----
  // Each returns false, doing nothing, where the device has no such path (the CPU, a build without
  // cuDNN); the op then falls back to the kernels above.
  /// out [N, O, out_h, out_w] = x [N, C, H, W] cross-correlated with weight [O, C, kh, kw], plus
  /// bias [O] when not null.
  virtual bool conv2d_cudnn(const Tensor& /*x*/, const Tensor& /*weight*/, const Tensor* /*bias*/,
                            const ConvGeometry& /*g*/, Tensor& /*out*/) {
    return false;
  }
  /// Gradients of conv2d_cudnn; each output that is null is skipped. grad_x [N, C, H, W],
  /// grad_weight [O, C, kh, kw] and grad_bias [O] are overwritten. x is read only for grad_weight and
  /// weight only for grad_x: the other may be undefined.
  virtual bool conv2d_backward_cudnn(const Tensor& /*grad_out*/, const Tensor& /*x*/, const Tensor& /*weight*/,
                                     const ConvGeometry& /*g*/, Tensor* /*grad_x*/, Tensor* /*grad_weight*/,
                                     Tensor* /*grad_bias*/) {
    return false;
  }
  /// ConvBackend::Auto: true when cuDNN ran this convolution (forward and both gradients) faster than
  /// the im2col kernels; measured the first time a shape comes (outside graph capture) and cached.
  virtual bool conv2d_cudnn_is_faster(DType /*dtype*/, int64_t /*batch*/, int64_t /*out_channels*/,
                                      const ConvGeometry& /*g*/) {
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

  // ---- optimizer updates, in place (optim/) ----
  /// One SGD step on `param`; `momentum_buf` is null when momentum == 0.
  virtual void sgd_step(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& config) = 0;
  /// One SGD step on several parameters of one dtype at once: `momentum_bufs` is empty when
  /// momentum == 0, else one per parameter. The CUDA kernels update them all in one launch.
  virtual void sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                              std::vector<Tensor>& momentum_bufs, const SgdConfig& config) {
    for (size_t i = 0; i < params.size(); ++i)
      sgd_step(params[i], grads[i], momentum_bufs.empty() ? nullptr : &momentum_bufs[i], config);
  }
  virtual void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                         const AdamConfig& config) = 0;
};

/// The kernels of `device`'s type. Throws a clear error for CUDA when minidl has no CUDA backend.
Kernels& kernels_for(Device device);

/// Checks that every tensor is on `device`; the message names the op and both devices.
void check_same_device(const char* op, std::initializer_list<Tensor> tensors);

}  // namespace minidl
