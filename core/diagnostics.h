#pragma once
// What this build of minidl is and whether the machine can run it: the CPU code it was compiled
// for, and for CUDA the driver, the runtime, the libraries found at run time, each GPU and whether
// a kernel, a cuBLAS GEMM and a cuDNN convolution really give the right numbers there. Every
// problem comes with its cause and its fix. Includes no CUDA header (apps/doctor prints it); in a
// build without CUDA the report says so.
#include <cstddef>
#include <string>
#include <vector>

namespace minidl::diagnostics {

/// One thing that keeps minidl from using a GPU (or slows it down), and what to do about it.
struct Problem {
  std::string cause;     // "the NVIDIA driver supports CUDA 12.2, older than minidl's CUDA runtime 13.0"
  std::string fix;       // "install driver 580 or newer, or rebuild minidl with a CUDA 12 toolkit"
  bool warning = false;  // true: the GPU still works (slower, or a library is not the one built against)
};

/// A shared library of the CUDA backend as the process found it at run time.
struct Library {
  std::string name;           // "cuBLAS"
  std::string version;        // as the library reports it; empty when it is not loaded
  std::string built_against;  // the version of the headers minidl was compiled with
  std::string file;           // the file it was loaded from, symbolic links resolved
};

/// A computation run on one GPU and compared with its known answer.
struct Check {
  std::string name;  // "kernel", "cuBLAS GEMM", "cuDNN convolution"
  bool passed = false;
  std::string detail;  // "exact" or what went wrong
};

struct Gpu {
  int index = 0;
  std::string name;
  size_t total_memory = 0;  // bytes
  int major = 0, minor = 0;  // compute capability
  /// How minidl's kernels run there: "sm_90 (native)", "compute_80 PTX, compiled by the driver at
  /// start-up", or "no kernel image".
  std::string image;
  bool can_run = false;
  std::vector<Check> checks;
};

struct CudaReport {
  bool built = false;        // minidl was compiled with its CUDA backend
  bool cudnn_built = false;  // ... and with the cuDNN path
  /// The architectures the kernels were compiled for, "sm_90" (binary) and "compute_90" (PTX).
  std::vector<std::string> architectures;
  int driver_version = 0;   // CUDA version the driver supports, 12040 = 12.4; 0: no driver
  int runtime_version = 0;  // version of the CUDA runtime loaded; 0 in a build without CUDA
  std::string driver_file;  // libcuda.so.1 as loaded, empty when there is none
  std::vector<Library> libraries;
  std::vector<Gpu> gpus;
  std::vector<Problem> problems;

  /// True when some GPU ran every check and got the right numbers.
  bool usable() const;
  /// One line naming the CUDA state: "CUDA: usable (1 GPU)", "CUDA: not usable, no NVIDIA driver",
  /// "CUDA: not built in (...)".
  std::string state() const;
};

/// Finds the driver, libraries and GPUs and, when `run_checks`, runs the test computations on each
/// GPU. Never throws for a missing driver, GPU or library: those are problems in the report.
///   for (auto& p : diagnostics::diagnose_cuda().problems) std::puts(p.cause.c_str());
CudaReport diagnose_cuda(bool run_checks = true);

struct CpuReport {
  std::string compiler;                // "GCC 12.2.0"
  std::vector<std::string> compiled;   // instruction sets the CPU kernels were compiled to use
  std::vector<std::string> missing;    // ... that this CPU lacks (the program would crash using them)
  std::string eigen_simd;              // Eigen's own account: "AVX512, FMA, AVX2, AVX, SSE, ..."
  int threads = 0;                     // CPU threads the kernels use
  int eigen_threads = 0;               // threads Eigen would split one product across: 1, as minidl splits them
  std::vector<Problem> problems;
};

/// The CPU side: what the kernels were compiled for and whether this CPU has it.
///   auto cpu = diagnostics::diagnose_cpu();
CpuReport diagnose_cpu();

/// 12040 -> "12.4" (CUDA's version encoding, major * 1000 + minor * 10).
std::string cuda_version_text(int version);

}  // namespace minidl::diagnostics
