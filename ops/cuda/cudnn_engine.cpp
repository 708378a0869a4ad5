// The weight gradient through cuDNN's graph API (ops/cuda/cudnn_engine.h). Descriptors are made,
// given their attributes and finalized in the order cuDNN's backend documentation gives: tensors and
// the convolution, the operation, the operation graph, the heuristics' engine configurations, an
// execution plan for each, and per call a variant pack that binds the data pointers to the tensors'
// ids.
#include "ops/cuda/cudnn_engine.h"

#include <utility>

#include "core/cuda/cudnn_check.h"
#include "ops/cuda/cudnn_backend.h"
#include "ops/cuda/cudnn_plan.h"

namespace minidl::cudnn {

namespace {

using namespace backend;

constexpr int64_t kX = 'x', kDy = 'y', kDw = 'w';  // the tensors' ids in the graph and the variant pack

// A 4-d tensor [n, c, h, w] laid out NHWC (filters: KRSC), 16-byte aligned.
cudnnBackendDescriptor_t nhwc_tensor(int64_t id, DType dtype, int64_t n, int64_t c, int64_t h, int64_t w,
                                     std::vector<cudnnBackendDescriptor_t>& keep) {
  const int64_t dims[4] = {n, c, h, w}, strides[4] = {h * w * c, 1, w * c, c};
  return tensor(keep, id, cudnn_type(dtype), 4, dims, strides, false);
}

// Whether an engine's numerical notes allow it here: deterministic, reducing in float32, no
// transform that computes in float32 on the CUDA cores (the legacy path's rules, cudnn_plan.h).
bool acceptable_notes(cudnnBackendDescriptor_t engine) {
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < count; ++i) {
    switch (notes[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      case CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP: break;
      default: return false;  // nondeterministic, reduced-precision reduction, FFT, Winograd, down-conversion
    }
  }
  cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, behavior) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < count; ++i)
    if (behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return false;  // seconds to build
  return true;
}

}  // namespace

std::vector<std::unique_ptr<WeightGradEngine>> WeightGradEngine::candidates(cudnnHandle_t handle, DType dtype,
                                                                             int64_t batch, int64_t out_channels,
                                                                             const ConvGeometry& g,
                                                                             size_t workspace_limit, int most) {
  // The graph's descriptors are shared by the plans made from it and destroyed after the last of
  // them (or here, if none is made or a call fails).
  const auto shared = std::shared_ptr<std::vector<cudnnBackendDescriptor_t>>(
      new std::vector<cudnnBackendDescriptor_t>(), [](std::vector<cudnnBackendDescriptor_t>* parts) {
        destroy_all(*parts);
        delete parts;
      });
  std::vector<cudnnBackendDescriptor_t>& graph_parts = *shared;
  const cudnnBackendDescriptor_t x = nhwc_tensor(kX, dtype, batch, g.channels, g.height, g.width, graph_parts);
  const cudnnBackendDescriptor_t dy = nhwc_tensor(kDy, dtype, batch, out_channels, g.out_h, g.out_w, graph_parts);
  const cudnnBackendDescriptor_t dw =
      nhwc_tensor(kDw, dtype, out_channels, g.channels, g.kernel_h, g.kernel_w, graph_parts);
  const cudnnBackendDescriptor_t conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, graph_parts);
  const cudnnDataType_t accumulate = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &accumulate));
  CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  set<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, {2});
  set<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, {g.dilation_h, g.dilation_w});
  set<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, {g.stride_h, g.stride_w});
  set<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, {g.pad_h, g.pad_w});
  set<int64_t>(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, {g.pad_h, g.pad_w});
  CUDNN_CHECK(cudnnBackendFinalize(conv));
  const cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, graph_parts);
  set<float>(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, {1.f});
  set<float>(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, {0.f});
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv);
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x);
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, dy);
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, dw);
  CUDNN_CHECK(cudnnBackendFinalize(op));
  const cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph_parts);
  set_descriptor(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
  CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  std::vector<std::unique_ptr<WeightGradEngine>> out;
  if (cudnnBackendFinalize(graph) != CUDNN_STATUS_SUCCESS) return out;  // cuDNN has no engine for this graph
  const std::vector<cudnnBackendDescriptor_t> configs = heuristic_configs(graph, graph_parts);
  for (size_t i = 0; i < configs.size() && static_cast<int>(out.size()) < most; ++i) {
    std::unique_ptr<WeightGradEngine> e(new WeightGradEngine());
    e->graph_ = shared;
    cudnnBackendDescriptor_t engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, e->keep_);
    int64_t got = 0;
    if (cudnnBackendGetAttribute(configs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                 &engine) != CUDNN_STATUS_SUCCESS ||
        !acceptable_notes(engine))
      continue;
    cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &e->engine_);
    e->plan_ = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, e->keep_);
    set_descriptor(e->plan_, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i]);
    // Deprecated in later cuDNN 9 releases (the plan takes the graph's handle), required by earlier ones.
    cudnnBackendSetAttribute(e->plan_, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (cudnnBackendFinalize(e->plan_) != CUDNN_STATUS_SUCCESS) continue;
    int64_t bytes = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(e->plan_, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                         &bytes));
    if (bytes < 0 || static_cast<size_t>(bytes) > workspace_limit) continue;
    e->workspace_ = static_cast<size_t>(bytes);
    out.push_back(std::move(e));
  }
  return out;
}

WeightGradEngine::~WeightGradEngine() { destroy_all(keep_); }

void WeightGradEngine::run(cudnnHandle_t handle, const void* x, const void* dy, void* dw, void* workspace) const {
  void* pointers[] = {const_cast<void*>(x), const_cast<void*>(dy), dw};
  const int64_t ids[] = {kX, kDy, kDw};
  execute(handle, plan_, ids, pointers, 3, workspace);
}

}  // namespace minidl::cudnn
