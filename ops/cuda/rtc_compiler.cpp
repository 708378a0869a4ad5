// One mutex serializes compilations: they are rare (once per source and architecture, and then
// cached on disk), and two threads asking for the same kernel at once should compile it once.
#include "ops/cuda/rtc_compiler.h"

#include <nvrtc.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "ops/cuda/rtc_disk_cache.h"
#include "ops/elementwise_kernel_source.h"

namespace minidl::rtc {

namespace {

#define NVRTC_CHECK(call)                                                                                   \
  do {                                                                                                      \
    nvrtcResult minidl_status_ = (call);                                                                    \
    if (minidl_status_ != NVRTC_SUCCESS)                                                                    \
      MINIDL_FAIL("NVRTC call ", #call, " failed: ", nvrtcGetErrorString(minidl_status_));                  \
  } while (0)

// Accurate math (no --use_fast_math), as the built-in kernels: results comparable with the CPU's.
const char* const kStandard = "--std=c++17";

struct ImageCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const CompiledImage>> images;  // by key
};

ImageCache& image_cache() {
  static auto* cache = new ImageCache();  // never destroyed: kernels may be used during exit
  return *cache;
}

// Destroys the program on every path out.
struct Program {
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle) nvrtcDestroyProgram(&handle);
  }
};

std::string program_log(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

std::string run_nvrtc(const GeneratedSource& generated, const Target& target, const std::vector<std::string>& options) {
  Program program;
  NVRTC_CHECK(nvrtcCreateProgram(&program.handle, generated.source.c_str(), generated.file_name.c_str(), 0, nullptr,
                                 nullptr));
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult status =
      nvrtcCompileProgram(program.handle, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  if (status != NVRTC_SUCCESS) {
    const std::string log = program_log(program.handle);
    std::string message = generated.what + ": NVRTC " + nvrtc_version() + " cannot compile it for " +
                          target.arch_name() + " (" + nvrtcGetErrorString(status) + "):\n" + log + "\n";
    if (!generated.listing.empty()) message += generated.listing;
    // An error outside the user's lines (a body that closes a brace it did not open, say) points
    // into the generated code: show it with the numbers the log uses.
    if (log.find(generated.file_name + "(") != std::string::npos) {
      message += "the generated source " + generated.file_name + ":\n" + numbered_listing(generated.source);
    }
    MINIDL_FAIL(message);
  }
  size_t size = 0;
  std::string image;
  if (target.kind == ImageKind::Cubin) {
    NVRTC_CHECK(nvrtcGetCUBINSize(program.handle, &size));
    image.resize(size);
    NVRTC_CHECK(nvrtcGetCUBIN(program.handle, image.data()));
  } else {
    NVRTC_CHECK(nvrtcGetPTXSize(program.handle, &size));  // counts the terminating NUL the driver needs
    image.resize(size);
    NVRTC_CHECK(nvrtcGetPTX(program.handle, image.data()));
  }
  return image;
}

void warn_once_about_disk_cache(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "minidl: the run-time kernel cache cannot be written (%s); kernels will be compiled again in every "
                 "process. Set MINIDL_KERNEL_CACHE to a writable folder.\n",
                 why.c_str());
  });
}

}  // namespace

std::string Target::arch_name() const {
  return (kind == ImageKind::Cubin ? "sm_" : "compute_") + std::to_string(arch);
}

Target target_for(int cc_major, int cc_minor) {
  int count = 0;
  NVRTC_CHECK(nvrtcGetNumSupportedArchs(&count));
  std::vector<int> archs(static_cast<size_t>(count));
  NVRTC_CHECK(nvrtcGetSupportedArchs(archs.data()));
  std::sort(archs.begin(), archs.end());
  const int device = cc_major * 10 + cc_minor;
  if (std::binary_search(archs.begin(), archs.end(), device)) return {device, ImageKind::Cubin};
  // PTX runs on any newer device of the same major version and later ones, so take the newest
  // architecture at or below the device's.
  auto below = std::upper_bound(archs.begin(), archs.end(), device);
  MINIDL_CHECK(below != archs.begin(), "run-time CUDA kernels: NVRTC ", nvrtc_version(), " compiles for sm_",
               archs.empty() ? 0 : archs.front(), " and newer, but this GPU is sm_", device,
               "; use a CUDA toolkit that still supports it");
  return {*(below - 1), ImageKind::Ptx};
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  NVRTC_CHECK(nvrtcVersion(&major, &minor));
  return std::to_string(major) + "." + std::to_string(minor);
}

CompileCounters& compile_counters() {
  static auto* counters = new CompileCounters();
  return *counters;
}

void clear_compiled_images() {
  ImageCache& cache = image_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.images.clear();
}

std::shared_ptr<const CompiledImage> compile(const GeneratedSource& generated, const Target& target, bool fresh) {
  const std::vector<std::string> options = {"-arch=" + target.arch_name(), kStandard};
  // Everything the image depends on: NVRTC's version, the target, the options and the source.
  std::string key = "nvrtc " + nvrtc_version() + "\ntarget " + target.arch_name() + "\noptions";
  for (const std::string& o : options) key += " " + o;
  key += "\nfile " + generated.file_name + "\n" + generated.source;

  ImageCache& cache = image_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (!fresh) {
    if (auto it = cache.images.find(key); it != cache.images.end()) return it->second;
  }
  CompileCounters& counters = compile_counters();
  const std::string folder = kernel_cache_folder();
  const std::string path = folder.empty() ? "" : folder + "/" + cache_file_name(generated.cache_label, key);
  auto image = std::make_shared<CompiledImage>();
  image->target = target;
  if (!fresh && !path.empty()) {
    switch (read_cached_image(path, key, image->bytes)) {
      case CacheRead::Hit:
        image->from_disk = true;
        ++counters.disk_loads;
        cache.images[key] = image;
        return image;
      case CacheRead::Rejected: ++counters.disk_rejected; break;
      case CacheRead::Missing: break;
    }
  }
  image->bytes = run_nvrtc(generated, target, options);
  ++counters.compilations;
  if (path.empty()) {
    warn_once_about_disk_cache("none of MINIDL_KERNEL_CACHE, XDG_CACHE_HOME and HOME is set");
  } else if (std::string why = write_cached_image(path, key, image->bytes); !why.empty()) {
    warn_once_about_disk_cache(why);
  } else {
    ++counters.disk_writes;
  }
  cache.images[key] = image;
  return image;
}

}  // namespace minidl::rtc
