// diagnose_cuda: the driver, the runtime and libraries this process loaded (asked for their own
// versions, and found through dladdr, so a library shadowed by another copy on LD_LIBRARY_PATH shows
// up with its real file), each GPU and whether the compiled architectures run on it. The test
// computations are in core/cuda/diagnostics_checks.cpp.
#include "core/cuda/diagnostics.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <curand.h>
#include <dlfcn.h>
#ifdef MINIDL_WITH_CUDNN
#include <cudnn.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace minidl::diagnostics {

namespace detail {

// Where the library of `key` comes from for the CUDA major version minidl was built with.
std::string install_hint(const std::string& key) {
  const int major = CUDART_VERSION / 1000, minor = CUDART_VERSION % 1000 / 10;
  const std::string mm = std::to_string(major) + "-" + std::to_string(minor);
  // From CUDA 13 on the pip wheels dropped their -cuNN suffix.
  const std::string pip = major >= 13 ? "" : "-cu" + std::to_string(major);
  std::string apt, wheel;
  if (key == "cudart") apt = "cuda-cudart-" + mm, wheel = "nvidia-cuda-runtime" + pip;
  if (key == "cublas") apt = "libcublas-" + mm, wheel = "nvidia-cublas" + pip;
  if (key == "curand") apt = "libcurand-" + mm, wheel = "nvidia-curand" + pip;
  if (key == "cudnn") apt = "libcudnn9-cuda-" + std::to_string(major), wheel = "nvidia-cudnn-cu" + std::to_string(major);
  return "apt-get install " + apt + " (NVIDIA's CUDA repository) or pip install " + wheel +
         ", or add the folder holding the right copy to LD_LIBRARY_PATH";
}

}  // namespace detail

namespace {

using detail::Arch;
using detail::install_hint;

std::string dotted(long major, long minor, long patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// The file holding `symbol` in this process, symbolic links resolved (libcublas.so.13 ->
// libcublas.so.13.1.0.3). dlsym rather than the function's address: in a non-PIE binary that
// address would be the executable's own PLT stub.
std::string file_of(const char* symbol, void* handle = RTLD_DEFAULT) {
  void* address = dlsym(handle, symbol);
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_fname) return "";
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::string(info.dli_fname) : real.string();
}

void add_library(CudaReport& r, const std::string& name, const std::string& key, std::vector<long> found,
                 std::vector<long> built, const std::string& file, const std::string& note = "") {
  Library lib{name, dotted(found[0], found[1], found[2]) + note, dotted(built[0], built[1], built[2]), file};
  if (found < built) {
    r.problems.push_back({name + " " + lib.version + " loaded from " + file + " is older than the " + lib.built_against +
                              " minidl was built with (calls it relies on may be missing or behave differently)",
                          install_hint(key), true});
  }
  r.libraries.push_back(std::move(lib));
}

const char* minimum_driver(int cuda_major) {
  switch (cuda_major) {
    case 11: return "450.80.02";
    case 12: return "525.60.13";
    case 13: return "580.65.06";
    default: return nullptr;
  }
}

void find_libraries(CudaReport& r) {
  add_library(r, "CUDA runtime", "cudart",
              {r.runtime_version / 1000, r.runtime_version % 1000 / 10, 0},
              {CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, 0}, file_of("cudaRuntimeGetVersion"));
  int p[3] = {0, 0, 0};
  cublasGetProperty(MAJOR_VERSION, &p[0]);
  cublasGetProperty(MINOR_VERSION, &p[1]);
  cublasGetProperty(PATCH_LEVEL, &p[2]);
  add_library(r, "cuBLAS", "cublas", {p[0], p[1], p[2]}, {CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH},
              file_of("cublasGetProperty"));
  const long lt = static_cast<long>(cublasLtGetVersion());
  add_library(r, "cuBLASLt", "cublas", {lt / 10000, lt / 100 % 100, lt % 100},
              {CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH}, file_of("cublasLtGetVersion"));
  int rand = 0;
  curandGetVersion(&rand);
  add_library(r, "cuRAND", "curand", {rand / 1000, rand % 1000 / 100, rand % 100},
              {CURAND_VER_MAJOR, CURAND_VER_MINOR, CURAND_VER_PATCH}, file_of("curandGetVersion"));
#ifdef MINIDL_WITH_CUDNN
  const long dnn = static_cast<long>(cudnnGetVersion());
  const int dnn_cuda = static_cast<int>(cudnnGetCudartVersion());
  const std::string dnn_file = file_of("cudnnGetVersion");
  add_library(r, "cuDNN", "cudnn", {dnn / 10000, dnn / 100 % 100, dnn % 100},
              {CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL}, dnn_file,
              " (for CUDA " + cuda_version_text(dnn_cuda) + ")");
  if (dnn_cuda / 1000 != r.runtime_version / 1000) {
    r.problems.push_back({"cuDNN from " + dnn_file + " was built for CUDA " + cuda_version_text(dnn_cuda) +
                              " but the CUDA runtime is " + cuda_version_text(r.runtime_version),
                          install_hint("cudnn")});
  }
#if CUDNN_MAJOR >= 9
  // cuDNN 9 is a front library that loads the code of each kind of operation from these files when
  // first used; a partial install starts fine and fails at the first convolution.
  std::string missing;
  const std::filesystem::path folder = std::filesystem::path(dnn_file).parent_path();
  for (const char* part : {"graph", "ops", "cnn", "adv", "heuristic", "engines_precompiled", "engines_runtime_compiled"}) {
    const std::string name = std::string("libcudnn_") + part + ".so." + std::to_string(CUDNN_MAJOR);
    if (std::filesystem::exists(folder / name)) continue;
    if (void* h = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(h);
      continue;
    }
    missing += (missing.empty() ? "" : ", ") + name;
  }
  if (!missing.empty()) {
    r.problems.push_back({"cuDNN's " + missing + " cannot be found (not beside " + dnn_file +
                              " nor on the library path): cuDNN convolutions will fail",
                          install_hint("cudnn")});
  }
#endif
#endif
}

// Finds the driver; false (with the problem recorded) when there is none or it cannot run the runtime.
bool check_driver(CudaReport& r) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) {
    const char* why = dlerror();
    r.problems.push_back({std::string("no NVIDIA driver: libcuda.so.1 cannot be loaded (") + (why ? why : "not found") + ")",
                          "on a machine with a GPU install the NVIDIA driver (Debian: apt-get install nvidia-driver); "
                          "in a container start it with --gpus all; if the driver is elsewhere, add its folder to "
                          "LD_LIBRARY_PATH; or train with --device cpu"});
    return false;
  }
  r.driver_file = file_of("cuDriverGetVersion", driver);
  // Asked of the driver itself: the runtime's cudaDriverGetVersion answers 0 whenever its own
  // start-up fails, which would hide the version that explains why.
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(dlsym(driver, "cuDriverGetVersion"));
  const int driver_status = get_version ? get_version(&r.driver_version) : -1;
  dlclose(driver);
  if (driver_status != 0 || r.driver_version <= 0) {
    r.driver_version = 0;
    r.problems.push_back({"the NVIDIA driver " + r.driver_file + " does not report its version (cuDriverGetVersion " +
                              (get_version ? "failed with " + std::to_string(driver_status) : std::string("is missing")) +
                              "): a broken or partial driver install",
                          "reinstall the NVIDIA driver and check that nvidia-smi works; or train with --device cpu"});
    return false;
  }
  const int need = r.runtime_version;
  if (r.driver_version / 1000 < need / 1000) {
    const char* minimum = minimum_driver(need / 1000);
    r.problems.push_back({"the NVIDIA driver supports CUDA " + cuda_version_text(r.driver_version) +
                              ", older than minidl's CUDA runtime " + cuda_version_text(need),
                          std::string("install NVIDIA driver ") + (minimum ? minimum : "for CUDA " + cuda_version_text(need)) +
                              " or newer, or rebuild minidl with a CUDA " +
                              std::to_string(r.driver_version / 1000) + " toolkit"});
    return false;
  }
  if (r.driver_version < need) {
    r.problems.push_back({"the NVIDIA driver supports CUDA " + cuda_version_text(r.driver_version) + ", older than the runtime " +
                              cuda_version_text(need) + ": kernels run (minor-version compatibility) but PTX cannot be "
                              "compiled for a GPU the build has no binary for",
                          "update the NVIDIA driver to one for CUDA " + cuda_version_text(need) + " or newer", true});
  }
  return true;
}

// Whether the GPU runs the probe kernel (the runtime's answer), and from which compiled architecture.
void match_image(Gpu& g, const std::vector<Arch>& archs, std::vector<Problem>& problems) {
  const int cc = g.major * 10 + g.minor;
  const detail::Image image = detail::image_for(archs, g.major, g.minor);
  const Arch* binary = image.binary;
  const Arch* ptx = image.ptx;
  const std::string gpu = "cuda:" + std::to_string(g.index) + " (" + g.name + ", compute capability " +
                          std::to_string(g.major) + "." + std::to_string(g.minor) + ")";
  cudaFuncAttributes attributes{};
  const cudaError_t status = detail::probe_kernel_attributes(&attributes);
  g.can_run = status == cudaSuccess;
  if (!g.can_run) {
    cudaGetLastError();
    g.image = "no kernel image";
    std::string keep;  // the numbers built now, and this GPU's
    for (const Arch& a : archs) keep += std::to_string(a.number) + (a.suffix ? std::string(1, a.suffix) : "") + ";";
    problems.push_back({gpu + " cannot run minidl's kernels (" + cudaGetErrorName(status) + "): this build carries " +
                            detail::architecture_names(archs),
                        "rebuild with " + detail::architecture_flag(g.major, g.minor) + " (or \"" + keep +
                            std::to_string(cc) + "\" to keep the others), or =native on this machine"});
    return;
  }
  const std::string versions = "binary " + std::to_string(attributes.binaryVersion / 10) + "." +
                               std::to_string(attributes.binaryVersion % 10) + ", PTX " +
                               std::to_string(attributes.ptxVersion / 10) + "." + std::to_string(attributes.ptxVersion % 10);
  if (binary || !ptx) {
    g.image = (binary ? "sm_" + std::to_string(binary->number) + (binary->suffix ? std::string(1, binary->suffix) : "")
                      : std::string("a binary")) +
              ", native (" + versions + ")";
    return;
  }
  g.image = "compute_" + std::to_string(ptx->number) + " PTX, compiled by the driver at start-up (" + versions + ")";
  problems.push_back({gpu + " runs minidl's kernels only from compute_" + std::to_string(ptx->number) +
                          " PTX, compiled by the driver at every start (slow start, and older GPU code)",
                      "rebuild with " + detail::architecture_flag(g.major, g.minor) + " to carry its own binary", true});
}

}  // namespace

CudaReport diagnose_cuda(bool run_checks) {
  CudaReport r;
  r.built = true;
#ifdef MINIDL_WITH_CUDNN
  r.cudnn_built = true;
#endif
  const std::vector<Arch> archs = detail::compiled_architectures();
  std::stringstream names(detail::architecture_names(archs));
  for (std::string name; names >> name;) r.architectures.push_back(name);
  cudaRuntimeGetVersion(&r.runtime_version);
  find_libraries(r);
  if (!check_driver(r)) return r;

  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();  // an unusable CUDA must not poison later error checks
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    const std::string note = visible ? std::string(" with CUDA_VISIBLE_DEVICES=\"") + visible + "\"" : "";
    if (status == cudaSuccess || status == cudaErrorNoDevice) {
      r.problems.push_back({"no GPU: the NVIDIA driver is loaded but reports no device" + note,
                            "check nvidia-smi; unset CUDA_VISIBLE_DEVICES or name a GPU in it; in a container start "
                            "it with --gpus all; or train with --device cpu"});
    } else {
      r.problems.push_back({std::string("CUDA cannot start: cudaGetDeviceCount failed with ") + cudaGetErrorName(status) +
                                " (" + cudaGetErrorString(status) + ")" + note,
                            "check nvidia-smi and the kernel log (dmesg) for driver errors; a reboot after a driver "
                            "update often fixes it; or train with --device cpu"});
    }
    return r;
  }
  int previous = 0;
  cudaGetDevice(&previous);
  for (int i = 0; i < count; ++i) {
    Gpu g;
    g.index = i;
    cudaDeviceProp prop{};
    if (cudaSetDevice(i) != cudaSuccess || cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      const cudaError_t e = cudaGetLastError();
      r.problems.push_back({"cuda:" + std::to_string(i) + " does not answer: " + cudaGetErrorString(e),
                            "check nvidia-smi and dmesg for this GPU; reset it (nvidia-smi -r) or reboot"});
      g.image = "not reachable";
      r.gpus.push_back(g);
      continue;
    }
    g.name = prop.name;
    g.total_memory = prop.totalGlobalMem;
    g.major = prop.major;
    g.minor = prop.minor;
    match_image(g, archs, r.problems);
    if (run_checks && g.can_run) g.checks = detail::run_checks(g, r.problems);
    r.gpus.push_back(std::move(g));
  }
  cudaSetDevice(previous);
  return r;
}

}  // namespace minidl::diagnostics
