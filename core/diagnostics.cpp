// The CPU half of the diagnostics, and the report's summary. This file is compiled with the CPU
// kernels' flags (-march=native under MINIDL_NATIVE), so the predefined macros below say what those
// kernels were compiled to use; the CPU is then asked what it has.
#include "core/diagnostics.h"

#include <Eigen/Core>
#include <algorithm>

#include "core/threads.h"

namespace minidl::diagnostics {

namespace {

struct Isa {
  const char* name;
  bool compiled;
  bool present;
};

std::vector<Isa> instruction_sets() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
#define MINIDL_ISA(name, macro_defined, cpu_name) {name, macro_defined, __builtin_cpu_supports(cpu_name) != 0}
  // Only the sets that change how Eigen and the compiler vectorize the kernels.
  return {
#ifdef __SSE4_2__
      MINIDL_ISA("SSE4.2", true, "sse4.2"),
#endif
#ifdef __AVX__
      MINIDL_ISA("AVX", true, "avx"),
#endif
#ifdef __AVX2__
      MINIDL_ISA("AVX2", true, "avx2"),
#endif
#ifdef __FMA__
      MINIDL_ISA("FMA", true, "fma"),
#endif
#ifdef __AVX512F__
      MINIDL_ISA("AVX-512F", true, "avx512f"),
#endif
#ifdef __AVX512BW__
      MINIDL_ISA("AVX-512BW", true, "avx512bw"),
#endif
#ifdef __AVX512DQ__
      MINIDL_ISA("AVX-512DQ", true, "avx512dq"),
#endif
#ifdef __AVX512VL__
      MINIDL_ISA("AVX-512VL", true, "avx512vl"),
#endif
#ifdef __AVX512VNNI__
      MINIDL_ISA("AVX-512VNNI", true, "avx512vnni"),
#endif
  };
#undef MINIDL_ISA
#elif defined(__ARM_NEON)
  return {{"NEON", true, true}};
#else
  return {};
#endif
}

}  // namespace

CpuReport diagnose_cpu() {
  CpuReport r;
#if defined(__clang__)
  r.compiler = "Clang " __clang_version__;
#elif defined(__GNUC__)
  r.compiler = "GCC " __VERSION__;
#else
  r.compiler = "unknown compiler";
#endif
  for (const Isa& isa : instruction_sets()) {
    r.compiled.push_back(isa.name);
    if (!isa.present) r.missing.push_back(isa.name);
  }
  r.eigen_simd = Eigen::SimdInstructionSetsInUse();
  r.threads = get_num_threads();
  r.eigen_threads = Eigen::nbThreads();
  if (!r.missing.empty()) {
    std::string sets;
    for (const auto& s : r.missing) sets += (sets.empty() ? "" : ", ") + s;
    r.problems.push_back({"the CPU kernels were compiled for " + sets +
                              ", which this CPU lacks: training would stop with an illegal instruction",
                          "rebuild minidl on this machine, or with -DMINIDL_NATIVE=OFF to run on any x86-64 CPU"});
  }
  return r;
}

std::string cuda_version_text(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

bool CudaReport::usable() const {
  return std::any_of(gpus.begin(), gpus.end(), [](const Gpu& g) {
    return g.can_run && std::all_of(g.checks.begin(), g.checks.end(), [](const Check& c) { return c.passed; });
  });
}

std::string CudaReport::state() const {
  if (!built) return "CUDA: not built in (minidl was compiled without its CUDA backend)";
  int good = 0;
  for (const Gpu& g : gpus)
    if (g.can_run && std::all_of(g.checks.begin(), g.checks.end(), [](const Check& c) { return c.passed; })) ++good;
  if (good > 0) {
    std::string s = "CUDA: usable (" + std::to_string(good) + (good == 1 ? " GPU" : " GPUs");
    if (good < static_cast<int>(gpus.size())) s += " of " + std::to_string(gpus.size());
    return s + ")";
  }
  for (const Problem& p : problems)
    if (!p.warning) return "CUDA: not usable, " + p.cause;
  return "CUDA: not usable";
}

#ifndef MINIDL_WITH_CUDA
CudaReport diagnose_cuda(bool) {
  CudaReport r;
  r.problems.push_back({"minidl was built without CUDA (no CUDA toolkit found at configure time, or -DMINIDL_CUDA=OFF)",
                        "rebuild with -DMINIDL_CUDA=ON on a machine with the CUDA toolkit (nvcc), or train with "
                        "--device cpu"});
  return r;
}
#endif

}  // namespace minidl::diagnostics
