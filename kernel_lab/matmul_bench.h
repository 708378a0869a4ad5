#pragma once
// Timing the kernel lab's rungs and cuBLAS on one GEMM shape, for apps/bench_ops. CUDA-free, so the
// app includes no CUDA header; built only with the CUDA backend (MINIDL_KERNEL_LAB is then defined).
//
// Timing rules: a first run checked against the float64 reference (every entry), `warmup` more
// runs, then repeats, each timed alone with a pair of CUDA events queued back to back while the
// stream is held (cuda::StreamHold, so the host's launch cost is not in the kernel's time); the
// median is reported.
// The number of repeats is `max_repeats`, fewer (but at least 3) where that would take more than
// `budget_ms`. The transfer timings put, between the events, the upload of A and B from host memory
// (pageable, or pinned), the GEMM and the download of C.
//
//   kernel_lab::GemmBench bench({4096, 4096, 4096, "square"}, 1);
//   kernel_lab::GemmResult r = bench.run(0, kernel_lab::TimingRules{}, true);
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace minidl::kernel_lab {

/// A is m x k, B is k x n, C = A * B is m x n (row-major float32).
struct GemmShape {
  int m = 0, k = 0, n = 0;
  std::string label;
  double flops() const { return 2.0 * m * n * static_cast<double>(k); }
  /// "MxKxN"
  std::string dims() const { return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n); }
  /// From "MxKxN" or "MxKxN:label"; throws minidl::Error saying what was expected.
  static GemmShape parse(const std::string& spec);
};

struct TimingRules {
  int warmup = 2;
  int max_repeats = 20;
  double budget_ms = 250;
};

/// The median of `repeats` timed runs, in milliseconds.
struct Timing {
  double median_ms = 0;
  int repeats = 0;
};

struct GemmResult {
  Timing kernel;                // the GEMM alone
  Timing pageable;              // upload A, B from pageable memory + GEMM + download C (when asked)
  Timing pinned;                // the same through pinned memory
  double max_rel_error = 0;     // max |c - ref| / (|A| |B|) over all entries (reference.h)
  std::string detail;           // what this method chose for the shape (rung 5's tile), may be empty
};

/// The methods GemmBench::run takes by index: the rungs of kRungs in order, then cuBLAS float32
/// (cublasSgemm, TF32 off) and cuBLAS TF32 (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32).
std::vector<std::string> gpu_methods();
/// The index of cuBLAS float32 in gpu_methods(), the baseline of the "% cuBLAS" column.
std::size_t cublas_fp32_method();
/// Whether method `method` runs on this GPU (a rung may need a newer compute capability).
bool gpu_method_supported(std::size_t method);
/// "NVIDIA H100 80GB HBM3, sm_90, 132 SMs, CUDA runtime 13000, cuBLAS 130100" for device 0.
std::string gpu_description();

/// One shape: random A and B (uniform in [-1, 1], from `seed`) in pageable and pinned host memory
/// and on device 0, with the float64 reference of their product computed on the GPU.
class GemmBench {
 public:
  GemmBench(const GemmShape& shape, uint64_t seed);
  ~GemmBench();
  GemmBench(const GemmBench&) = delete;
  GemmBench& operator=(const GemmBench&) = delete;

  const GemmShape& shape() const;
  const std::vector<float>& a() const;
  const std::vector<float>& b() const;
  /// Checks and times method `method` (an index into gpu_methods()).
  GemmResult run(std::size_t method, const TimingRules& rules, bool with_transfers);
  /// The max relative error of a product computed elsewhere (the CPU's), m x n row-major.
  double max_rel_error(const std::vector<float>& c);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minidl::kernel_lab
