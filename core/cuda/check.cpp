// Error texts of the CUDA libraries, and the one place that turns a failed call into minidl::Error.
#include "core/cuda/check.h"

namespace minidl::cuda::detail {

void throw_call_error(const char* library, const char* call, const std::string& error, const char* file, int line) {
  ::minidl::detail::throw_error(file, line, std::string(library) + " call " + call + " failed: " + error);
}

std::string cuda_error_text(cudaError_t status) {
  return std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
}

std::string cublas_error_text(cublasStatus_t status) {
  return std::string(cublasGetStatusString(status)) + " (" + cublasGetStatusName(status) + ")";
}

// cuRAND has no string function of its own; these are its documented meanings.
std::string curand_error_text(curandStatus_t status) {
  const char* text = "unknown cuRAND status";
  switch (status) {
    case CURAND_STATUS_SUCCESS: text = "no error"; break;
    case CURAND_STATUS_VERSION_MISMATCH: text = "header file and linked library version do not match"; break;
    case CURAND_STATUS_NOT_INITIALIZED: text = "generator not initialized"; break;
    case CURAND_STATUS_ALLOCATION_FAILED: text = "memory allocation failed"; break;
    case CURAND_STATUS_TYPE_ERROR: text = "generator is wrong type"; break;
    case CURAND_STATUS_OUT_OF_RANGE: text = "argument out of range"; break;
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: text = "length requested is not a multiple of dimension"; break;
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: text = "GPU does not have double precision required"; break;
    case CURAND_STATUS_LAUNCH_FAILURE: text = "kernel launch failure"; break;
    case CURAND_STATUS_PREEXISTING_FAILURE: text = "preexisting failure on library entry"; break;
    case CURAND_STATUS_INITIALIZATION_FAILED: text = "initialization of CUDA failed"; break;
    case CURAND_STATUS_ARCH_MISMATCH: text = "architecture mismatch, GPU does not support requested feature"; break;
    case CURAND_STATUS_INTERNAL_ERROR: text = "internal library error"; break;
  }
  return std::string(text) + " (curandStatus " + std::to_string(static_cast<int>(status)) + ")";
}

}  // namespace minidl::cuda::detail
