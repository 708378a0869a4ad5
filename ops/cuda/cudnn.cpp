// The cuDNN path for conv2d and max_pool2d (ops/backend_setting.h). Each geometry gets its
// descriptors and algorithms once (cached by shape, ops/cuda/cudnn_plan.h), restricted to FMA math
// for float32 and float64: strict float32, no TF32 tensor cores, unless allow_tf32_cudnn()
// (ops/backend_setting.h) lets float32 take tensor-op math. bfloat16 and float16 convolutions run in
// tensor-op math with float32 accumulation (the descriptor's compute type), as PyTorch's.
// Algorithms come from cuDNN's heuristics (the _v7 queries, preferring deterministic ones) until
// conv_backend() Auto measures the shape (ops/cuda/cudnn_autotune.cpp); in deterministic mode, from
// the heuristics and deterministic only.
// A plan holds one set for convolutions run op by op and one for those captured into a CUDA graph,
// each within its mode's workspace limit (ops/backend_setting.h). Workspaces come from the caching
// allocator and go back to it as soon as the call is queued (reuse is ordered on the stream), except
// a weight gradient's on the side stream, which its unjoined work holds until the join.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cuda.h"
#include "core/deterministic.h"
#include "ops/backend_setting.h"
#include "ops/cuda/cudnn_plan.h"

namespace minidl {

namespace cudnn {

namespace {

cudnnHandle_t handle_on(int device, bool side) {
  static std::mutex mutex;
  static auto* handles = new std::vector<cudnnHandle_t>(2 * static_cast<size_t>(cuda::device_count()), nullptr);
  std::lock_guard lock(mutex);
  cudnnHandle_t& h = (*handles)[2 * static_cast<size_t>(device) + (side ? 1 : 0)];
  if (!h) {
    cuda::DeviceGuard guard(device);
    CUDNN_CHECK(cudnnCreate(&h));
    CUDNN_CHECK(cudnnSetStream(h, side ? cuda::side_stream(device) : cuda::compute_stream(device)));
  }
  return h;
}

}  // namespace

cudnnHandle_t cudnn_handle(int device) { return handle_on(device, false); }
cudnnHandle_t cudnn_side_handle(int device) { return handle_on(device, true); }

bool workspace_sizes(cudnnHandle_t handle, const ConvPlan& p, ConvAlgorithms& a) {
  if (a.bwd_data_by_forward && !p.flipped) return false;
  const cudnnStatus_t data =
      a.bwd_data_by_forward
          ? cudnnGetConvolutionForwardWorkspaceSize(handle, p.flipped->x.d, p.flipped->w, p.flipped->conv,
                                                    p.flipped->y.d, a.bwd_data_fwd, &a.bwd_data_ws)
          : cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p.w, p.y.d, p.conv, p.x.d, a.bwd_data, &a.bwd_data_ws);
  const bool ok = cudnnGetConvolutionForwardWorkspaceSize(handle, p.x.d, p.w, p.conv, p.y.d, a.fwd, &a.fwd_ws) ==
                      CUDNN_STATUS_SUCCESS &&
                  data == CUDNN_STATUS_SUCCESS &&
                  cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, p.x.d, p.y.d, p.conv, p.w, a.bwd_filter,
                                                                 &a.bwd_filter_ws) == CUDNN_STATUS_SUCCESS;
  if (a.fwd_by_winograd) a.fwd_ws = 0;
  if (a.bwd_data_by_winograd) a.bwd_data_ws = 0;
  if (a.bwd_filter_by_winograd) a.bwd_filter_ws = 0;  // asked of the kernel when it runs
  return ok;
}

bool use_algorithms(cudnnHandle_t handle, const ConvPlan& p, const cudnnConvolutionFwdAlgoPerf_t* fwd,
                    const cudnnConvolutionBwdDataAlgoPerf_t* bwd_data,
                    const cudnnConvolutionBwdFilterAlgoPerf_t* bwd_filter, ConvAlgorithms& out) {
  if (!fwd || !bwd_data || !bwd_filter) return false;
  ConvAlgorithms a;
  a.fwd = fwd->algo;
  a.bwd_data = bwd_data->algo;
  a.bwd_filter = bwd_filter->algo;
  if (!workspace_sizes(handle, p, a)) return false;
  out = a;
  return true;
}

namespace {

// The first deterministic algorithm in the heuristics' order, else (unless `deterministic_only`)
// the first of any kind; among those within `limit` when there are any.
template <class Perf>
const Perf* pick(const Perf* perf, int count, size_t limit, const ConvPlan& p, bool deterministic_only = false) {
  const Perf* any = nullptr;
  for (const bool within_limit : {true, false}) {
    for (int i = 0; i < count; ++i) {
      if (!usable(perf, count, i, p)) continue;
      if (within_limit && perf[i].memory > limit) continue;
      if (perf[i].determinism == CUDNN_DETERMINISTIC) return &perf[i];
      if (!any && !deterministic_only) any = &perf[i];
    }
    if (any) return any;
  }
  return nullptr;
}

// cuDNN's heuristics (the _v7 queries: no timing) for the three passes of a plan.
struct Heuristics {
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int nf = 0, nd = 0, nw = 0;
  Heuristics(cudnnHandle_t handle, const ConvPlan& p) {
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, p.x.d, p.w, p.conv, p.y.d,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fwd));
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, p.w, p.y.d, p.conv, p.x.d,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, bwd_data));
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, p.x.d, p.y.d, p.conv, p.w,
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, bwd_filter));
  }
};

using ConvKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t>;

std::mutex plans_mutex;

std::map<ConvKey, std::unique_ptr<ConvPlan>>& plans() {
  static auto* p = new std::map<ConvKey, std::unique_ptr<ConvPlan>>();  // never destroyed: used until exit
  return *p;
}

// The dtype's slot also tells float32's TF32 setting: a plan made under one is not used under the other.
int dtype_slot(DType dtype) { return 2 * static_cast<int>(dtype) + (dtype == DType::Float32 && allow_tf32_cudnn()); }

ConvKey key_of(int device, DType dtype, int64_t batch, int64_t out_channels, const ConvGeometry& g) {
  // The layout is the dtype's (cudnn_format), so the dtype's slot keys it too.
  return {device,    dtype_slot(dtype),       batch,      g.channels, g.height, g.width, out_channels, g.kernel_h,
          g.kernel_w, g.stride_h,              g.stride_w, g.pad_h,    g.pad_w,  g.dilation_h, g.dilation_w};
}

}  // namespace

const ConvPlan* measured_with_larger_batch(int device, DType dtype, int64_t batch, int64_t out_channels,
                                           const ConvGeometry& g, bool input_grad) {
  std::lock_guard lock(plans_mutex);
  const ConvPlan* best = nullptr;
  int64_t best_batch = 0;
  for (const auto& [key, plan] : plans()) {
    ConvKey same = key;
    const int64_t b = std::get<2>(key);
    std::get<2>(same) = batch;
    if (b > batch && same == key_of(device, dtype, batch, out_channels, g) && plan->ok &&
        plan->mode[kOpByOp].faster[input_grad] >= 0 && (!best || b < best_batch))
      best = plan.get(), best_batch = b;
  }
  return best;
}

bool make_flipped(ConvPlan& p, DType dtype, int64_t batch, int64_t out_channels) {
  const ConvGeometry& g = p.geometry;
  const int64_t pad_h = g.dilation_h * (g.kernel_h - 1) - g.pad_h, pad_w = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  if (g.stride_h != 1 || g.stride_w != 1 || pad_h < 0 || pad_w < 0) return false;
  auto f = std::make_unique<FlippedConv>();
  f->x.set(dtype, batch, out_channels, g.out_h, g.out_w, p.channels_last);
  f->y.set(dtype, batch, g.channels, g.height, g.width, p.channels_last);
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&f->w));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(f->w, cudnn_type(dtype), p.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                         as_int(g.channels), as_int(out_channels), as_int(g.kernel_h),
                                         as_int(g.kernel_w)));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&f->conv));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(f->conv, as_int(pad_h), as_int(pad_w), 1, 1, as_int(g.dilation_h),
                                              as_int(g.dilation_w), CUDNN_CROSS_CORRELATION,
                                              is_reduced_floating(dtype) ? CUDNN_DATA_FLOAT : cudnn_type(dtype)));
  CUDNN_CHECK(cudnnSetConvolutionMathType(f->conv, p.tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int n = 0, c = 0, h = 0, w = 0;
  if (cudnnGetConvolution2dForwardOutputDim(f->conv, f->x.d, f->w, &n, &c, &h, &w) != CUDNN_STATUS_SUCCESS ||
      h != g.height || w != g.width)
    return false;
  p.flipped = std::move(f);
  return true;
}

ConvPlan& conv_plan(int device, cudnnHandle_t handle, DType dtype, int64_t batch, int64_t out_channels,
                    const ConvGeometry& g) {
  std::lock_guard lock(plans_mutex);
  auto& slot = plans()[key_of(device, dtype, batch, out_channels, g)];
  if (slot) return *slot;
  auto plan = std::make_unique<ConvPlan>();
  ConvPlan& p = *plan;
  p.geometry = g;
  p.channels_last = cudnn_format(dtype) == MemoryFormat::ChannelsLast;
  p.x.set(dtype, batch, g.channels, g.height, g.width, p.channels_last);
  p.y.set(dtype, batch, out_channels, g.out_h, g.out_w, p.channels_last);
  p.bias.set(dtype, 1, out_channels, 1, 1);
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w, cudnn_type(dtype),
                                         p.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, as_int(out_channels),
                                         as_int(g.channels), as_int(g.kernel_h), as_int(g.kernel_w)));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv, as_int(g.pad_h), as_int(g.pad_w), as_int(g.stride_h),
                                              as_int(g.stride_w), as_int(g.dilation_h), as_int(g.dilation_w),
                                              CUDNN_CROSS_CORRELATION,
                                              is_reduced_floating(dtype) ? CUDNN_DATA_FLOAT : cudnn_type(dtype)));
  p.sixteen_bit = is_reduced_floating(dtype);
  p.tensor_ops = p.sixteen_bit || (dtype == DType::Float32 && allow_tf32_cudnn());
  CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));

  // The output size cuDNN computes must be ours, or the geometry means something else to it.
  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x.d, p.w, &n, &c, &h, &w));
  if (h == g.out_h && w == g.out_w) {
    const Heuristics found(handle, p);
    p.ok = true;
    for (const ConvMode m : {kOpByOp, kInGraph}) {
      const size_t limit = conv_workspace_limit(m == kInGraph);
      p.ok = p.ok && use_algorithms(handle, p, pick(found.fwd, found.nf, limit, p),
                                    pick(found.bwd_data, found.nd, limit, p),
                                    pick(found.bwd_filter, found.nw, limit, p), p.mode[m].algorithms);
    }
  }
  slot = std::move(plan);
  return *slot;
}

const ConvPlan::Deterministic& deterministic_algorithms(cudnnHandle_t handle, ConvPlan& p) {
  std::lock_guard lock(plans_mutex);
  if (p.deterministic) return *p.deterministic;
  auto d = std::make_unique<ConvPlan::Deterministic>();
  const Heuristics found(handle, p);
  const size_t limit = conv_workspace_limit();
  d->ok = use_algorithms(handle, p, pick(found.fwd, found.nf, limit, p, true),
                         pick(found.bwd_data, found.nd, limit, p, true),
                         pick(found.bwd_filter, found.nw, limit, p, true), d->algorithms);
  p.deterministic = std::move(d);
  return *p.deterministic;
}

}  // namespace cudnn

using namespace cudnn;

namespace {

// cuDNN's scaling factors are float for float data and double for double data.
struct Scale {
  float f;
  double d;
  explicit Scale(double v) : f(static_cast<float>(v)), d(v) {}
  const void* get(DType dtype) const { return dtype == DType::Float64 ? static_cast<const void*>(&d) : &f; }
};
const Scale kOne(1.0), kZero(0.0);

// Workspace from the caching allocator, returned when the call has been queued.
class Workspace {
 public:
  Workspace(int device, size_t bytes) : alloc_(allocator_for(Device::cuda(device))), bytes_(bytes) {
    if (bytes_) ptr_ = alloc_.allocate(bytes_);
  }
  ~Workspace() {
    if (ptr_) alloc_.deallocate(ptr_, bytes_);
  }
  void* get() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  Allocator& alloc_;
  size_t bytes_;
  void* ptr_ = nullptr;
};

struct PoolPlan {
  TensorDesc x, y;
  cudnnPoolingDescriptor_t pool = nullptr;
  bool ok = false;
  ~PoolPlan() {
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
};

using PoolKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t>;

PoolPlan& pool_plan(int device, DType dtype, int64_t batch, const ConvGeometry& g) {
  static std::mutex mutex;
  static auto* plans = new std::map<PoolKey, std::unique_ptr<PoolPlan>>();
  PoolKey key{device,     static_cast<int>(dtype), batch,      g.channels, g.height, g.width,
              g.kernel_h, g.kernel_w,              g.stride_h, g.stride_w, g.pad_h,  g.pad_w};
  std::lock_guard lock(mutex);
  auto& slot = (*plans)[key];
  if (slot) return *slot;
  auto plan = std::make_unique<PoolPlan>();
  PoolPlan& p = *plan;
  p.x.set(dtype, batch, g.channels, g.height, g.width);
  p.y.set(dtype, batch, g.channels, g.out_h, g.out_w);
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&p.pool));
  // MAX_DETERMINISTIC: the backward routes each gradient to one maximum, in a fixed way. NaN
  // propagates, as in the im2col path.
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(p.pool, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_PROPAGATE_NAN,
                                          as_int(g.kernel_h), as_int(g.kernel_w), as_int(g.pad_h), as_int(g.pad_w),
                                          as_int(g.stride_h), as_int(g.stride_w)));
  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(p.pool, p.x.d, &n, &c, &h, &w));
  p.ok = h == g.out_h && w == g.out_w;
  slot = std::move(plan);
  return *slot;
}

}  // namespace

namespace cudnn {

void run_forward(cudnnHandle_t handle, int device, const ConvPlan& p, const ConvAlgorithms& a, const Tensor& x,
                 const Tensor& weight, const Tensor* bias, Tensor& out) {
  const DType dt = x.dtype();
  if (a.fwd_by_winograd) {  // the plan's layout, NCHW, is checked by the callers (check_layout)
    cudaStream_t stream = nullptr;
    CUDNN_CHECK(cudnnGetStream(handle, &stream));
    const Tensor* b = bias && bias->defined() ? bias : nullptr;
    CudaKernels(device, stream).conv2d_winograd(x, weight, b, p.geometry.pad_h, p.geometry.pad_w, false, out);
    return;
  }
  Workspace ws(device, a.fwd_ws);
  CUDNN_CHECK(cudnnConvolutionForward(handle, kOne.get(dt), p.x.d, x.raw_data(), p.w, weight.raw_data(), p.conv,
                                      a.fwd, ws.get(), ws.size(), kZero.get(dt), p.y.d, out.raw_data()));
  if (bias && bias->defined()) {
    CUDNN_CHECK(cudnnAddTensor(handle, kOne.get(dt), p.bias.d, bias->raw_data(), kOne.get(dt), p.y.d, out.raw_data()));
  }
}

void run_backward(cudnnHandle_t handle, int device, const ConvPlan& p, const ConvAlgorithms& a,
                  const Tensor& grad_out, const Tensor& x, const Tensor& weight, Tensor* grad_x, Tensor* grad_weight,
                  Tensor* grad_bias, bool join_later) {
  const DType dt = grad_out.dtype();
  // With both gradients wanted, the weight's runs on the side stream next to the input's: they only
  // read the same output gradient, and at small batches neither fills the GPU. The input's is queued
  // first, since the layer below waits for it alone.
  const bool concurrent = grad_x && grad_weight;
  cudaStream_t stream = nullptr;
  CUDNN_CHECK(cudnnGetStream(handle, &stream));
  const cudaStream_t side = cuda::side_stream(device);
  if (concurrent) {
    if (join_later) cuda::join_side_stream_if_holding_much(device);
    cuda::stream_wait(device, side, stream);
  }
  // The weight gradient's buffers are taken first: a block the input's gradient frees (its
  // workspace) must not come back for side-stream work while that gradient still runs.
  const MemoryFormat format = p.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  // cuDNN writes the plan's filter layout in the data's dtype; another grad_weight (contiguous, or a
  // master weight's float32) gets it by one converting copy queued after it. Our TF32 kernel writes
  // any of them.
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const int64_t batch = grad_out.size(0), out_channels = grad_out.size(1);
  const bool by_kernel = grad_weight && a.bwd_filter_tf32_kernel && p.channels_last &&
                         CudaKernels::conv2d_weight_grad_tf32_applies(dt, batch, out_channels, p.geometry) &&
                         x.is_contiguous(MemoryFormat::ChannelsLast) &&
                         grad_out.is_contiguous(MemoryFormat::ChannelsLast) && aligned(x.raw_data()) &&
                         aligned(grad_out.raw_data());
  // Strict float32 NCHW (check_layout): the Winograd weight gradient, where the autotuner took it.
  const bool by_winograd = grad_weight && !by_kernel && a.bwd_filter_by_winograd;
  // The Winograd weight gradient's part of a wave of blocks: all of it alone, less beside the input
  // gradient (how much depends on whose that is).
  const double winograd_share = !concurrent                 ? 1.0
                                : a.bwd_data_by_winograd ? CudaKernels::kWinogradWeightGradBesideWinograd
                                                         : CudaKernels::kWinogradWeightGradBesideCudnn;
  const bool in_place =
      grad_weight && (by_kernel || (grad_weight->dtype() == dt && grad_weight->is_contiguous(format)));
  Tensor filter, space;
  bool by_engine = false;
  size_t bytes = 0;
  if (grad_weight) {
    filter = in_place ? *grad_weight : Tensor::empty(grad_weight->shape(), dt, grad_weight->device(), format);
    // The graph-API plan was made for 16-byte aligned operands (views at odd offsets take the legacy call).
    const WeightGradEngine* engine = a.bwd_filter_engine;
    by_engine = !by_kernel && !by_winograd && engine && aligned(x.raw_data()) && aligned(grad_out.raw_data()) &&
                aligned(filter.raw_data());
    bytes = by_kernel   ? CudaKernels(device).conv2d_weight_grad_tf32_workspace(batch, out_channels, p.geometry,
                                                                                  concurrent)
            : by_winograd ? CudaKernels(device).conv2d_winograd_weight_grad_workspace(batch, out_channels, p.geometry,
                                                                                      winograd_share)
            : by_engine ? engine->workspace()
                        : a.bwd_filter_ws;
    // The workspace as a tensor: side work left unjoined keeps it alive until its join.
    if (bytes) space = Tensor::empty({static_cast<int64_t>(bytes)}, kByte, grad_out.device());
  }
  if (grad_x) {
    Workspace ws(device, a.bwd_data_ws);
    const ConvGeometry& g = p.geometry;
    if (a.bwd_data_by_winograd) {
      CudaKernels(device, stream).conv2d_winograd(grad_out, weight, nullptr, 2 - g.pad_h, 2 - g.pad_w, true, *grad_x);
    } else if (a.bwd_data_by_forward) {
      Tensor flipped = Tensor::empty({weight.size(1), weight.size(0), weight.size(2), weight.size(3)}, dt,
                                     weight.device(), format);
      CudaKernels(device, stream).conv2d_flip_filter(weight, flipped);
      const FlippedConv& f = *p.flipped;
      CUDNN_CHECK(cudnnConvolutionForward(handle, kOne.get(dt), f.x.d, grad_out.raw_data(), f.w, flipped.raw_data(),
                                          f.conv, a.bwd_data_fwd, ws.get(), ws.size(), kZero.get(dt), f.y.d,
                                          grad_x->raw_data()));
    } else {
      CUDNN_CHECK(cudnnConvolutionBackwardData(handle, kOne.get(dt), p.w, weight.raw_data(), p.y.d,
                                               grad_out.raw_data(), p.conv, a.bwd_data, ws.get(), ws.size(),
                                               kZero.get(dt), p.x.d, grad_x->raw_data()));
    }
  }
  if (grad_weight) {
    const cudaStream_t filter_stream = concurrent ? side : stream;
    cudnnHandle_t filter_handle = concurrent ? cudnn_side_handle(device) : handle;
    void* space_ptr = bytes ? space.raw_data() : nullptr;
    if (by_kernel) {
      CudaKernels(device, filter_stream).conv2d_weight_grad_tf32(x, grad_out, p.geometry, filter, space_ptr, concurrent);
    } else if (by_winograd) {
      CudaKernels(device, filter_stream)
          .conv2d_winograd_weight_grad(x, grad_out, p.geometry, filter, space_ptr, winograd_share);
    } else if (by_engine) {
      a.bwd_filter_engine->run(filter_handle, x.raw_data(), grad_out.raw_data(), filter.raw_data(), space_ptr);
    } else {
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(filter_handle, kOne.get(dt), p.x.d, x.raw_data(), p.y.d,
                                                 grad_out.raw_data(), p.conv, a.bwd_filter, space_ptr, bytes,
                                                 kZero.get(dt), p.w, filter.raw_data()));
    }
    if (!in_place) CudaKernels(device, filter_stream).copy(filter, *grad_weight);
    if (concurrent) {
      // The compute stream waits for the side stream where what it read or wrote is next used
      // (core/cuda/side_stream.cpp): the layer below's backward runs beside this weight gradient.
      if (join_later) {
        // grad_weight is among the writes, which the allocator and the autograd engine join for; held
        // among the reads as well, it would look shared to the engine, which then joins and copies it
        // before the next layer's backward (a clone and a wait of 3.5 us in the MNIST CNN's TF32 step
        // at batch 64). A temporary filter is read by the copy and stays.
        std::vector<Tensor> reads = {x, grad_out};
        if (!in_place) reads.push_back(filter);
        if (space.defined()) reads.push_back(space);
        cuda::join_side_stream_later(device, std::move(reads), {grad_weight->impl().storage->data()});
      } else {
        cuda::stream_wait(device, stream, side);
      }
    }
  }
  if (grad_bias) {
    CUDNN_CHECK(cudnnConvolutionBackwardBias(handle, kOne.get(dt), p.y.d, grad_out.raw_data(), kZero.get(dt), p.bias.d,
                                             grad_bias->raw_data()));
  }
}

}  // namespace cudnn

namespace {

// The plan of a convolution and the algorithms it runs with now: deterministic mode's, else those
// of the mode of `stream` (op by op or captured). A null algorithms where cuDNN has none for it (the
// caller falls back to im2col).
std::pair<ConvPlan*, const ConvAlgorithms*> plan_now(int device, cudnnHandle_t handle, cudaStream_t stream,
                                                     DType dtype, int64_t batch, int64_t out_channels,
                                                     const ConvGeometry& g) {
  ConvPlan& p = conv_plan(device, handle, dtype, batch, out_channels, g);
  if (!p.ok) return {&p, nullptr};
  if (!is_deterministic()) return {&p, &p.mode[conv_mode(stream)].algorithms};
  const ConvPlan::Deterministic& d = deterministic_algorithms(handle, p);
  return {&p, d.ok ? &d.algorithms : nullptr};
}

// The plan's descriptors say where every element is: each tensor must be laid out as they say.
void check_layout(const ConvPlan& p, std::initializer_list<const Tensor*> tensors) {
  const MemoryFormat format = p.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  for (const Tensor* t : tensors)
    MINIDL_CHECK(!t || !t->defined() || t->is_contiguous(format), "conv2d (cuDNN): expected a tensor of shape ",
                 t->shape(), " laid out ", p.channels_last ? "channels-last (NHWC)" : "contiguous (NCHW)",
                 ", got strides ", t->strides());
}

}  // namespace

MemoryFormat CudaKernels::conv2d_cudnn_format(DType dtype) const { return cudnn_format(dtype); }

bool CudaKernels::conv2d_cudnn(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvGeometry& g,
                               Tensor& out) {
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  const auto [p, a] = plan_now(device_, handle, stream_, x.dtype(), x.size(0), weight.size(0), g);
  if (!a) return false;
  check_layout(*p, {&x, &weight, &out});
  run_forward(handle, device_, *p, *a, x, weight, bias, out);
  return true;
}

bool CudaKernels::conv2d_backward_cudnn(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                        const ConvGeometry& g, Tensor* grad_x, Tensor* grad_weight, Tensor* grad_bias) {
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  // x is needed only for grad_weight and weight only for grad_x: either may be undefined otherwise.
  // A forward run in deterministic mode had deterministic algorithms for all three passes.
  const auto [p, a] = plan_now(device_, handle, stream_, grad_out.dtype(), grad_out.size(0), grad_out.size(1), g);
  if (!a) return false;
  check_layout(*p, {&grad_out, &x, &weight, grad_x});  // grad_weight: any layout and floating dtype
  run_backward(handle, device_, *p, *a, grad_out, x, weight, grad_x, grad_weight, grad_bias, true);
  return true;
}

bool CudaKernels::max_pool2d_cudnn(const Tensor& x, const ConvGeometry& g, Tensor& out) {
  if (g.dilation_h != 1 || g.dilation_w != 1) return false;  // cuDNN pooling has no dilation
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  const DType dt = x.dtype();
  PoolPlan& p = pool_plan(device_, dt, x.size(0), g);
  if (!p.ok) return false;
  CUDNN_CHECK(cudnnPoolingForward(handle, p.pool, kOne.get(dt), p.x.d, x.raw_data(), kZero.get(dt), p.y.d,
                                  out.raw_data()));
  return true;
}

bool CudaKernels::max_pool2d_backward_cudnn(const Tensor& grad_out, const Tensor& x, const Tensor& out,
                                            const ConvGeometry& g, Tensor& grad_in) {
  if (g.dilation_h != 1 || g.dilation_w != 1) return false;
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  const DType dt = x.dtype();
  PoolPlan& p = pool_plan(device_, dt, x.size(0), g);
  if (!p.ok) return false;
  CUDNN_CHECK(cudnnPoolingBackward(handle, p.pool, kOne.get(dt), p.y.d, out.raw_data(), p.y.d, grad_out.raw_data(),
                                   p.x.d, x.raw_data(), kZero.get(dt), p.x.d, grad_in.raw_data()));
  return true;
}

}  // namespace minidl
