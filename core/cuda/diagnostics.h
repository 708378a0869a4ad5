#pragma once
// Between the diagnostics' host code (core/cuda/diagnostics*.cpp) and its device code
// (core/cuda/diagnostics.cu): a probe kernel and what nvcc was asked to compile.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "core/diagnostics.h"

namespace minidl::diagnostics::detail {

/// One architecture the kernels were compiled for: 90 with `binary` is sm_90, with `ptx` compute_90.
/// `suffix` is 'a' (sm_90a: that exact GPU only), 'f' (its family) or 0.
struct Arch {
  int number = 0;
  char suffix = 0;
  bool binary = false, ptx = false;
};

/// CMAKE_CUDA_ARCHITECTURES as configured ("90", "80-real;90", "native").
std::string architectures_spec();
/// nvcc's __CUDA_ARCH_LIST__: the virtual architectures the .cu files were compiled for (900, ...).
std::vector<int> nvcc_architectures();
/// The list a CMAKE_CUDA_ARCHITECTURES spec (entries split by ',' or ';') describes; entries
/// without numbers (native, all) take nvcc's list, as binaries.
///   parse_architectures("80-real;90", {800, 900}) -> sm_80, sm_90, compute_90
std::vector<Arch> parse_architectures(const std::string& spec, const std::vector<int>& nvcc);
/// parse_architectures of what this build was compiled with.
std::vector<Arch> compiled_architectures();
/// "sm_80 sm_90 compute_90"
std::string architecture_names(const std::vector<Arch>& archs);

/// What the compiled list offers a GPU of compute capability major.minor: a binary of its own major
/// version and no newer minor (an 'a' binary only its exact GPU), else the newest PTX no newer
/// than the GPU, which the driver compiles at start-up; null for either when there is none.
struct Image {
  const Arch* binary = nullptr;
  const Arch* ptx = nullptr;
};
Image image_for(const std::vector<Arch>& archs, int major, int minor);

/// y[i] = 2 x[i] + 1 for i < n, on the current device's legacy default stream.
cudaError_t launch_probe_kernel(const float* x, float* y, int n);
/// cudaFuncGetAttributes of the probe kernel on the current device: fails with
/// cudaErrorNoKernelImageForDevice when no compiled architecture runs there.
cudaError_t probe_kernel_attributes(cudaFuncAttributes* attributes);

/// The test computations of one GPU (core/cuda/diagnostics_checks.cpp): a kernel, a cuBLAS GEMM and,
/// where built in, a cuDNN convolution, each compared with its known answer. Failures become
/// problems with their fixes.
std::vector<Check> run_checks(const Gpu& gpu, std::vector<Problem>& problems);

/// The command-line flag that builds kernels for a GPU of compute capability major.minor.
std::string architecture_flag(int major, int minor);
/// Where to get the library `key` (cudart, cublas, curand, cudnn) for the CUDA version minidl was
/// built with: the apt and pip packages, or LD_LIBRARY_PATH.
std::string install_hint(const std::string& key);

}  // namespace minidl::diagnostics::detail
