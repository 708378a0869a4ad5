// The doctor app and the diagnostics under it. The app must finish with status 0 on any machine,
// one without a GPU or driver and a build without CUDA included, and name the CUDA state; each
// problem carries its fix on the same line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "core/diagnostics.h"
#include "core/threads.h"
#ifdef MINIDL_WITH_CUDA
#include "core/cuda/diagnostics.h"
#endif

namespace minidl::doctor_test {

namespace {

using namespace minidl::diagnostics;

#ifdef MINIDL_DOCTOR
// Runs `command` through the shell; its stdout and stderr, and its exit status in `status`.
std::string run(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return "popen failed";
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int raw = pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

TEST(Doctor, ExitsZeroAndNamesTheCudaState) {
  int status = -1;
  const std::string out = run(MINIDL_DOCTOR, status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\nCUDA: (usable \\(\\d+ GPUs?|not usable, |not built in )"))) << out;
#ifdef MINIDL_WITH_CUDA
  EXPECT_NE(out.find("CUDA backend        on"), std::string::npos) << out;
  EXPECT_NE(out.find("cuBLAS"), std::string::npos) << out;
#else
  EXPECT_NE(out.find("CUDA backend        off"), std::string::npos) << out;
  EXPECT_NE(out.find("CUDA: not built in"), std::string::npos) << out;
  EXPECT_NE(out.find("-DMINIDL_CUDA=ON"), std::string::npos) << out;
#endif
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  problem:", 0) == 0 || line.rfind("  warning:", 0) == 0) {
      EXPECT_NE(line.find(" -- fix: "), std::string::npos) << line;
    }
  }
}

#if defined(MINIDL_WITH_CUDA) && defined(MINIDL_FAKE_DRIVER_DIR)
// tests/support/fake_libcuda.cpp stands in for a driver one CUDA major version older than the runtime.
TEST(Doctor, NamesBothVersionsAndTheFixForAnOldDriver) {
  const int runtime = diagnose_cuda(false).runtime_version;
  const int old_driver = (runtime / 1000 - 1) * 1000 + 20;
  int status = -1;
  const std::string out = run("env LD_LIBRARY_PATH=" MINIDL_FAKE_DRIVER_DIR ":${LD_LIBRARY_PATH} FAKE_CUDA_DRIVER_VERSION=" +
                                  std::to_string(old_driver) + " " MINIDL_DOCTOR,
                              status);
  EXPECT_EQ(status, 0) << out;
  const std::string cause = "the NVIDIA driver supports CUDA " + cuda_version_text(old_driver) +
                            ", older than minidl's CUDA runtime " + cuda_version_text(runtime) + " -- fix: install NVIDIA driver ";
  EXPECT_NE(out.find("  problem: " + cause), std::string::npos) << out;
  EXPECT_NE(out.find("\nCUDA: not usable, the NVIDIA driver supports CUDA"), std::string::npos) << out;
  EXPECT_NE(out.find("fake_driver/libcuda.so.1"), std::string::npos) << out;  // where the driver came from
}
#endif

TEST(Doctor, RequireGpuFailsExactlyWhenNoGpuIsUsable) {
  int status = -1;
  const std::string plain = run(MINIDL_DOCTOR, status);
  const bool usable = plain.find("\nCUDA: usable") != std::string::npos;
  const std::string out = run(std::string(MINIDL_DOCTOR) + " --require-gpu", status);
  EXPECT_EQ(status, usable ? 0 : 2) << out;
}

TEST(Doctor, AnUnknownFlagIsAUsageErrorExiting2) {
  int status = -1;
  const std::string out = run(std::string(MINIDL_DOCTOR) + " --no-such-flag", status);
  EXPECT_EQ(status, 2) << out;  // as every app's usage error; CLI11's own status was 109
  EXPECT_NE(out.find("--no-such-flag"), std::string::npos) << out;
}
#endif

TEST(Diagnostics, EveryProblemHasACauseAndAFix) {
  const CudaReport cuda = diagnose_cuda(/*run_checks=*/false);
  const CpuReport cpu = diagnose_cpu();
  std::vector<Problem> problems = cuda.problems;
  problems.insert(problems.end(), cpu.problems.begin(), cpu.problems.end());
  for (const Problem& p : problems) {
    EXPECT_FALSE(p.cause.empty());
    EXPECT_FALSE(p.fix.empty()) << p.cause;
  }
  EXPECT_FALSE(cuda.state().empty());
  // No usable GPU always comes with at least one problem that says why.
  if (!cuda.usable()) {
    EXPECT_FALSE(problems.empty()) << cuda.state();
  }
  EXPECT_GT(cpu.threads, 0);
  EXPECT_FALSE(cpu.eigen_simd.empty());
}

// minidl splits each CPU product across its threads on sizes alone (ops/cpu/matmul.cpp); Eigen
// splitting it again, by the thread count, would make the bits follow that count. The library is
// built with EIGEN_DONT_PARALLELIZE; core/diagnostics.cpp, one of its files, says what Eigen sees.
TEST(Diagnostics, EigenNeverSplitsAProductItself) {
  const int saved = get_num_threads();
  set_num_threads(3);
  const int eigen_threads = diagnose_cpu().eigen_threads;
  set_num_threads(saved);
  EXPECT_EQ(eigen_threads, 1);
}

TEST(Diagnostics, CudaVersionText) {
  EXPECT_EQ(cuda_version_text(12040), "12.4");
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(0), "none");
}

#ifdef MINIDL_WITH_CUDA
TEST(Diagnostics, FindsTheLibrariesItWasBuiltWith) {
  const CudaReport r = diagnose_cuda(false);
  EXPECT_TRUE(r.built);
  EXPECT_FALSE(r.architectures.empty());
  for (const char* name : {"CUDA runtime", "cuBLAS", "cuBLASLt", "cuRAND"}) {
    auto it = std::find_if(r.libraries.begin(), r.libraries.end(), [&](const Library& l) { return l.name == name; });
    ASSERT_NE(it, r.libraries.end()) << name;
    EXPECT_TRUE(std::filesystem::exists(it->file)) << name << ": '" << it->file << "'";
    EXPECT_FALSE(it->version.empty()) << name;
  }
}

TEST(Diagnostics, ParsesCudaArchitectures) {
  using diagnostics::detail::architecture_names;
  using diagnostics::detail::parse_architectures;
  EXPECT_EQ(architecture_names(parse_architectures("80-real;90", {800, 900})), "sm_80 sm_90 compute_90");
  EXPECT_EQ(architecture_names(parse_architectures("90a-real,75-virtual", {})), "sm_90a compute_75");
  EXPECT_EQ(architecture_names(parse_architectures("native", {860})), "sm_86");
  EXPECT_EQ(architecture_names(parse_architectures("", {900})), "sm_90 compute_90");
}

TEST(Diagnostics, MatchesKernelImagesToComputeCapabilities) {
  using diagnostics::detail::image_for;
  using diagnostics::detail::parse_architectures;
  auto number = [](const diagnostics::detail::Arch* a) { return a ? a->number : 0; };
  const auto hopper = parse_architectures("90", {});
  EXPECT_EQ(number(image_for(hopper, 9, 0).binary), 90);
  EXPECT_EQ(number(image_for(hopper, 8, 6).binary), 0);  // no binary or PTX for an older GPU
  EXPECT_EQ(number(image_for(hopper, 8, 6).ptx), 0);
  EXPECT_EQ(number(image_for(hopper, 10, 0).binary), 0);  // a newer major version: PTX only
  EXPECT_EQ(number(image_for(hopper, 10, 0).ptx), 90);
  const auto ampere = parse_architectures("80-real;86-real", {});
  EXPECT_EQ(number(image_for(ampere, 8, 9).binary), 86);  // the newest binary of the same major version
  EXPECT_EQ(number(image_for(ampere, 8, 0).binary), 80);
  EXPECT_EQ(number(image_for(ampere, 9, 0).ptx), 0);
  const auto specific = parse_architectures("90a-real", {});
  EXPECT_EQ(number(image_for(specific, 9, 0).binary), 90);
  EXPECT_EQ(number(image_for(specific, 9, 1).binary), 0);  // an 'a' binary runs on its exact GPU only
  EXPECT_EQ(diagnostics::detail::architecture_flag(8, 6), "-DCMAKE_CUDA_ARCHITECTURES=86");
}
#endif

}  // namespace

}  // namespace minidl::doctor_test
