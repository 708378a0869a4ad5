#pragma once
// The few CUDA driver API calls run-time kernels need (load a module, find a function, launch it),
// looked up through the CUDA runtime (cudaGetDriverEntryPoint) on first use instead of linking
// libcuda: minidl must load where no driver is installed, and only fail when a GPU is asked for.
#include <cuda.h>

namespace minidl::rtc {

/// Driver entry points at the ABI of the toolkit minidl was built with (CUDA_VERSION).
struct DriverApi {
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
};

/// The entry points, resolved once; throws naming the one the driver does not have.
const DriverApi& driver();

/// Makes `device`'s primary context (the one the CUDA runtime uses) current on this thread, where
/// the driver API looks for it. A thread that has made no runtime call yet has none.
void make_primary_context_current(int device);

[[noreturn]] void throw_driver_error(CUresult status, const char* call, const char* file, int line);

}  // namespace minidl::rtc

/// A checked driver call through driver():  CU_CHECK(rtc::driver().module_load_data(&module, image));
#define CU_CHECK(call)                                                                   \
  do {                                                                                   \
    CUresult minidl_status_ = (call);                                                    \
    if (minidl_status_ != CUDA_SUCCESS)                                                  \
      ::minidl::rtc::throw_driver_error(minidl_status_, #call, __FILE__, __LINE__);      \
  } while (0)
