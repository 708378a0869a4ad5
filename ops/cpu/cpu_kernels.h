#pragma once
// The CPU backend: Eigen for GEMM and vectorized loops, OpenMP across cores. Its methods are defined
// in the file of ops/cpu/ named after the op that uses them.
#include "ops/kernels.h"

namespace minidl {

// Below this many elements of work, a loop runs on one thread: waking OpenMP's team costs more.
inline constexpr int64_t kParallelGrain = 1 << 15;
// A reduction or scan over the middle axis of [outer, n, inner] takes this many inner columns per
// task, so that their accumulators stay in registers and L1.
inline constexpr int64_t kColumns = 256;

class CpuKernels final : public Kernels {
 public:
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& dst, double value) override;
  void arange(Tensor& dst, double start, double step) override;
  void index_select(const Tensor& src, int64_t dim, const Tensor& index, Tensor& out) override;
  void index_add(const Tensor& src, int64_t dim, const Tensor& index, Tensor& dst) override;
  void embedding_backward(const Tensor& grad, const Tensor& ids, const Tensor& plan, int64_t padding_idx,
                          bool scale_grad_by_freq, Tensor& grad_weight) override;
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
  void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, Tensor& out,
              Tensor* argmax) override;
  void scan(ScanOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool reverse, Tensor& out) override;
  void cumprod_backward(const Tensor& x, const Tensor& grad_out, int64_t outer, int64_t n, int64_t inner,
                        Tensor& grad_in) override;
  void sort(const Tensor& x, int64_t rows, int64_t n, bool descending, Tensor& values, Tensor& indices) override;
  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
            double beta) override;
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
  bool conv2d_onednn(const Tensor& x, const Tensor& weight, const ConvGeometry& g, Tensor& out) override;
  bool conv2d_backward_data_onednn(const Tensor& grad_out, const Tensor& weight, const ConvGeometry& g,
                                   Tensor& grad_x) override;
  bool conv2d_backward_weights_onednn(const Tensor& grad_out, const Tensor& x, const ConvGeometry& g,
                                      Tensor& grad_weight) override;
  void max_pool2d(const Tensor& x, const ConvGeometry& g, Tensor& out, Tensor& indices) override;
  void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const ConvGeometry& g,
                           Tensor& grad_in) override;
  void conv_bias_act(const Tensor& x, const Tensor* bias, bool relu, Tensor& y) override;
  void conv_bias_relu_backward(const Tensor& grad_out, const Tensor& y, Tensor& grad_pre, Tensor* grad_bias) override;
  void bias_relu_max_pool2d(const Tensor& x, const Tensor* bias, int64_t k, Tensor& out) override;
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
  void amp_non_finite_check_and_unscale(std::vector<Tensor>& grads, Tensor& found_inf, const Tensor& inv_scale) override;
  void amp_update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                        double backoff_factor, int64_t growth_interval) override;
  void sgd_step(Tensor& param, const Tensor& grad, Tensor* momentum_buf, const SgdConfig& config) override;
  void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 const AdamConfig& config) override;
};

}  // namespace minidl
