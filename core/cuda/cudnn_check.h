#pragma once
// CUDNN_CHECK(call): like CUDA_CHECK (core/cuda/check.h), with cuDNN's own error text.
#include <cudnn.h>

#include "core/cuda/check.h"

#define CUDNN_CHECK(call)                                                                                     \
  do {                                                                                                        \
    cudnnStatus_t minidl_status_ = (call);                                                                    \
    if (minidl_status_ != CUDNN_STATUS_SUCCESS)                                                               \
      ::minidl::cuda::detail::throw_call_error("cuDNN", #call,                                                \
                                               std::string(cudnnGetErrorString(minidl_status_)) + " (status " + \
                                                   std::to_string(static_cast<int>(minidl_status_)) + ")",    \
                                               __FILE__, __LINE__);                                           \
  } while (0)
