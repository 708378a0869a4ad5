#pragma once
// What the cuDNN path (ops/cuda/cudnn.cpp) shares with the per-shape choice between it and im2col
// (ops/cuda/cudnn_autotune.cpp): the handle, and each convolution geometry's descriptors and
// algorithms, made once and cached by shape.
#include <cudnn.h>

#include <memory>

#include "core/cuda/cudnn_check.h"
#include "ops/cuda/cuda_kernels.h"

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
    default: MINIDL_FAIL("cuDNN path: expected float32 or float64, got ", dtype);
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
  void set(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, cudnn_type(dtype), as_int(n), as_int(c), as_int(h),
                                           as_int(w)));
  }
};

struct ConvPlan {
  TensorDesc x, y, bias;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;
  bool ok = false;  // false: cuDNN has no algorithm for this geometry; the caller falls back
  // Auto's verdicts, [1] where the backward computes the input's gradient and [0] where it does not (a
  // network's first layer): 1 cuDNN, 0 im2col, -1 not measured yet.
  int faster[2] = {-1, -1};
  int found = -1;  // the timed search: -1 not run yet, 0 a pass had no algorithm, 1 algorithms taken
  // Deterministic mode's algorithms (core/deterministic.h): the heuristics' picks among those cuDNN
  // reports deterministic, never timed. Made on first use in that mode; ok false where a pass has
  // none, and the convolution then takes the im2col path.
  struct Deterministic {
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t bwd_data{};
    cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
    size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;
    bool ok = false;
  };
  std::unique_ptr<Deterministic> deterministic;
  ~ConvPlan() {
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

/// The plan of one geometry: descriptors and cuDNN's heuristic algorithms, made on first use.
ConvPlan& conv_plan(int device, cudnnHandle_t handle, DType dtype, int64_t batch, int64_t out_channels,
                    const ConvGeometry& g);

/// The deterministic algorithms of `p` (found on first use).
const ConvPlan::Deterministic& deterministic_algorithms(cudnnHandle_t handle, ConvPlan& p);

/// The measured plan (faster[input_grad] >= 0) of the same geometry with the smallest batch larger
/// than `batch`, or null.
const ConvPlan* measured_with_larger_batch(int device, DType dtype, int64_t batch, int64_t out_channels,
                                           const ConvGeometry& g, bool input_grad);

/// Takes one algorithm per pass and their workspace sizes (from the queries, not the perf records:
/// the records may be estimates). False, changing nothing, when a pass has none.
bool use_algorithms(cudnnHandle_t handle, ConvPlan& p, const cudnnConvolutionFwdAlgoPerf_t* fwd,
                    const cudnnConvolutionBwdDataAlgoPerf_t* bwd_data,
                    const cudnnConvolutionBwdFilterAlgoPerf_t* bwd_filter);

}  // namespace minidl::cudnn
