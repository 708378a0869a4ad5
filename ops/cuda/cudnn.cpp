// The cuDNN path for conv2d and max_pool2d (ops/backend_setting.h). Each geometry gets its
// descriptors and algorithms once (cached by shape), restricted to FMA math: strict float32, no TF32
// tensor cores. Algorithms come from cuDNN's heuristics (the _v7 queries, preferring deterministic
// ones) until conv_backend() Auto measures the shape: then from timing every algorithm (the Find
// queries, as cudnn.benchmark), the fastest of each pass, and the choice between cuDNN and our
// im2col path is the faster of the two measured (conv2d_cudnn_is_faster, logged once per shape). Workspaces come from the caching
// allocator and go back to it as soon as the call is queued (reuse is ordered on the compute stream).
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/cudnn_check.h"
#include "ops/cuda/cuda_kernels.h"

namespace minidl {

namespace {

cudnnHandle_t cudnn_handle(int device) {
  static std::mutex mutex;
  static auto* handles = new std::vector<cudnnHandle_t>(static_cast<size_t>(cuda::device_count()), nullptr);
  std::lock_guard lock(mutex);
  cudnnHandle_t& h = (*handles)[static_cast<size_t>(device)];
  if (!h) {
    cuda::DeviceGuard guard(device);
    CUDNN_CHECK(cudnnCreate(&h));
    CUDNN_CHECK(cudnnSetStream(h, cuda::compute_stream(device)));
  }
  return h;
}

cudnnDataType_t cudnn_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    default: MINIDL_FAIL("cuDNN path: expected float32 or float64, got ", dtype);
  }
}

int as_int(int64_t v) {
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

template <class Perf>
const Perf* pick(const Perf* perf, int count) {
  const Perf* any = nullptr;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (perf[i].mathType != CUDNN_DEFAULT_MATH && perf[i].mathType != CUDNN_FMA_MATH) continue;
    if (perf[i].determinism == CUDNN_DETERMINISTIC) return &perf[i];
    if (!any) any = &perf[i];
  }
  return any;
}

struct ConvPlan {
  TensorDesc x, y, bias;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  size_t fwd_ws = 0, bwd_data_ws = 0, bwd_filter_ws = 0;
  bool ok = false;  // false: cuDNN has no algorithm for this geometry; the caller falls back
  int faster = -1;  // Auto's verdict: 1 cuDNN, 0 im2col, -1 not measured yet
  ~ConvPlan() {
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Takes one algorithm per pass and their workspace sizes (from the queries, not the perf records:
// the records may be estimates). False, changing nothing, when a pass has none.
bool use_algorithms(cudnnHandle_t handle, ConvPlan& p, const cudnnConvolutionFwdAlgoPerf_t* fwd,
                    const cudnnConvolutionBwdDataAlgoPerf_t* bwd_data,
                    const cudnnConvolutionBwdFilterAlgoPerf_t* bwd_filter) {
  if (!fwd || !bwd_data || !bwd_filter) return false;
  p.fwd = fwd->algo;
  p.bwd_data = bwd_data->algo;
  p.bwd_filter = bwd_filter->algo;
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, p.x.d, p.w, p.conv, p.y.d, p.fwd, &p.fwd_ws));
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p.w, p.y.d, p.conv, p.x.d, p.bwd_data,
                                                           &p.bwd_data_ws));
  CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, p.x.d, p.y.d, p.conv, p.w, p.bwd_filter,
                                                             &p.bwd_filter_ws));
  return true;
}

using ConvKey = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t>;

std::mutex plans_mutex;

ConvPlan& conv_plan(int device, cudnnHandle_t handle, DType dtype, int64_t batch, int64_t out_channels,
                    const ConvGeometry& g) {
  static auto* plans = new std::map<ConvKey, std::unique_ptr<ConvPlan>>();
  ConvKey key{device,     static_cast<int>(dtype), batch,      g.channels, g.height,     g.width,      out_channels,
              g.kernel_h, g.kernel_w,              g.stride_h, g.stride_w, g.pad_h,      g.pad_w,      g.dilation_h,
              g.dilation_w};
  std::lock_guard lock(plans_mutex);
  auto& slot = (*plans)[key];
  if (slot) return *slot;
  auto plan = std::make_unique<ConvPlan>();
  ConvPlan& p = *plan;
  p.x.set(dtype, batch, g.channels, g.height, g.width);
  p.y.set(dtype, batch, out_channels, g.out_h, g.out_w);
  p.bias.set(dtype, 1, out_channels, 1, 1);
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w, cudnn_type(dtype), CUDNN_TENSOR_NCHW, as_int(out_channels),
                                         as_int(g.channels), as_int(g.kernel_h), as_int(g.kernel_w)));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv, as_int(g.pad_h), as_int(g.pad_w), as_int(g.stride_h),
                                              as_int(g.stride_w), as_int(g.dilation_h), as_int(g.dilation_w),
                                              CUDNN_CROSS_CORRELATION, cudnn_type(dtype)));
  CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, CUDNN_FMA_MATH));

  // The output size cuDNN computes must be ours, or the geometry means something else to it.
  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x.d, p.w, &n, &c, &h, &w));
  if (h == g.out_h && w == g.out_w) {
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nf = 0, nd = 0, nw = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, p.x.d, p.w, p.conv, p.y.d,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fwd));
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, p.w, p.y.d, p.conv, p.x.d,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, bwd_data));
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, p.x.d, p.y.d, p.conv, p.w,
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, bwd_filter));
    p.ok = use_algorithms(handle, p, pick(fwd, nf), pick(bwd_data, nd), pick(bwd_filter, nw));
  }
  slot = std::move(plan);
  return *slot;
}

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

// The fastest FMA-math algorithm of a Find query's results (sorted by time), and its time in ms.
template <class Perf>
const Perf* fastest(const Perf* perf, int count) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS &&
        (perf[i].mathType == CUDNN_DEFAULT_MATH || perf[i].mathType == CUDNN_FMA_MATH))
      return &perf[i];
  return nullptr;
}

// Times every algorithm of the three passes (cuDNN runs each on scratch memory it allocates) and
// keeps the fastest of each; false when a pass has none.
bool find_fastest(cudnnHandle_t handle, ConvPlan& p) {
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  cudnnConvolutionBwdDataAlgoPerf_t bwd_data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int nf = 0, nd = 0, nw = 0;
  CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(handle, p.x.d, p.w, p.conv, p.y.d, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                   &nf, fwd));
  CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(handle, p.w, p.y.d, p.conv, p.x.d,
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, bwd_data));
  CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(handle, p.x.d, p.y.d, p.conv, p.w,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, bwd_filter));
  return use_algorithms(handle, p, fastest(fwd, nf), fastest(bwd_data, nd), fastest(bwd_filter, nw));
}

// 128 MB to overwrite between timed runs, past any L2. Straight from cudaMalloc and freed at once:
// it is measurement scaffolding, not memory of the model (the caching allocator would count it in
// the peak of whatever step first meets a new shape).
struct L2Flush {
  void* ptr = nullptr;
  size_t bytes = size_t{128} << 20;
  L2Flush() { CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
  ~L2Flush() { cudaFree(ptr); }
};

// Median time in ms of `reps` runs of `work` on `stream`, after one uncounted run. Before each run
// `flush` is overwritten: a step's tensors are not in L2 when a convolution reads them, and the
// MNIST CNN's at batch 64 would fit in the H100's 50 MB.
template <class Work>
float median_ms(cudaStream_t stream, const L2Flush& flush, int reps, Work&& work) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  work();
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaMemsetAsync(flush.ptr, i & 1, flush.bytes, stream));
    CUDA_CHECK(cudaEventRecord(start, stream));
    work();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[static_cast<size_t>(reps / 2)];
}

}  // namespace

bool CudaKernels::conv2d_cudnn_is_faster(DType dtype, int64_t batch, int64_t out_channels, const ConvGeometry& g) {
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  ConvPlan& p = conv_plan(device_, handle, dtype, batch, out_channels, g);
  if (!p.ok) return false;
  if (p.faster >= 0) return p.faster == 1;
  // Timing needs the device to run now: inside a graph capture, keep im2col and measure later.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  if (capture != cudaStreamCaptureStatusNone) return false;

  // One measurement at a time (conv2d_cudnn below takes the plans' lock itself).
  static std::mutex measuring;
  std::lock_guard lock(measuring);
  if (p.faster >= 0) return p.faster == 1;
  const bool found = find_fastest(handle, p);
  // Both paths on the same scratch tensors, as ops/conv2d.cpp runs them: forward with the bias, the
  // input gradient, and the weight and bias gradients (by our reductions on either path).
  const int64_t k = g.channels * g.kernel_h * g.kernel_w, l = g.out_h * g.out_w, o = out_channels;
  const Device dev = Device::cuda(device_);
  Tensor x = Tensor::empty({batch, g.channels, g.height, g.width}, dtype, dev), gx = Tensor::empty(x.shape(), dtype, dev);
  Tensor w = Tensor::empty({o, k}, dtype, dev), gw = Tensor::empty({o, k}, dtype, dev);
  Tensor cols = Tensor::empty({batch, k, l}, dtype, dev), gcols = Tensor::empty({batch, k, l}, dtype, dev);
  Tensor out = Tensor::empty({batch, o, l}, dtype, dev), per_sample = Tensor::empty({batch, o, k}, dtype, dev);
  Tensor bias = Tensor::empty({o}, dtype, dev), gb = Tensor::empty({o}, dtype, dev), gb_rows = Tensor::empty({batch, o}, dtype, dev);
  for (Tensor* t : {&x, &w, &out, &bias}) fill(*t, 0.5);
  const Tensor bias_view = Tensor::make_view(bias, {batch, o, l}, {0, 1, 0}, 0);
  const L2Flush flush;
  const auto bias_grad = [&] {
    reduce(ReduceOp::Sum, out, batch * o, l, 1, gb_rows, nullptr);
    reduce(ReduceOp::Sum, gb_rows, 1, batch, o, gb, nullptr);
  };
  float cudnn_ms = -1;
  if (found) {
    Tensor w4 = Tensor::make_view(w, {o, g.channels, g.kernel_h, g.kernel_w}, contiguous_strides({o, g.channels, g.kernel_h, g.kernel_w}), 0);
    Tensor gw4 = Tensor::make_view(gw, w4.shape(), w4.strides(), 0);
    Tensor out4 = Tensor::make_view(out, {batch, o, g.out_h, g.out_w}, contiguous_strides({batch, o, g.out_h, g.out_w}), 0);
    cudnn_ms = median_ms(stream_, flush, 7, [&] {
      conv2d_cudnn(x, w4, &bias, g, out4);
      conv2d_backward_cudnn(out4, x, w4, g, &gx, &gw4, nullptr);
      bias_grad();
    });
  }
  const float im2col_ms = median_ms(stream_, flush, 7, [&] {
    im2col(x, g, cols);
    gemm(w, false, cols, false, out, 1, 0);
    binary(BinaryOp::Add, out, bias_view, out);
    gemm(w, true, out, false, gcols, 1, 0);
    col2im(gcols, g, gx);
    gemm(out, false, cols, true, per_sample, 1, 0);
    reduce(ReduceOp::Sum, per_sample, 1, batch, o * k, gw, nullptr);
    bias_grad();
  });
  p.faster = cudnn_ms >= 0 && cudnn_ms < im2col_ms ? 1 : 0;
  std::fprintf(stderr,
               "minidl: conv2d [%lld, %lld, %lld, %lld] * [%lld, %lld, %lld, %lld]: %s (cuDNN algorithms %d/%d/%d "
               "%.3f ms, im2col %.3f ms, forward and backward, L2 flushed)\n",
               static_cast<long long>(batch), static_cast<long long>(g.channels), static_cast<long long>(g.height),
               static_cast<long long>(g.width), static_cast<long long>(o), static_cast<long long>(g.channels),
               static_cast<long long>(g.kernel_h), static_cast<long long>(g.kernel_w), p.faster ? "cuDNN" : "im2col",
               static_cast<int>(p.fwd), static_cast<int>(p.bwd_data), static_cast<int>(p.bwd_filter), cudnn_ms,
               im2col_ms);
  return p.faster == 1;
}

bool CudaKernels::conv2d_cudnn(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvGeometry& g,
                               Tensor& out) {
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  const DType dt = x.dtype();
  ConvPlan& p = conv_plan(device_, handle, dt, x.size(0), weight.size(0), g);
  if (!p.ok) return false;
  Workspace ws(device_, p.fwd_ws);
  CUDNN_CHECK(cudnnConvolutionForward(handle, kOne.get(dt), p.x.d, x.raw_data(), p.w, weight.raw_data(), p.conv,
                                      p.fwd, ws.get(), ws.size(), kZero.get(dt), p.y.d, out.raw_data()));
  if (bias && bias->defined()) {
    CUDNN_CHECK(cudnnAddTensor(handle, kOne.get(dt), p.bias.d, bias->raw_data(), kOne.get(dt), p.y.d, out.raw_data()));
  }
  return true;
}

bool CudaKernels::conv2d_backward_cudnn(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                        const ConvGeometry& g, Tensor* grad_x, Tensor* grad_weight, Tensor* grad_bias) {
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  const DType dt = grad_out.dtype();
  // x is needed only for grad_weight and weight only for grad_x: either may be undefined otherwise.
  ConvPlan& p = conv_plan(device_, handle, dt, grad_out.size(0), grad_out.size(1), g);
  if (!p.ok) return false;
  if (grad_x) {
    Workspace ws(device_, p.bwd_data_ws);
    CUDNN_CHECK(cudnnConvolutionBackwardData(handle, kOne.get(dt), p.w, weight.raw_data(), p.y.d, grad_out.raw_data(),
                                             p.conv, p.bwd_data, ws.get(), ws.size(), kZero.get(dt), p.x.d,
                                             grad_x->raw_data()));
  }
  if (grad_weight) {
    Workspace ws(device_, p.bwd_filter_ws);
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, kOne.get(dt), p.x.d, x.raw_data(), p.y.d, grad_out.raw_data(),
                                               p.conv, p.bwd_filter, ws.get(), ws.size(), kZero.get(dt), p.w,
                                               grad_weight->raw_data()));
  }
  if (grad_bias) {
    CUDNN_CHECK(cudnnConvolutionBackwardBias(handle, kOne.get(dt), p.y.d, grad_out.raw_data(), kZero.get(dt), p.bias.d,
                                             grad_bias->raw_data()));
  }
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
