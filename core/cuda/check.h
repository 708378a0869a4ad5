#pragma once
// Checked CUDA, cuBLAS and cuRAND calls (cuDNN: core/cuda/cudnn_check.h). A failing call throws
// minidl::Error naming the call as written, the library's own error text, file and line:
//   CUDA_CHECK(cudaMalloc(&ptr, n));
//   -> "CUDA call cudaMalloc(&ptr, n) failed: out of memory (cudaErrorMemoryAllocation) (core/cuda/allocator.cpp:80)"
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <curand.h>

#include <string>

#include "core/error.h"

namespace minidl::cuda::detail {

[[noreturn]] void throw_call_error(const char* library, const char* call, const std::string& error, const char* file,
                                   int line);
std::string cuda_error_text(cudaError_t status);
std::string cublas_error_text(cublasStatus_t status);
std::string curand_error_text(curandStatus_t status);

}  // namespace minidl::cuda::detail

#define CUDA_CHECK(call)                                                                                       \
  do {                                                                                                         \
    cudaError_t minidl_status_ = (call);                                                                       \
    if (minidl_status_ != cudaSuccess)                                                                         \
      ::minidl::cuda::detail::throw_call_error("CUDA", #call, ::minidl::cuda::detail::cuda_error_text(minidl_status_), \
                                               __FILE__, __LINE__);                                            \
  } while (0)

#define CUBLAS_CHECK(call)                                                                                     \
  do {                                                                                                         \
    cublasStatus_t minidl_status_ = (call);                                                                    \
    if (minidl_status_ != CUBLAS_STATUS_SUCCESS)                                                               \
      ::minidl::cuda::detail::throw_call_error("cuBLAS", #call,                                                \
                                               ::minidl::cuda::detail::cublas_error_text(minidl_status_), __FILE__, \
                                               __LINE__);                                                      \
  } while (0)

#define CURAND_CHECK(call)                                                                                     \
  do {                                                                                                         \
    curandStatus_t minidl_status_ = (call);                                                                    \
    if (minidl_status_ != CURAND_STATUS_SUCCESS)                                                               \
      ::minidl::cuda::detail::throw_call_error("cuRAND", #call,                                                \
                                               ::minidl::cuda::detail::curand_error_text(minidl_status_), __FILE__, \
                                               __LINE__);                                                      \
  } while (0)

/// After a kernel launch: reports a bad launch configuration (and any earlier asynchronous error)
/// where it happened, naming the kernel.   kernel<<<grid, block, 0, stream>>>(...); CUDA_LAUNCH_CHECK(kernel);
#define CUDA_LAUNCH_CHECK(kernel)                                                                              \
  do {                                                                                                         \
    cudaError_t minidl_status_ = cudaGetLastError();                                                           \
    if (minidl_status_ != cudaSuccess)                                                                         \
      ::minidl::cuda::detail::throw_call_error("CUDA", "launch of kernel " #kernel,                            \
                                               ::minidl::cuda::detail::cuda_error_text(minidl_status_), __FILE__, \
                                               __LINE__);                                                      \
  } while (0)
