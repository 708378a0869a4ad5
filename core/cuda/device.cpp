// Is CUDA usable, and if not, why. The first question asked probes the driver once; nothing runs
// at load time, so a binary built with CUDA starts on a machine without a GPU or driver.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "core/cuda.h"
#include "core/cuda/context.h"

namespace minidl::cuda {

namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

std::string visible_devices_note() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible ? std::string(" (CUDA_VISIBLE_DEVICES is \"") + visible + "\")" : std::string();
}

Probe run_probe() {
  Probe p;
  // The runtime loads the driver library itself; asking first gives the precise reason when it is absent.
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
  } else {
    const char* why = dlerror();
    p.reason = std::string("no NVIDIA driver: libcuda.so.1 could not be loaded (") + (why ? why : "not found") +
               "); install the NVIDIA driver on a machine with a GPU, or use --device cpu";
    return p;
  }
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) {
    p.count = count;
    return p;
  }
  cudaGetLastError();  // clear it: an unusable CUDA must not poison later error checks
  if (status == cudaSuccess || status == cudaErrorNoDevice) {
    p.reason = "no CUDA device: the driver is loaded but reports no GPU" + visible_devices_note() +
               "; check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu";
  } else if (status == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    p.reason = "the NVIDIA driver supports CUDA " + std::to_string(driver / 1000) + "." +
               std::to_string(driver % 1000 / 10) + " but minidl was built with CUDA " +
               std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
               "; update the driver, rebuild with an older toolkit, or use --device cpu";
  } else {
    p.reason = std::string("CUDA cannot start: cudaGetDeviceCount failed with ") + detail::cuda_error_text(status) +
               visible_devices_note() + "; check the driver with nvidia-smi, or use --device cpu";
  }
  return p;
}

const Probe& probe() {
  static const Probe p = run_probe();
  return p;
}

}  // namespace

bool is_available() { return probe().count > 0; }
std::string unavailable_reason() { return probe().reason; }
int device_count() { return probe().count; }

void check_device(int index) {
  const Probe& p = probe();
  MINIDL_CHECK(p.count > 0, "cuda:", index, " requested, but CUDA is not usable: ", p.reason);
  MINIDL_CHECK(index >= 0 && index < p.count, "cuda:", index, " requested, but only ", p.count,
               " CUDA device(s) are visible (cuda:0", p.count > 1 ? " to cuda:" + std::to_string(p.count - 1) : "",
               ")", visible_devices_note());
}

int current_device() {
  check_device(0);
  int index = 0;
  CUDA_CHECK(cudaGetDevice(&index));
  return index;
}

void set_device(int index) {
  check_device(index);
  CUDA_CHECK(cudaSetDevice(index));
}

void synchronize(int index) {
  if (!is_available()) return;
  if (index >= 0) {
    check_device(index);
    DeviceGuard guard(index);
    join_side_stream(index);  // releases what the side stream's work held
    CUDA_CHECK(cudaDeviceSynchronize());
    check_device_errors(index);
    return;
  }
  for (int d = 0; d < device_count(); ++d) {
    DeviceGuard guard(d);
    join_side_stream(d);
    CUDA_CHECK(cudaDeviceSynchronize());
    check_device_errors(d);
  }
}

DeviceProperties device_properties(int index) {
  check_device(index);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceProperties out;
  out.index = index;
  out.name = prop.name;
  out.major = prop.major;
  out.minor = prop.minor;
  out.total_memory = prop.totalGlobalMem;
  out.multiprocessor_count = prop.multiProcessorCount;
  out.l2_cache_bytes = static_cast<size_t>(prop.l2CacheSize);
  out.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  out.warp_size = prop.warpSize;
  return out;
}

}  // namespace minidl::cuda
