// The test computations of diagnose_cuda: a kernel, a cuBLAS GEMM and a cuDNN convolution on tiny
// inputs whose answers are small integers, so any difference from the host's answer is a fault, not
// rounding. Each runs on its own handles and plain cudaMalloc memory, apart from minidl's
// allocator and streams, so a failure points at the driver, the GPU or the library itself.
#include <cublas_v2.h>
#ifdef MINIDL_WITH_CUDNN
#include <cudnn.h>
#endif

#include <cmath>
#include <functional>

#include "core/cuda/diagnostics.h"

namespace minidl::diagnostics::detail {

namespace {

// Thrown inside one check and caught by run_checks: the failure and its fix.
struct Failure {
  std::string what, fix;
};

const char* kFaultyGpu =
    "check `dmesg` for Xid errors and `nvidia-smi -q` for ECC errors; reset the GPU (nvidia-smi -r) or reboot";

std::string cuda_fix(cudaError_t status, const Gpu& g) {
  switch (status) {
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
      return "rebuild with " + architecture_flag(g.major, g.minor);
    case cudaErrorUnsupportedPtxVersion:
      return "update the NVIDIA driver (the PTX is newer than it), or rebuild with " + architecture_flag(g.major, g.minor);
    case cudaErrorMemoryAllocation:
      return "free GPU memory: `nvidia-smi` lists the processes holding it";
    default:
      return kFaultyGpu;
  }
}

#define DIAG_CUDA(call)                                                                                   \
  do {                                                                                                    \
    cudaError_t diag_status_ = (call);                                                                    \
    if (diag_status_ != cudaSuccess) {                                                                    \
      cudaGetLastError();                                                                                 \
      throw Failure{std::string(#call) + " failed: " + cudaGetErrorName(diag_status_), cuda_fix(diag_status_, g)}; \
    }                                                                                                     \
  } while (0)

// Undoes what a check created, in reverse order, however the check ends.
struct Cleanup {
  std::vector<std::function<void()>> steps;
  ~Cleanup() {
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) (*it)();
  }
};

float* device_copy(const Gpu& g, Cleanup& cleanup, const std::vector<float>& host) {
  void* p = nullptr;
  DIAG_CUDA(cudaMalloc(&p, host.size() * sizeof(float)));
  cleanup.steps.push_back([p] { cudaFree(p); });
  DIAG_CUDA(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return static_cast<float*>(p);
}

std::vector<float> host_copy(const Gpu& g, const float* device, size_t n) {
  std::vector<float> host(n);
  DIAG_CUDA(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// "" when equal; else the first difference.
std::string compare(const std::vector<float>& got, const std::vector<double>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-6 * std::fabs(want[i]))) {
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
    }
  return "";
}

std::string kernel_check(const Gpu& g) {
  const int n = 1003;  // not a multiple of the block size
  std::vector<float> x(n);
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) x[i] = 0.5f * i - 100, want[i] = 2.0 * x[i] + 1;
  Cleanup cleanup;
  float* dx = device_copy(g, cleanup, x);
  float* dy = device_copy(g, cleanup, std::vector<float>(n, -1));
  DIAG_CUDA(launch_probe_kernel(dx, dy, n));
  DIAG_CUDA(cudaDeviceSynchronize());
  return compare(host_copy(g, dy, n), want);
}

#define DIAG_CUBLAS(call)                                                                                   \
  do {                                                                                                      \
    cublasStatus_t diag_status_ = (call);                                                                   \
    if (diag_status_ != CUBLAS_STATUS_SUCCESS)                                                              \
      throw Failure{std::string(#call) + " failed: " + cublasGetStatusName(diag_status_),                  \
                    diag_status_ == CUBLAS_STATUS_ARCH_MISMATCH ? "rebuild with " + architecture_flag(g.major, g.minor) \
                                                                : std::string(kFaultyGpu)};                 \
  } while (0)

std::string gemm_check(const Gpu& g) {
  const int m = 2, k = 3, n = 4;  // C(m x n) = A(m x k) B(k x n), column-major as cuBLAS reads them
  std::vector<float> a(m * k), b(k * n);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>(i + 1);
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>(i % 5) - 2;
  std::vector<double> want(m * n, 0);
  for (int col = 0; col < n; ++col)
    for (int row = 0; row < m; ++row)
      for (int j = 0; j < k; ++j) want[col * m + row] += a[j * m + row] * b[col * k + j];
  Cleanup cleanup;
  float* da = device_copy(g, cleanup, a);
  float* db = device_copy(g, cleanup, b);
  float* dc = device_copy(g, cleanup, std::vector<float>(m * n, -1));
  cublasHandle_t handle = nullptr;
  DIAG_CUBLAS(cublasCreate(&handle));
  cleanup.steps.push_back([handle] { cublasDestroy(handle); });
  const float one = 1, zero = 0;
  DIAG_CUBLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, m, db, k, &zero, dc, m));
  DIAG_CUDA(cudaDeviceSynchronize());
  return compare(host_copy(g, dc, m * n), want);
}

#ifdef MINIDL_WITH_CUDNN
// The legacy convolution API (deprecated, present through cuDNN 9) is the one ops/cuda/cudnn.cpp
// trains with, so this check loads the same parts of cuDNN.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

std::string cudnn_fix(cudnnStatus_t status, const Gpu& g) {
  if (status == CUDNN_STATUS_ARCH_MISMATCH) return "rebuild with " + architecture_flag(g.major, g.minor);
#if CUDNN_MAJOR >= 9
  if (status == CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED) return install_hint("cudnn");
#endif
  if (status == CUDNN_STATUS_NOT_INITIALIZED) return install_hint("cudnn") + "; " + kFaultyGpu;
  return kFaultyGpu;
}

#define DIAG_CUDNN(call)                                                                                 \
  do {                                                                                                   \
    cudnnStatus_t diag_status_ = (call);                                                                 \
    if (diag_status_ != CUDNN_STATUS_SUCCESS)                                                            \
      throw Failure{std::string(#call) + " failed: " + cudnnGetErrorString(diag_status_), cudnn_fix(diag_status_, g)}; \
  } while (0)

std::string convolution_check(const Gpu& g) {
  const int size = 5;  // a 5x5 image, a 3x3 filter, padding 1: a 5x5 output
  std::vector<float> x(size * size), w = {1, 0, -1, 2, 0, -2, 1, 0, -1};
  for (int i = 0; i < size * size; ++i) x[i] = static_cast<float>(i % 7) - 3;
  std::vector<double> want(size * size, 0);
  for (int r = 0; r < size; ++r)
    for (int c = 0; c < size; ++c)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          const int rr = r + i - 1, cc = c + j - 1;
          if (rr >= 0 && rr < size && cc >= 0 && cc < size) want[r * size + c] += w[i * 3 + j] * x[rr * size + cc];
        }
  Cleanup cleanup;
  float* dx = device_copy(g, cleanup, x);
  float* dw = device_copy(g, cleanup, w);
  float* dy = device_copy(g, cleanup, std::vector<float>(size * size, -1));
  cudnnHandle_t handle = nullptr;
  DIAG_CUDNN(cudnnCreate(&handle));
  cleanup.steps.push_back([handle] { cudnnDestroy(handle); });
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  DIAG_CUDNN(cudnnCreateTensorDescriptor(&xd));
  cleanup.steps.push_back([xd] { cudnnDestroyTensorDescriptor(xd); });
  DIAG_CUDNN(cudnnCreateTensorDescriptor(&yd));
  cleanup.steps.push_back([yd] { cudnnDestroyTensorDescriptor(yd); });
  DIAG_CUDNN(cudnnCreateFilterDescriptor(&wd));
  cleanup.steps.push_back([wd] { cudnnDestroyFilterDescriptor(wd); });
  DIAG_CUDNN(cudnnCreateConvolutionDescriptor(&cd));
  cleanup.steps.push_back([cd] { cudnnDestroyConvolutionDescriptor(cd); });
  DIAG_CUDNN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, size, size));
  DIAG_CUDNN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, size, size));
  DIAG_CUDNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 1, 1, 3, 3));
  DIAG_CUDNN(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DIAG_CUDNN(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes = 0;
  DIAG_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wd, cd, yd, algo, &workspace_bytes));
  void* workspace = nullptr;
  if (workspace_bytes > 0) {
    DIAG_CUDA(cudaMalloc(&workspace, workspace_bytes));
    cleanup.steps.push_back([workspace] { cudaFree(workspace); });
  }
  const float one = 1, zero = 0;
  DIAG_CUDNN(cudnnConvolutionForward(handle, &one, xd, dx, wd, dw, cd, algo, workspace, workspace_bytes, &zero, yd, dy));
  DIAG_CUDA(cudaDeviceSynchronize());
  return compare(host_copy(g, dy, size * size), want);
}

#pragma GCC diagnostic pop
#endif

}  // namespace

std::vector<Check> run_checks(const Gpu& g, std::vector<Problem>& problems) {
  std::vector<std::pair<const char*, std::function<std::string(const Gpu&)>>> all = {
      {"kernel", kernel_check}, {"cuBLAS GEMM", gemm_check}};
#ifdef MINIDL_WITH_CUDNN
  all.emplace_back("cuDNN convolution", convolution_check);
#endif
  const std::string gpu = "cuda:" + std::to_string(g.index);
  std::vector<Check> checks;
  for (const auto& [name, run] : all) {
    Check c{name, false, ""};
    try {
      const std::string difference = run(g);
      c.passed = difference.empty();
      c.detail = c.passed ? "right numbers" : "wrong numbers: " + difference;
      if (!c.passed) problems.push_back({std::string(name) + " on " + gpu + " gave wrong numbers (" + difference + ")", kFaultyGpu});
    } catch (const Failure& f) {
      c.detail = f.what;
      problems.push_back({std::string(name) + " on " + gpu + " failed: " + f.what, f.fix});
    }
    checks.push_back(std::move(c));
  }
  return checks;
}

}  // namespace minidl::diagnostics::detail
