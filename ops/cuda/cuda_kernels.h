#pragma once
// The CUDA backend: one instance per device. Every method runs on that device's compute stream
// (core/cuda/context.h) and returns without waiting for the GPU. Its methods are defined in the file
// of ops/cuda/ named after the op that uses them, like ops/cpu/.
#include <cuda_runtime_api.h>

#include "core/cuda/context.h"
#include "ops/kernels.h"

namespace minidl {

class CudaKernels final : public Kernels {
 public:
  explicit CudaKernels(int device);
  /// The kernels of `device` queued on `stream` instead of its compute stream: work that follows
  /// side-stream work in order (ops/cuda/cudnn.cpp).
  CudaKernels(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& dst, double value) override;
  void fill_scalars(const std::vector<Tensor*>& dsts, const std::vector<double>& values) override;
  void arange(Tensor& dst, double start, double step) override;
  void index_select(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) override;
  void index_add(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst) override;
  void embedding_backward(const Tensor& grad, const Tensor& ids, const Tensor& plan, int64_t padding_idx,
                          bool scale_grad_by_freq, Tensor& grad_weight) override;
  Tensor embedding_backward_plan(const Tensor& ids, int64_t rows) override;
  bool embedding_add(const Tensor& a, const Tensor& ids_a, const Tensor& b, const Tensor& ids_b, Tensor& out) override;
  void gather(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) override;
  void scatter(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, bool accumulate) override;
  void scatter_reduce(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst, ScanOp op) override;
  Tensor nonzero(const Tensor& x) override;
  void compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) override;
  void uniform(Tensor& dst, double low, double high) override;
  void normal(Tensor& dst, double mean, double stddev) override;
  void dropout(const Tensor& x, double keep_prob, Tensor& out, Tensor& mask) override;
  void dropout_backward(const Tensor& grad_out, const Tensor& mask, double keep_prob, Tensor& grad_in) override;
  void unary(UnaryOp op, const Tensor& x, Tensor& out, double scalar = 0) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, double scalar = 0) override;
  Tensor add_widening(const Tensor& wide, const Tensor& narrow) override;
  void gelu_backward_with_output(bool tanh, const Tensor& input, Tensor& grad, Tensor& output) override;
  void gelu_with_derivative(bool tanh, const Tensor& input, Tensor& output, Tensor& derivative) override;
  void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out,
              Tensor* argmax) override;
  void scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, Tensor& out) override;
  void cumprod_backward(const Tensor& x, const Tensor& grad_out, int64_t outer, int64_t n, int64_t inner,
                        Tensor& grad_in) override;
  void sort(const Tensor& x, int64_t rows, int64_t n, bool descending, Tensor& values, Tensor& indices) override;
  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
            double beta) override;
  void gemm_concurrent(const GemmCall& first, const GemmCall& second) override;
  void gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                 Tensor& c) override;
  void relu_bias_backward(const Tensor& grad_out, const Tensor& out, Tensor& grad_pre, Tensor& grad_bias) override;
  void relu_weight_grad(const Tensor& grad_out, const Tensor& out, const Tensor& x, bool trans_x, Tensor& grad_weight,
                        Tensor* grad_bias) override;
  void linear_relu_linear(const Tensor& x, bool trans_x, const Tensor& w1, bool trans_w1, const Tensor& b1,
                          const Tensor& w2, bool trans_w2, const Tensor& b2, Tensor& hidden, Tensor& out) override;
  void linear_relu_linear_backward(const Tensor& grad_out, const Tensor& w2, bool trans_w2, const Tensor& hidden,
                                   Tensor& grad_pre, Tensor& grad_bias1, const GemmCall* second) override;
  void gemm_row_sums(const GemmCall& call) override;
  bool fused_attention_supports(DType dtype, int64_t e, int64_t ev, bool dropout) const override;
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                         double dropout_p, Tensor& out, Tensor& logsumexp, Tensor& rng_state,
                         Tensor* keep_mask) override;
  void attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& logsumexp, const Tensor& rng_state, const Tensor& keep_mask, double scale,
                          bool causal, double dropout_p, Tensor& grad_q, Tensor& grad_k, Tensor& grad_v) override;
  void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log, Tensor& out) override;
  void softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool log,
                        Tensor& grad_in) override;
  void nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor* weight, int64_t ignore_index,
                Tensor& row_loss, Tensor& total_weight) override;
  void nll_loss_backward(const Tensor& grad_rows, const Tensor& target, const Tensor* weight, int64_t ignore_index,
                         Tensor& grad_log_probs) override;
  void cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Tensor& loss, Tensor& count,
                     Tensor* grad_logits) override;
  void log_sigmoid(const Tensor& x, Tensor& out) override;
  void log_sigmoid_backward(const Tensor& grad_out, const Tensor& x, Tensor& grad_x) override;
  void im2col(const Tensor& x, const ConvGeometry& g, Tensor& cols) override;
  void col2im(const Tensor& cols, const ConvGeometry& g, Tensor& x_grad) override;
  void max_pool2d(const Tensor& x, const ConvGeometry& g, Tensor& out, Tensor& indices) override;
  void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const ConvGeometry& g,
                           Tensor& grad_in) override;
  void conv_bias_act(const Tensor& x, const Tensor* bias, bool relu, Tensor& y) override;
  void conv_bias_relu_backward(const Tensor& grad_out, const Tensor& y, Tensor& grad_pre, Tensor* grad_bias) override;
  void bias_relu_max_pool2d(const Tensor& x, const Tensor* bias, int64_t k, Tensor& out) override;
  bool conv2d_relu_direct(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvGeometry& g,
                          Tensor& y) override;  // ops/cuda/conv2d_direct.cu
  bool conv2d_relu_direct_backward(const Tensor& grad_y, const Tensor& y, const Tensor& x, const ConvGeometry& g,
                                   Tensor& grad_weight, Tensor* grad_bias) override;
  /// The filter of conv2d's input gradient run as a forward convolution (stride 1): flipped [C, K, R,
  /// S] = weight [K, C, R, S] with its channel axes swapped and its window turned half a turn,
  /// flipped[c][k][r][s] = weight[k][c][R-1-r][S-1-s]; weight in any layout, flipped contiguous or
  /// channels-last (ops/cuda/conv2d_flip_filter.cu).
  void conv2d_flip_filter(const Tensor& weight, Tensor& flipped);
  /// conv2d of a 3 x 3 filter at stride 1 in strict float32, NCHW, by Winograd's F(2 x 2, 3 x 3)
  /// (ops/cuda/conv2d_winograd.cu): y = x * weight [K, C, 3, 3] + bias, padded by pad_h x pad_w; with
  /// `input_gradient`, x is an output gradient and weight is read flipped with its channel axes
  /// swapped, so that y is the input gradient of the convolution by `weight` (pad_h = 2 - its pad).
  static bool conv2d_winograd_applies(DType dtype, int64_t batch, int64_t out_channels, const ConvGeometry& g);
  void conv2d_winograd(const Tensor& x, const Tensor& weight, const Tensor* bias, int64_t pad_h, int64_t pad_w,
                       bool input_gradient, Tensor& y);
  /// conv2d's weight gradient where conv2d_winograd_applies, by Winograd's F(3 x 3, 2 x 2), from
  /// contiguous float32 x and grad_out into contiguous float32 grad_weight [K, C, 3, 3]
  /// (ops/cuda/conv2d_winograd_weight_grad.cu); `workspace` holds
  /// conv2d_winograd_weight_grad_workspace bytes (asked with the same `wave_share`: the part of a
  /// wave of blocks it takes, less than 1 where another kernel runs at the same time).
  size_t conv2d_winograd_weight_grad_workspace(int64_t batch, int64_t out_channels, const ConvGeometry& g,
                                               double wave_share = 1) const;
  void conv2d_winograd_weight_grad(const Tensor& x, const Tensor& grad_out, const ConvGeometry& g,
                                   Tensor& grad_weight, void* workspace, double wave_share = 1);
  /// The wave shares beside the input gradient: cuDNN's, or minidl's Winograd kernel (measured,
  /// ops/cuda/conv2d_winograd_weight_grad.cu).
  static constexpr double kWinogradWeightGradBesideCudnn = 0.5, kWinogradWeightGradBesideWinograd = 0.375;
  /// conv2d's weight gradient on TF32 tensor cores from channels-last float32 x and grad_out, into
  /// grad_weight of any floating dtype, contiguous or channels-last (ops/cuda/conv2d_weight_grad_tf32.cu);
  /// `workspace` holds conv2d_weight_grad_tf32_workspace bytes (asked with the same `beside`). Takes
  /// the geometries _applies says. `beside`: another kernel (the input gradient) runs at the same
  /// time, and this one takes half the GPU's blocks, leaving it the rest.
  static bool conv2d_weight_grad_tf32_applies(DType dtype, int64_t batch, int64_t out_channels, const ConvGeometry& g);
  size_t conv2d_weight_grad_tf32_workspace(int64_t batch, int64_t out_channels, const ConvGeometry& g,
                                           bool beside = false) const;
  void conv2d_weight_grad_tf32(const Tensor& x, const Tensor& grad_out, const ConvGeometry& g, Tensor& grad_weight,
                               void* workspace, bool beside = false);
  void bias_relu_max_pool2d_backward(const Tensor& grad_out, const Tensor& x, const Tensor* bias, const Tensor& out,
                                     int64_t k, Tensor& grad_pre, Tensor* grad_bias) override;
  void avg_pool2d(const Tensor& x, const ConvGeometry& g, bool count_include_pad, Tensor& out) override;
  void avg_pool2d_backward(const Tensor& grad_out, const ConvGeometry& g, bool count_include_pad,
                           Tensor& grad_in) override;
  void adaptive_avg_pool2d(const Tensor& x, Tensor& out) override;
  void adaptive_avg_pool2d_backward(const Tensor& grad_out, Tensor& grad_in) override;
  void adaptive_max_pool2d(const Tensor& x, Tensor& out, Tensor& indices) override;
  void upsample_nearest2d(const Tensor& x, float scale_h, float scale_w, Tensor& out) override;
  void upsample_nearest2d_backward(const Tensor& grad_out, float scale_h, float scale_w, Tensor& grad_in) override;
  void batch_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, Tensor* running_mean, Tensor* running_var,
                  bool training, double momentum, double eps, Tensor& out, Tensor& save_mean,
                  Tensor& save_invstd) override;
  void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor* weight, const Tensor& save_mean,
                           const Tensor& save_invstd, bool training, Tensor* grad_x, Tensor* grad_weight,
                           Tensor* grad_bias) override;
  void group_norm(const Tensor& x, int64_t groups, const Tensor* weight, const Tensor* bias, double eps, Tensor& out,
                  Tensor& save_mean, Tensor& save_invstd) override;
  void group_norm_backward(const Tensor& grad_out, const Tensor& x, int64_t groups, const Tensor* weight,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor* grad_x, Tensor* grad_weight,
                           Tensor* grad_bias) override;
  bool dropout_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor* weight, const Tensor* bias,
                              double keep_prob, double eps, Tensor& out, Tensor& sum, Tensor& mask, Tensor& save_mean,
                              Tensor& save_invstd) override;
  bool embedding_dropout_layer_norm(const Tensor& table, const Tensor& ids, const Tensor& other_table,
                                    const Tensor& other_ids, const Tensor* weight, const Tensor* bias, double keep_prob,
                                    double eps, Tensor& out, Tensor& sum, Tensor& mask, Tensor& save_mean,
                                    Tensor& save_invstd) override;
  void dropout_add_layer_norm_backward(const Tensor& grad_out, const Tensor* grad_sum, const Tensor& sum,
                                       const Tensor& save_mean, const Tensor& save_invstd, const Tensor* weight,
                                       const Tensor& mask, double keep_prob, Tensor* grad_x, Tensor* grad_residual,
                                       Tensor* grad_weight, Tensor* grad_bias) override;
  void amp_non_finite_check_and_unscale(std::vector<Tensor>& grads, Tensor& found_inf, const Tensor& inv_scale) override;
  void amp_update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                        double backoff_factor, int64_t growth_interval) override;
  void copy_multi(const std::vector<Tensor>& src, std::vector<Tensor>& dst) override;
  void sgd_step(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& config) override;
  void sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& momentum_bufs,
                      const SgdConfig& config) override;
  void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 const AdamConfig& config) override;
  void adam_step_multi(AdamTensorLists& tensors, const AdamMultiConfig& config) override;  // ops/cuda/adam.cu
  bool clip_grad_norm_multi(std::vector<Tensor>& grads, double max_norm, Tensor& total_norm) override;  // grad_norm.cu

#ifdef MINIDL_WITH_CUDNN
  MemoryFormat conv2d_cudnn_format(DType dtype) const override;
  bool conv2d_cudnn(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvGeometry& g,
                    Tensor& out) override;
  bool conv2d_backward_cudnn(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const ConvGeometry& g,
                             Tensor* grad_x, Tensor* grad_weight, Tensor* grad_bias) override;
  bool conv2d_cudnn_is_faster(DType dtype, int64_t batch, int64_t out_channels, const ConvGeometry& g,
                              bool input_grad) override;
  bool max_pool2d_cudnn(const Tensor& x, const ConvGeometry& g, Tensor& out) override;
  bool max_pool2d_backward_cudnn(const Tensor& grad_out, const Tensor& x, const Tensor& out, const ConvGeometry& g,
                                 Tensor& grad_in) override;
  bool rnn_cudnn(const RnnConfig& c, const Tensor& x, const Tensor& hx, const Tensor& cx,
                 const std::vector<Tensor>& params, Tensor& y, Tensor& hy, Tensor& cy,
                 std::vector<Tensor>& state) override;
  // A product times a tensor in cuDNN's epilogue (ops/cuda/cudnn_matmul.cpp).
  bool gemm_times(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& factor,
                  Tensor& c) override;
  bool gemm_times_supported(DType dtype, int64_t k, int64_t n) const override;
  // cuDNN's fused attention (ops/cuda/cudnn_attention.cpp).
  bool library_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                 double dropout_p, Tensor& out, Tensor& logsumexp, Tensor& rng_state,
                                 Tensor& seed_offset) override;
  void library_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& logsumexp, const Tensor& seed_offset, double scale,
                                  bool causal, double dropout_p, Tensor& grad_q, Tensor& grad_k,
                                  Tensor& grad_v) override;
  bool library_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v,
                                  double dropout_p) const override;
  bool rnn_cudnn_backward(const RnnConfig& c, const Tensor& x, const Tensor& hx, const Tensor& cx, const Tensor& y,
                          const Tensor& dy, const Tensor& dhy, const Tensor& dcy, const std::vector<Tensor>& params,
                          const std::vector<Tensor>& state, bool weight_grads, Tensor& dx, Tensor& dhx, Tensor& dcx,
                          std::vector<Tensor>& dparams) override;
#endif

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  /// dst [R, C] (contiguous) = src [r, c] (any row stride, columns back to back, dst's dtype) in its
  /// top-left corner, zeros elsewhere; where src is the larger, its top-left [R, C]. A warp a row, for
  /// the padded copies around a product whose rows are not 16 bytes long (ops/cuda/matmul.cpp): on an
  /// H200, cropping a GPT's [16384, 113] logits took 8.9 us as a strided copy, one element a thread,
  /// and takes about 5 here; padding their gradient took a fill and 8.8 us. False, doing nothing, where
  /// the layouts differ from these.
  bool copy_rows(const Tensor& src, Tensor& dst);

  /// A 16-bit operand copied with its rows padded for the tensor cores (ops/cuda/matmul.cpp). The
  /// two products gemm_concurrent runs often pad the same one (a language model head's output
  /// gradient, for g @ w and for g^T @ x): the first's copy then serves the second.
  struct PaddedCopy {
    Tensor source, padded;
  };

 private:
  // conv_bias_relu_backward over channels-last tensors (ops/cuda/conv2d_relu.cu).
  void conv_bias_relu_backward_channels_last(const Tensor& grad_out, const Tensor& y, Tensor& grad_pre,
                                             Tensor* grad_bias);
  // A 2-D float32 product on cuBLASLt on `stream` (max_blocks: see cuda::lt_matmul); false where that
  // path does not apply.
  bool gemm_lt(cudaStream_t stream, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
               double alpha, double beta, int64_t max_blocks = 0);
  // Whether gemm_lt of this product with max_blocks has been timed and keeps to it
  // (cuda::lt_keeps_within).
  bool gemm_lt_keeps_within(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                            int64_t max_blocks) const;
  // gemm_bias for a product with few output tiles and a long k: split along k into `slices`, which
  // gemm_bias_slices picks (1: no split; ops/cuda/matmul.cpp). Float32, contiguous a and b.
  void gemm_bias_split_k(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                         Tensor& c, int64_t slices);
  // Its batched product: the slices' partial products [slices, m, n], before their sum.
  Tensor split_k_parts(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, int64_t m, int64_t n,
                       int64_t slices);
  // gemm_bias on cuBLASLt, the bias and ReLU in the epilogue; false where it has no algorithm.
  bool gemm_bias_lt(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                    Tensor& c);
  int64_t gemm_bias_slices(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu,
                           Tensor& c);
  // c [m, n] = act(sum over s of parts[s] + bias), parts [S, m, n]: the end of gemm_bias_split_k
  // (ops/cuda/linear.cu).
  void sum_slices_bias(const Tensor& parts, const Tensor& bias, bool relu, Tensor& c);

  // The products of a linear layer with at most 16 output features (ops/cuda/linear_narrow.cu);
  // each returns false, doing nothing, where its layout does not apply.
  // c [M, N <= 16] = x [M, K] w [N, K]^T + bias (when defined), then ReLU.
  bool narrow_linear(const Tensor& x, const Tensor& w, const Tensor& bias, bool relu, Tensor& c);
  // The same after a layer split along k and its ReLU: x [M, K] = relu(sum over s of parts[s] +
  // x_bias) is written on the way (linear_relu_linear).
  bool narrow_linear_from_slices(const Tensor& parts, const Tensor& x_bias, Tensor& x, const Tensor& w,
                                 const Tensor& bias, Tensor& c);
  // c [M, N] = alpha a [M, K <= 16] b [K, N] + beta c; with mask_by [M, N] defined, c = a b where
  // mask_by > 0, else 0 (alpha and beta unused).
  bool small_k_gemm(const Tensor& a, const Tensor& b, Tensor& c, double alpha, double beta,
                    const Tensor& mask_by = Tensor());
  // c [M <= 16, N] = a [K, M]^T b [K, N] and, when row_sums is given, row_sums [M] = a summed over
  // K, on `stream`. With relu_bias_grad, b is a ReLU's output that relu_next_w [M, N] multiplies,
  // and relu_bias_grad [N] = ((a relu_next_w) * (b > 0)) summed over K.
  bool narrow_weight_grad(cudaStream_t stream, const Tensor& a, const Tensor& b, Tensor& c, Tensor* row_sums,
                          const Tensor& relu_next_w = Tensor(), Tensor* relu_bias_grad = nullptr);
  // float32 c [M <= 64, N] = a [M, K] op(b) (+ bias [N] where defined, then ReLU where relu), op(b)
  // = b [N, K]^T where trans_b, else b [K, N] (ops/cuda/linear_short_m.cu).
  bool short_m_gemm(const Tensor& a, const Tensor& b, bool trans_b, const Tensor& bias, bool relu, Tensor& c);
  // float32 c [M, N] = a [K <= 64, M]^T b [K, N] and, when row_sums is given, row_sums [M] =
  // a summed over K, on `stream`; with mask_by [K, M], a is zero where mask_by is not positive
  // (ops/cuda/linear_short_k.cu).
  bool short_k_weight_grad(cudaStream_t stream, const Tensor& a, const Tensor& b, Tensor& c, Tensor* row_sums,
                           const Tensor& mask_by = Tensor());

  int device_;
  cudaStream_t stream_;
  PaddedCopy* shared_padding_ = nullptr;  // set by gemm_concurrent for its two products
};

}  // namespace minidl
