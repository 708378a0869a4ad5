#pragma once
// What a cuda::ElementwiseKernel knows once constructed: its parsed parameters, its generated
// forward source, and how its backward is laid out. Shared by the host-only part
// (ops/elementwise_kernel.cpp) and the CUDA part (ops/cuda/elementwise_kernel.cpp).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/elementwise_kernel.h"
#include "ops/elementwise_kernel_source.h"
#include "ops/kernel_params.h"

namespace minidl::cuda {

struct ElementwiseKernel::Impl {
  std::string name;
  std::string what;             // cuda::ElementwiseKernel "name", the start of every error
  const char* tape_name = "";   // the name on the autograd tape, which keeps the pointer for good
  std::vector<rtc::KernelParam> inputs, outputs;
  std::string body;
  std::vector<std::string> backward;  // statements; empty when not differentiable
  rtc::GeneratedSource forward;

  // The backward kernel reads the inputs and outputs its statements name, then the gradient of each
  // floating output (g<output>), and writes the gradient of each floating input (g<input>).
  std::vector<size_t> backward_inputs, backward_outputs;  // indices into inputs / outputs
  std::vector<size_t> grad_outputs, grad_inputs;          // the floating outputs and inputs

  /// The backward spec that stores the gradients of the floating inputs flagged in `stored`
  /// (one flag per grad_inputs entry); the others are computed and dropped.
  rtc::ElementwiseSpec backward_spec(const std::vector<bool>& stored) const;
  /// The backward kernel for `stored`, generated once per pattern.
  std::shared_ptr<const rtc::GeneratedSource> backward_kernel(const std::vector<bool>& stored) const;

  mutable std::mutex backward_mutex;
  mutable std::map<std::vector<bool>, std::shared_ptr<const rtc::GeneratedSource>> backward_kernels;
};

}  // namespace minidl::cuda
