// nn::Linear's GEMMs on cuBLASLt, with the bias in the GEMM's epilogue: the forward adds it as it
// writes the output (no copy of the bias into the output first), and the weight-gradient GEMM sums
// the bias gradient over the batch as it reads the output gradient (no separate reduction). Float32
// only, strict (CUBLAS_COMPUTE_32F: no TF32); anything else answers false and ops/matmul.cpp composes
// the same result from GEMM and reduction kernels.
//
// Row-major buffers read as column-major are transposed matrices (ops/cuda/matmul.cpp), so:
//   forward   out [M, N] = x [M, K] @ W [N, K]^T + b   is  D(N x M) = op_T(W: K x N) * (x: K x M)
//             with the bias along D's rows (EPILOGUE_BIAS);
//   gradient  gW [N, K] = g [M, N]^T @ x [M, K], gb = sum_m g  is  D(K x N) = (x: K x M) * op_T(g: N x M)
//             with the bias gradient along D's columns, reduced over the GEMM's k = M (EPILOGUE_BGRADB).
#include <cublasLt.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/cuda/check.h"
#include "ops/cuda/cuda_kernels.h"

namespace minidl {

namespace {

struct LtHandle {
  cublasLtHandle_t handle = nullptr;
  Tensor workspace;  // shared by every plan of the device; calls are ordered on its compute stream
};

constexpr size_t kWorkspaceBytes = size_t{4} << 20;

LtHandle& lt(int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<int, LtHandle>();
  std::lock_guard lock(mutex);
  LtHandle& h = (*handles)[device];
  if (!h.handle) {
    CUBLAS_CHECK(cublasLtCreate(&h.handle));
    h.workspace = Tensor::empty({static_cast<int64_t>(kWorkspaceBytes / 4)}, kFloat32, Device::cuda(device));
  }
  return h;
}

// One GEMM shape with its epilogue: descriptors and the algorithm cuBLASLt's heuristic picked.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;  // false: no algorithm supports this shape and epilogue
  ~LtPlan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    for (auto layout : {a, b, d})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
  }
};

// D (m x n) = op(A) * op(B), A stored (trans_a ? k x m : m x k), B stored (trans_b ? n x k : k x n),
// all column-major and packed.
using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, bool, bool, int>;

LtPlan& plan(int device, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, cublasLtEpilogue_t epilogue) {
  static std::mutex mutex;
  static auto* plans = new std::map<PlanKey, std::unique_ptr<LtPlan>>();
  std::lock_guard lock(mutex);
  auto& slot = (*plans)[{device, m, n, k, trans_a, trans_b, static_cast<int>(epilogue)}];
  if (slot) return *slot;
  slot = std::make_unique<LtPlan>();
  LtPlan& p = *slot;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  const cudaDataType_t bias_type = CUDA_R_32F;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, trans_a ? k : m, trans_a ? m : k, trans_a ? k : m));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, trans_b ? n : k, trans_b ? k : n, trans_b ? n : k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, m, n, m));
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt(device).handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = result.algo;
    p.ok = true;
  } else if (status != CUBLAS_STATUS_NOT_SUPPORTED) {
    CUBLAS_CHECK(status);
  }
  return p;
}

bool run(int device, cudaStream_t stream, LtPlan& p, const void* a, const void* b, void* d, void* bias) {
  if (!p.ok) return false;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float one = 1, zero = 0;
  LtHandle& h = lt(device);
  CUBLAS_CHECK(cublasLtMatmul(h.handle, p.desc, &one, a, p.a, b, p.b, &zero, d, p.d, d, p.d, &p.algo,
                              h.workspace.raw_data(), kWorkspaceBytes, stream));
  return true;
}

}  // namespace

bool CudaKernels::linear_bias(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& out) {
  if (x.dtype() != kFloat32) return false;
  const int64_t m = out.size(0), n = out.size(1), k = x.size(1);
  if (m == 0 || n == 0 || k == 0) return false;
  cuda::DeviceGuard guard(device_);
  // D(N x M) = op_T(W stored K x N) * (x stored K x M)
  LtPlan& p = plan(device_, n, m, k, true, false, CUBLASLT_EPILOGUE_BIAS);
  return run(device_, stream_, p, weight.raw_data(), x.raw_data(), out.raw_data(), bias.raw_data());
}

bool CudaKernels::linear_weight_bias_grad(const Tensor& grad, const Tensor& x, Tensor& grad_weight, Tensor& grad_bias) {
  if (grad.dtype() != kFloat32) return false;
  const int64_t rows = grad.size(0), out_features = grad.size(1), in = x.size(1);
  if (rows == 0 || out_features == 0 || in == 0) return false;
  cuda::DeviceGuard guard(device_);
  // D(K x N) = (x stored K x M) * op_T(g stored N x M)
  LtPlan& p = plan(device_, in, out_features, rows, false, true, CUBLASLT_EPILOGUE_BGRADB);
  return run(device_, stream_, p, x.raw_data(), grad.raw_data(), grad_weight.raw_data(), grad_bias.raw_data());
}

}  // namespace minidl
