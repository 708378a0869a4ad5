#include "ops/cuda/rtc_driver.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"

namespace minidl::rtc {

namespace {

// The symbol at the ABI of this build's headers: decltype(&cuX) above names exactly that version.
template <class Fn>
void resolve(const char* symbol, Fn& fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &address, CUDA_VERSION, cudaEnableDefault, &found));
#else
  CUDA_CHECK(cudaGetDriverEntryPoint(symbol, &address, cudaEnableDefault, &found));
#endif
  MINIDL_CHECK(found == cudaDriverEntryPointSuccess && address != nullptr, "run-time CUDA kernels need the driver "
               "function ", symbol, " (CUDA ", CUDA_VERSION / 1000, ".", CUDA_VERSION % 1000 / 10, " ABI), but the "
               "installed NVIDIA driver ", found == cudaDriverEntryPointVersionNotSufficent ? "is too old for it"
                                                                                             : "does not provide it",
               "; update the driver");
  fn = reinterpret_cast<Fn>(address);
}

DriverApi load() {
  DriverApi api;
  resolve("cuGetErrorName", api.get_error_name);
  resolve("cuGetErrorString", api.get_error_string);
  resolve("cuDeviceGet", api.device_get);
  resolve("cuDevicePrimaryCtxRetain", api.primary_ctx_retain);
  resolve("cuCtxGetCurrent", api.ctx_get_current);
  resolve("cuCtxSetCurrent", api.ctx_set_current);
  resolve("cuModuleLoadData", api.module_load_data);
  resolve("cuModuleGetFunction", api.module_get_function);
  resolve("cuLaunchKernel", api.launch_kernel);
  return api;
}

}  // namespace

const DriverApi& driver() {
  static const DriverApi api = load();
  return api;
}

void make_primary_context_current(int device) {
  // Retained once per device and never released, like the runtime's own use of it.
  static std::once_flag once;
  static std::vector<CUcontext>* contexts = nullptr;
  static std::vector<std::once_flag>* retained = nullptr;
  std::call_once(once, [] {
    contexts = new std::vector<CUcontext>(static_cast<size_t>(cuda::device_count()), nullptr);
    retained = new std::vector<std::once_flag>(static_cast<size_t>(cuda::device_count()));
  });
  cuda::check_device(device);
  const DriverApi& api = driver();
  CUcontext& primary = (*contexts)[static_cast<size_t>(device)];
  std::call_once((*retained)[static_cast<size_t>(device)], [&] {
    CUdevice handle = 0;
    CU_CHECK(api.device_get(&handle, device));
    CU_CHECK(api.primary_ctx_retain(&primary, handle));
  });
  CUcontext current = nullptr;
  CU_CHECK(api.ctx_get_current(&current));
  if (current != primary) CU_CHECK(api.ctx_set_current(primary));
}

void throw_driver_error(CUresult status, const char* call, const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  const DriverApi& api = driver();
  if (api.get_error_name) api.get_error_name(status, &name);
  if (api.get_error_string) api.get_error_string(status, &text);
  cuda::detail::throw_call_error("CUDA driver", call,
                                 std::string(text ? text : "unknown error") + " (" +
                                     (name ? name : "CUresult " + std::to_string(static_cast<int>(status))) + ")",
                                 file, line);
}

}  // namespace minidl::rtc
