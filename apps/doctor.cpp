// Says what this build of minidl is and whether this machine can run it on a GPU: build options,
// driver and runtime, the CUDA libraries found at run time, every GPU and a test computation on it,
// and for every problem its cause and its fix. The work is in core/diagnostics.h; this only prints.
//
//   build/doctor                 exit 0 unless a GPU computation failed or gave wrong numbers
//   build/doctor --require-gpu   also exit 2 when no GPU is usable (for GPU machines' scripts)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "apps/common/cli.h"
#include "core/diagnostics.h"

#ifndef MINIDL_VERSION_TEXT  // set by CMakeLists.txt; these keep a hand-made build compiling
#define MINIDL_VERSION_TEXT "unknown"
#define MINIDL_BUILD_TYPE ""
#define MINIDL_BUILD_CUDA ""
#define MINIDL_BUILD_CUDNN ""
#define MINIDL_BUILD_NATIVE ""
#define MINIDL_BUILD_CUDA_ARCHITECTURES ""
#define MINIDL_BUILD_CUDA_TOOLKIT ""
#endif

namespace {

using namespace minidl::diagnostics;

// CMake's true/false spellings (ON, 1, TRUE, YES) as "on"; unset or false as "off".
const char* on_off(const std::string& value) {
  for (const char* yes : {"ON", "1", "TRUE", "YES", "on", "true"})
    if (value == yes) return "on";
  return "off";
}

std::string join(const std::vector<std::string>& items, const char* separator = " ") {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : separator) + item;
  return s.empty() ? "none" : s;
}

void print_build(const CpuReport& cpu) {
  std::printf("minidl %s doctor\n\nBuild\n", MINIDL_VERSION_TEXT);
  std::printf("  build type          %s, %s\n", *MINIDL_BUILD_TYPE ? MINIDL_BUILD_TYPE : "default", cpu.compiler.c_str());
  const bool cuda = std::string(on_off(MINIDL_BUILD_CUDA)) == "on";
  std::printf("  CUDA backend        %s%s%s\n", on_off(MINIDL_BUILD_CUDA), cuda ? ", toolkit " : "",
              cuda ? MINIDL_BUILD_CUDA_TOOLKIT : "");
  std::printf("  cuDNN               %s\n", on_off(MINIDL_BUILD_CUDNN));
  if (cuda) std::printf("  CUDA architectures  %s (CMAKE_CUDA_ARCHITECTURES)\n", MINIDL_BUILD_CUDA_ARCHITECTURES);
  std::printf("  CPU code            %s: %s\n", std::string(on_off(MINIDL_BUILD_NATIVE)) == "on" ? "-march=native" : "generic x86-64",
              join(cpu.compiled).c_str());
  std::printf("  Eigen SIMD          %s\n", cpu.eigen_simd.c_str());
  std::printf("  CPU threads         %d\n", cpu.threads);
  std::printf("  Eigen's own threads %d (minidl splits the products itself)\n", cpu.eigen_threads);
}

void print_cuda(const CudaReport& r) {
  std::printf("\nCUDA\n");
  if (!r.built) {
    std::printf("  not built in\n");
    return;
  }
  std::printf("  kernels carry       %s\n", join(r.architectures).c_str());
  std::printf("  driver              %s\n", r.driver_version ? ("CUDA " + cuda_version_text(r.driver_version) + "  " +
                                                                r.driver_file).c_str()
                                                             : "none");
  for (const Library& lib : r.libraries) {
    std::printf("  %-19s %s  %s%s\n", lib.name.c_str(), lib.version.c_str(), lib.file.empty() ? "(not loaded)" : lib.file.c_str(),
                lib.version.rfind(lib.built_against, 0) == 0 ? "" : ("  (built against " + lib.built_against + ")").c_str());
  }
  std::printf("\nGPUs\n");
  if (r.gpus.empty()) std::printf("  none\n");
  for (const Gpu& g : r.gpus) {
    std::printf("  cuda:%d  %s, %.1f GiB, compute capability %d.%d\n", g.index, g.name.c_str(),
                static_cast<double>(g.total_memory) / (1 << 30), g.major, g.minor);
    std::printf("          kernels: %s\n", g.image.c_str());
    for (const Check& c : g.checks)
      std::printf("          %-18s %s  %s\n", c.name.c_str(), c.passed ? "ok  " : "FAIL", c.detail.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool require_gpu = false;
  CLI::App app("minidl doctor: build options, CUDA driver, libraries and GPUs, with a fix for each problem");
  app.add_flag("--require-gpu", require_gpu, "exit with status 2 when no GPU is usable");
  mnist_app::parse_or_exit(app, argc, argv);  // a bad flag exits 2, as in every app

  const CpuReport cpu = diagnose_cpu();
  const CudaReport cuda = diagnose_cuda();
  print_build(cpu);
  print_cuda(cuda);

  std::vector<Problem> problems = cpu.problems;
  problems.insert(problems.end(), cuda.problems.begin(), cuda.problems.end());
  std::printf("\n%s\n", problems.empty() ? "No problems found." : "Problems");
  for (const Problem& p : problems)
    std::printf("  %s %s -- fix: %s\n", p.warning ? "warning:" : "problem:", p.cause.c_str(), p.fix.c_str());

  const bool usable = cuda.usable();
  std::printf("\n%s; %s\n", cuda.state().c_str(), usable ? "minidl trains on the GPU (--device cuda)"
                                                          : "minidl trains on the CPU (--device cpu)");
  bool failed = false;
  for (const Gpu& g : cuda.gpus)
    for (const Check& c : g.checks) failed |= !c.passed;
  if (failed) return 1;
  return require_gpu && !usable ? 2 : 0;
}
