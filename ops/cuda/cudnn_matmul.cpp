// A product whose epilogue multiplies by a tensor, through cuDNN's graph API (ops/kernels.h's
// gemm_times): c = (op(a) @ op(b)) * factor, the float32 sums multiplied before the one rounding to
// the 16-bit type. linear_gelu_linear's backward takes its GELU's input gradient this way, from the
// derivative its forward stored: (g @ w2) * gelu'(hidden) in one kernel, where cuBLAS's product and a
// pass of minidl's own wrote and read the [rows, hidden] product once more. cuBLASLt has no epilogue
// of that form (its DGELU is the tanh form's derivative, of the GELU's input), so cuDNN's runtime
// fusion engines compile one. Plans are built and timed once per geometry on first use (keep that
// out of a graph capture, as a warm-up step does) and cached; one cuDNN has no engine for is
// remembered, and the caller composes the product and a multiply instead.
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/check.h"
#include "core/cuda/launch.cuh"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cudnn_backend.h"
#include "ops/cuda/cudnn_plan.h"
#include "ops/cuda/timing.h"

namespace minidl {

namespace cudnn {

namespace {

using namespace backend;

enum : int64_t { kA = 1, kB, kFactor, kC, kSums = 100 };

// [1, rows, cols] with the strides of a 2-D operand read as stored (trans false) or transposed.
struct Operand {
  std::array<int64_t, 3> dims{}, strides{};
};

Operand operand(const Tensor& t, bool trans) {
  const int64_t rows = trans ? t.size(1) : t.size(0), cols = trans ? t.size(0) : t.size(1);
  const int64_t row_stride = trans ? t.stride(1) : t.stride(0), col_stride = trans ? t.stride(0) : t.stride(1);
  return {{1, rows, cols}, {rows * cols, row_stride, col_stride}};
}

struct Candidate {
  cudnnBackendDescriptor_t plan;
  size_t workspace;
};

// The plan of one geometry and the descriptors it was made from.
class ProductTimesPlan {
 public:
  ~ProductTimesPlan() { destroy_all(keep_); }
  cudnnBackendDescriptor_t plan = nullptr;
  size_t workspace = 0;
  std::vector<cudnnBackendDescriptor_t> keep_;
};

cudnnBackendDescriptor_t tensor(std::vector<cudnnBackendDescriptor_t>& keep, int64_t id, cudnnDataType_t type,
                                const Operand& t, bool is_virtual) {
  return backend::tensor(keep, id, type, 3, t.dims.data(), t.strides.data(), is_virtual);
}

// The graph sums = a b (float32), c = sums * factor, and the plans of the engine configurations the
// heuristics offer that finalize (none where cuDNN has no engine for it).
std::unique_ptr<ProductTimesPlan> build(cudnnHandle_t handle, cudnnDataType_t type, const Operand& a,
                                        const Operand& b, const Operand& c, std::vector<Candidate>& candidates) {
  auto p = std::make_unique<ProductTimesPlan>();
  std::vector<cudnnBackendDescriptor_t>& keep = p->keep_;
  const cudnnBackendDescriptor_t ta = tensor(keep, kA, type, a, false), tb = tensor(keep, kB, type, b, false);
  const cudnnBackendDescriptor_t sums = tensor(keep, kSums, CUDNN_DATA_FLOAT, c, true);
  const cudnnBackendDescriptor_t factor = tensor(keep, kFactor, type, c, false), tc = tensor(keep, kC, type, c, false);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;

  const cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, keep);
  CUDNN_CHECK(cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math));
  CUDNN_CHECK(cudnnBackendFinalize(mm));
  const cudnnBackendDescriptor_t product = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, keep);
  set_descriptor(product, CUDNN_ATTR_OPERATION_MATMUL_ADESC, ta);
  set_descriptor(product, CUDNN_ATTR_OPERATION_MATMUL_BDESC, tb);
  set_descriptor(product, CUDNN_ATTR_OPERATION_MATMUL_CDESC, sums);
  set_descriptor(product, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
  CUDNN_CHECK(cudnnBackendFinalize(product));

  const cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, keep);
  const cudnnPointwiseMode_t mul = CUDNN_POINTWISE_MUL;
  CUDNN_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mul));
  CUDNN_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math));
  CUDNN_CHECK(cudnnBackendFinalize(pw));
  const cudnnBackendDescriptor_t times = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, keep);
  set_descriptor(times, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  set_descriptor(times, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, sums);
  set_descriptor(times, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, factor);
  set_descriptor(times, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tc);
  CUDNN_CHECK(cudnnBackendFinalize(times));

  const cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, keep);
  const cudnnBackendDescriptor_t ops[2] = {product, times};
  CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 2, ops));
  CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  if (cudnnBackendFinalize(graph) != CUDNN_STATUS_SUCCESS) return nullptr;
  for (cudnnBackendDescriptor_t config : heuristic_configs(graph, keep)) {
    const cudnnBackendDescriptor_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, keep);
    set_descriptor(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
    CUDNN_CHECK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    if (cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS) continue;
    int64_t bytes = 0, got = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                         &bytes));
    candidates.push_back({plan, static_cast<size_t>(std::max<int64_t>(bytes, 0))});
  }
  if (candidates.empty()) return nullptr;
  return p;
}

using Key = std::tuple<int, int, std::vector<int64_t>>;  // dtype, device, the three operands' layouts

// The plan for `key`: of the heuristics' configurations, the fastest as a captured step runs it, timed
// on the call's own operands (`run` queues one product with a plan and a workspace). The heuristics'
// first choice is not always it: at char_gpt's [16384, 384] x [384, 1536] on an H100 it took 69.4 us
// alone and the fastest of its others 53.2 (docs/benchmarks.md, thirty-fourth section). Inside a
// graph capture nothing can be timed, and the first choice is kept. Null (remembered) where cuDNN
// has none.
const ProductTimesPlan* cached_plan(const Key& key, cudnnHandle_t handle, cudnnDataType_t type, const Operand& a,
                                    const Operand& b, const Operand& c, Device device,
                                    const std::function<void(cudnnBackendDescriptor_t, void*)>& run) {
  static std::mutex mutex;
  static auto* plans = new std::map<Key, std::unique_ptr<ProductTimesPlan>>();
  std::lock_guard lock(mutex);
  auto it = plans->find(key);
  if (it == plans->end()) {
    std::unique_ptr<ProductTimesPlan> plan;
    std::vector<Candidate> candidates;
    try {
      plan = build(handle, type, a, b, c, candidates);
    } catch (const Error&) {
      plan = nullptr;  // a descriptor this cuDNN would not finalize
    }
    if (plan) {
      cudaStream_t stream = nullptr;
      CUDNN_CHECK(cudnnGetStream(handle, &stream));
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
      size_t best = 0;
      if (capture == cudaStreamCaptureStatusNone && candidates.size() > 1) {
        size_t most = 1;
        for (const Candidate& k : candidates) most = std::max(most, k.workspace);
        Tensor workspace = Tensor::empty({static_cast<int64_t>(most)}, kUInt8, device);
        float fastest = 0;
        for (size_t i = 0; i < candidates.size(); ++i) {
          const float us =
              cuda::time_per_replay_us(stream, [&] { run(candidates[i].plan, workspace.raw_data()); }, 4, 3);
          if (i == 0 || us < fastest) fastest = us, best = i;
        }
      }
      plan->plan = candidates[best].plan;
      plan->workspace = candidates[best].workspace;
    }
    it = plans->emplace(key, std::move(plan)).first;
  }
  return it->second.get();
}

}  // namespace

}  // namespace cudnn

// The graph promises cuDNN 16-byte alignment, of each operand and of each of its rows: contiguous rows
// of k and n 16-bit values are aligned where k and n are multiples of 8.
bool CudaKernels::gemm_times_supported(DType dtype, int64_t k, int64_t n) const {
  return (dtype == kBFloat16 || dtype == kFloat16) && k % 8 == 0 && n % 8 == 0 && cuda::hopper_or_later(device_) &&
         cudnnGetVersion() >= 90000;
}

bool CudaKernels::gemm_times(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& factor,
                             Tensor& c) {
  if (a.dtype() != c.dtype() || b.dtype() != c.dtype() || factor.dtype() != c.dtype() || a.dim() != 2 ||
      b.dim() != 2 || c.dim() != 2 || factor.shape() != c.shape() || !c.is_contiguous() || !factor.is_contiguous() ||
      c.numel() == 0 || !gemm_times_supported(c.dtype(), trans_a ? a.size(0) : a.size(1), c.size(1)))
    return false;
  // Views (a transposed weight, say) have rows of their own strides: each aligned too.
  for (const Tensor* t : {&a, &b, &factor, static_cast<const Tensor*>(&c)}) {
    if (reinterpret_cast<uintptr_t>(t->raw_data()) % 16 != 0) return false;
    for (int d = 0; d < 2; ++d)
      if (t->size(d) > 1 && t->stride(d) != 1 && (t->stride(d) * t->element_size()) % 16 != 0) return false;
  }
  const cudnn::Operand oa = cudnn::operand(a, trans_a), ob = cudnn::operand(b, trans_b), oc = cudnn::operand(c, false);
  if (oa.dims[2] != ob.dims[1] || oa.dims[1] != oc.dims[1] || ob.dims[2] != oc.dims[2]) return false;
  cudnn::Key key{static_cast<int>(c.dtype()), device_, {}};
  std::vector<int64_t>& layout = std::get<2>(key);
  for (const cudnn::Operand* o : {&oa, &ob, &oc}) {
    layout.insert(layout.end(), o->dims.begin(), o->dims.end());
    layout.insert(layout.end(), o->strides.begin(), o->strides.end());
  }
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn::cudnn_handle(device_);
  const int64_t ids[4] = {cudnn::kA, cudnn::kB, cudnn::kFactor, cudnn::kC};
  void* const pointers[4] = {a.raw_data(), b.raw_data(), factor.raw_data(), c.raw_data()};
  const auto run = [&](cudnnBackendDescriptor_t plan, void* workspace) {
    cudnn::backend::execute(handle, plan, ids, pointers, 4, workspace);
  };
  const cudnn::ProductTimesPlan* plan =
      cudnn::cached_plan(key, handle, cudnn::cudnn_type(c.dtype()), oa, ob, oc, c.device(), run);
  if (!plan) return false;
  Tensor workspace = Tensor::empty({static_cast<int64_t>(std::max<size_t>(plan->workspace, 1))}, kUInt8, c.device());
  run(plan->plan, workspace.raw_data());
  return true;
}

}  // namespace minidl
