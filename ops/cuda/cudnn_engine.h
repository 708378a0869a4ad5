#pragma once
// A convolution's weight gradient through cuDNN's graph (backend) API, for the engines its legacy
// calls do not reach. With 16-bit NHWC data the legacy cudnnConvolutionBackwardFilter has one
// usable algorithm, and cuDNN maps it to one kernel: at the MNIST CNN's second convolution, batch
// 512, bfloat16 on an H200, that kernel took 107 us alone, where the graph API's heuristics list an
// engine that took 66 us; in TF32 the legacy call's sm80 kernel took 236 us in the step.
// ops/cuda/cudnn_autotune.cpp times the engines the heuristics list against the legacy algorithm and
// keeps an engine that is clearly faster.
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "ops/kernels.h"

namespace minidl::cudnn {

/// One finalized execution plan of the weight gradient of one convolution geometry and batch, NHWC
/// data and KRSC filters, float32 accumulation: dw = conv_backward_filter(x, dy), beta 0.
class WeightGradEngine {
 public:
  /// The plans of the engine configurations cuDNN's heuristics (mode A) list for this geometry, in
  /// their order, up to `most`: those that finalize, are deterministic, reduce in float32, take no
  /// FFT or Winograd transform, compile nothing at run time, and need at most `workspace_limit` bytes.
  static std::vector<std::unique_ptr<WeightGradEngine>> candidates(cudnnHandle_t handle, DType dtype, int64_t batch,
                                                                   int64_t out_channels, const ConvGeometry& g,
                                                                   size_t workspace_limit, int most);
  ~WeightGradEngine();
  WeightGradEngine(const WeightGradEngine&) = delete;
  WeightGradEngine& operator=(const WeightGradEngine&) = delete;

  /// Queues the gradient on `handle`'s stream; `workspace` holds workspace() bytes.
  void run(cudnnHandle_t handle, const void* x, const void* dy, void* dw, void* workspace) const;
  size_t workspace() const { return workspace_; }
  /// cuDNN's global index of the engine, for logs.
  int64_t engine() const { return engine_; }

 private:
  WeightGradEngine() = default;
  std::vector<cudnnBackendDescriptor_t> keep_;  // the engine and the plan, destroyed with this
  std::shared_ptr<std::vector<cudnnBackendDescriptor_t>> graph_;  // the graph the plan was made from
  cudnnBackendDescriptor_t plan_ = nullptr;
  size_t workspace_ = 0;
  int64_t engine_ = -1;
};

}  // namespace minidl::cudnn
