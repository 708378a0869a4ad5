#pragma once
// What the cuDNN path (ops/cuda/cudnn.cpp) shares with the per-shape choice between it and im2col
// (ops/cuda/cudnn_autotune.cpp): the handle, and each convolution geometry's descriptors and
// algorithms, made once and cached by shape.
#include <cudnn.h>

#include <memory>

#include "core/cuda/cudnn_check.h"
#include "ops/backend_setting.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cudnn_engine.h"

namespace minidl::cudnn {

/// The cuDNN handle of `device`, bound to its compute stream; made on first use.
cudnnHandle_t cudnn_handle(int device);
/// A second handle of `device`, bound to its side stream (core/cuda/context.h), for work that
/// overlaps the compute stream's.
cudnnHandle_t cudnn_side_handle(int device);

inline cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float16: return CUDNN_DATA_HALF;
    default: MINIDL_FAIL("cuDNN path: expected a floating dtype, got ", dtype);
  }
}

inline int as_int(int64_t v) {
  MINIDL_CHECK(v >= 0 && v <= INT32_MAX, "cuDNN path: dimension ", v, " exceeds cuDNN's 32-bit sizes");
  return static_cast<int>(v);
}

// Owning wrappers for descriptors.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  void set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, bool channels_last = false) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnn_type(dtype),
                                           as_int(n), as_int(c), as_int(h), as_int(w)));
  }
};

/// One algorithm per pass and the workspace each takes.
struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;
  /// Where set, the weight gradient runs this graph-API plan of the same geometry and batch (owned
  /// by the ConvPlan) instead of bwd_filter, which stays the fallback for operands it cannot take.
  const WeightGradEngine* bwd_filter_engine = nullptr;
  /// Where set, the weight gradient runs CudaKernels::conv2d_weight_grad_tf32 instead (float32
  /// channels-last data under TF32, where it timed faster than every cuDNN path).
  bool bwd_filter_tf32_kernel = false;
  /// Where set, the input gradient runs as the forward convolution of the output gradient with the
  /// flipped filter (ConvPlan::flipped), by forward algorithm bwd_data_fwd in bwd_data_ws bytes of
  /// workspace, instead of bwd_data.
  bool bwd_data_by_forward = false;
  cudnnConvolutionFwdAlgo_t bwd_data_fwd{};
  /// Where set, the forward, or the input gradient, runs CudaKernels::conv2d_winograd instead (strict
  /// float32 NCHW, 3 x 3 at stride 1, where it timed faster than cuDNN) and takes no workspace.
  bool fwd_by_winograd = false, bwd_data_by_winograd = false;
  /// Where set, the weight gradient runs CudaKernels::conv2d_winograd_weight_grad instead (likewise).
  bool bwd_filter_by_winograd = false;
  bool same_as(const ConvAlgorithms& o) const {
    return fwd == o.fwd && bwd_data == o.bwd_data && bwd_filter == o.bwd_filter &&
           fwd_by_winograd == o.fwd_by_winograd && bwd_data_by_winograd == o.bwd_data_by_winograd &&
           bwd_filter_by_winograd == o.bwd_filter_by_winograd &&
           bwd_filter_engine == o.bwd_filter_engine && bwd_filter_tf32_kernel == o.bwd_filter_tf32_kernel &&
           bwd_data_by_forward == o.bwd_data_by_forward && (!bwd_data_by_forward || bwd_data_fwd == o.bwd_data_fwd);
  }
};

/// Where a convolution runs, for its workspace limit (conv_workspace_limit): op by op, or captured
/// into a CUDA graph.
enum ConvMode { kOpByOp = 0, kInGraph = 1 };

/// kInGraph while `stream` is capturing a graph.
inline ConvMode conv_mode(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture == cudaStreamCaptureStatusNone ? kOpByOp : kInGraph;
}

/// A convolution's input gradient as a forward convolution, at stride 1: dX = dY convolved with the
/// filter flipped [C, K, R, S] (CudaKernels::conv2d_flip_filter), padded by dilation * (kernel - 1)
/// - pad. Its descriptors, in the plan's layout: dY [N, K, oh, ow] in, dX [N, C, H, W] out.
struct FlippedConv {
  TensorDesc x, y;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~FlippedConv() {
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

struct ConvPlan {
  TensorDesc x, y, bias;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  bool ok = false;  // false: cuDNN has no algorithm for this geometry; the caller falls back
  ConvGeometry geometry{};  // the convolution's, for the kernels of our own that stand in for cuDNN's
  /// NHWC data and KRSC filters (CudaKernels::conv2d_cudnn_format), else NCHW and KCRS.
  bool channels_last = false;
  /// Tensor-op algorithms allowed (CUDNN_TENSOR_OP_MATH): bfloat16 and float16 always, float32 under
  /// allow_tf32_cudnn() (TF32); else FMA math only, strict float32 (ops/cuda/cudnn.cpp).
  bool tensor_ops = false;
  /// bfloat16 or float16 data: the algorithms that compute in float32 are left out (usable below).
  bool sixteen_bit = false;
  /// The algorithms of each ConvMode (the same where the fastest fits both limits) and Auto's verdicts
  /// between them and im2col, [1] where the backward computes the input's gradient and [0] where it
  /// does not (a network's first layer): 1 cuDNN, 0 im2col, -1 not measured yet. A measurement
  /// settles both modes.
  struct Mode {
    ConvAlgorithms algorithms;
    int faster[2] = {-1, -1};
  };
  Mode mode[2];
  int found = -1;  // the timed search: -1 not run yet, 0 a pass had no algorithm, 1 algorithms taken
  /// The weight-gradient engines the timed search took (ConvAlgorithms::bwd_filter_engine).
  std::vector<std::unique_ptr<WeightGradEngine>> engines;
  /// The input gradient as a forward convolution (ConvAlgorithms::bwd_data_by_forward), made by the
  /// timed search where the geometry allows it (make_flipped).
  std::unique_ptr<FlippedConv> flipped;
  // Deterministic mode's algorithms (core/deterministic.h): the heuristics' picks among those cuDNN
  // reports deterministic, never timed. Made on first use in that mode; ok false where a pass has
  // none, and the convolution then takes the im2col path.
  struct Deterministic {
    ConvAlgorithms algorithms;
    bool ok = false;
  };
  std::unique_ptr<Deterministic> deterministic;
  ~ConvPlan() {
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

/// Whether a perf record's math is one a plan takes: default or FMA math, and tensor-op math where
/// the plan allows tensor ops (never the conversion of float32 to float16).
inline bool usable_math(cudnnMathType_t math, bool tensor_ops) {
  return math == CUDNN_DEFAULT_MATH || math == CUDNN_FMA_MATH || (tensor_ops && math == CUDNN_TENSOR_OP_MATH);
}

/// The algorithms whose products run in float32 on the CUDA cores whatever the data's type: the FFTs,
/// and Winograd without fusion (its batched GEMM is an FMA one). For 16-bit data they lose to the
/// tensor-core implicit GEMMs in a step, although Find can rank them first: on an H200, the bfloat16
/// MNIST CNN at batch 512 spent 1.3 ms of a 2.0 ms step in the non-fused Winograd Find had picked.
inline bool computes_in_float32(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
inline bool computes_in_float32(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
inline bool computes_in_float32(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

/// The gradient algorithms that add partial sums into the output with atomics: with a 16-bit output
/// every add rounds to 16 bits. On an H100 the bfloat16 input gradient of a 3 x 3 convolution over 5
/// channels (45 products a sum) came out 6 units in the last place off float32's, where one rounding
/// gives half a unit; 16-bit plans leave them out.
inline bool adds_with_atomics(cudnnConvolutionFwdAlgo_t) { return false; }
inline bool adds_with_atomics(cudnnConvolutionBwdDataAlgo_t a) { return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; }
inline bool adds_with_atomics(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

/// Whether a plan takes record i of a Find query's or cuDNN's heuristics' list: it ran, in a math the
/// plan allows, and for 16-bit data neither in float32 nor by atomic adds. A plan with tensor ops
/// sets its descriptor to tensor-op math, which runs an algorithm's tensor-op variant where the list
/// has one: the record of the same algorithm in another math is not what will run, so it is left out
/// (ranked by algorithm, its CUDA-core time mixed into the median made the bfloat16 implicit GEMM
/// look ten times slower).
template <class Perf>
bool usable(const Perf* perf, int count, int i, const ConvPlan& p) {
  const Perf& r = perf[i];
  if (r.status != CUDNN_STATUS_SUCCESS || !usable_math(r.mathType, p.tensor_ops)) return false;
  if (p.sixteen_bit && (computes_in_float32(r.algo) || adds_with_atomics(r.algo))) return false;
  if (p.tensor_ops && r.mathType != CUDNN_TENSOR_OP_MATH)
    for (int j = 0; j < count; ++j)
      if (perf[j].algo == r.algo && perf[j].mathType == CUDNN_TENSOR_OP_MATH && perf[j].status == CUDNN_STATUS_SUCCESS)
        return false;
  return true;
}

/// The plan of one geometry: descriptors and cuDNN's heuristic algorithms, made on first use, in the
/// layout conv2d_cudnn_format gives the dtype. Float32 plans are kept apart by allow_tf32_cudnn() at
/// the time: a shape met under both has two.
ConvPlan& conv_plan(int device, cudnnHandle_t handle, DType dtype, int64_t batch, int64_t out_channels,
                    const ConvGeometry& g);

/// The layout of cuDNN's convolutions of `dtype`: channels-last where they run on tensor cores
/// (bfloat16, float16, and float32 under allow_tf32_cudnn), whose kernels are NHWC (given NCHW, cuDNN
/// transposes the input, the filter and the output around every call: 230 us of a 1.06 ms bfloat16
/// MNIST CNN step at batch 512 on an H200, 205 us of a 1.04 ms TF32 one); NCHW for strict float32
/// and float64. The TF32 setting keys the plans too (dtype_slot), so a plan's layout is fixed.
inline MemoryFormat cudnn_format(DType dtype) {
  const bool tensor_cores = is_reduced_floating(dtype) || (dtype == DType::Float32 && allow_tf32_cudnn());
  return tensor_cores ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

/// Makes p.flipped where the input gradient can run as a forward convolution (stride 1, padding at
/// most dilation * (kernel - 1)) and cuDNN takes its descriptors; false, leaving it null, otherwise.
bool make_flipped(ConvPlan& p, DType dtype, int64_t batch, int64_t out_channels);

/// The deterministic algorithms of `p` (found on first use).
const ConvPlan::Deterministic& deterministic_algorithms(cudnnHandle_t handle, ConvPlan& p);

/// The measured plan (faster[input_grad] >= 0) of the same geometry with the smallest batch larger
/// than `batch`, or null.
const ConvPlan* measured_with_larger_batch(int device, DType dtype, int64_t batch, int64_t out_channels,
                                           const ConvGeometry& g, bool input_grad);

/// Fills `a`'s workspace sizes from cuDNN's queries; false where cuDNN refuses one of its algorithms
/// for `p` (an algorithm measured at another batch, say).
bool workspace_sizes(cudnnHandle_t handle, const ConvPlan& p, ConvAlgorithms& a);

/// One algorithm per pass, with their workspace sizes from the queries (the perf records' may be
/// estimates). False, changing nothing, when a pass has none or cuDNN refuses one.
bool use_algorithms(cudnnHandle_t handle, const ConvPlan& p, const cudnnConvolutionFwdAlgoPerf_t* fwd,
                    const cudnnConvolutionBwdDataAlgoPerf_t* bwd_data,
                    const cudnnConvolutionBwdFilterAlgoPerf_t* bwd_filter, ConvAlgorithms& out);

/// The forward of `p` with `a`'s algorithm on `handle`'s stream: out = conv(x, weight) (+ bias).
void run_forward(cudnnHandle_t handle, int device, const ConvPlan& p, const ConvAlgorithms& a, const Tensor& x,
                 const Tensor& weight, const Tensor* bias, Tensor& out);
/// The backward of `p` with `a`'s algorithms: the gradients asked for (null: not wanted). grad_weight
/// may be in any layout and floating dtype (a converting copy follows cuDNN's where it is not the
/// plan's). With both gradients wanted the weight's runs on the side stream; `join_later` leaves its
/// join to the next use of what it read or wrote (core/cuda/side_stream.cpp), else the compute
/// stream waits for it before this returns.
void run_backward(cudnnHandle_t handle, int device, const ConvPlan& p, const ConvAlgorithms& a,
                  const Tensor& grad_out, const Tensor& x, const Tensor& weight, Tensor* grad_x, Tensor* grad_weight,
                  Tensor* grad_bias, bool join_later);

}  // namespace minidl::cudnn
