// Every call of a run-time kernel looks its program up here (a shared lock, a hash and a string
// compare); only the first call on a device compiles and loads, under the exclusive lock.
#include "ops/cuda/rtc_program.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "ops/cuda/rtc_compiler.h"
#include "ops/cuda/rtc_driver.h"

namespace minidl::rtc {

namespace {

struct Programs {
  std::shared_mutex mutex;
  // By source hash mixed with the device; the source itself settles collisions.
  std::unordered_map<size_t, std::vector<std::shared_ptr<const LoadedProgram>>> by_key;
};

Programs& programs() {
  static auto* p = new Programs();  // never destroyed: kernels may run during exit
  return *p;
}

size_t key_of(int device, const GeneratedSource& generated) {
  return generated.source_hash ^ (static_cast<size_t>(device) * 0x9e3779b97f4a7c15ull);
}

std::shared_ptr<const LoadedProgram> find(const Programs& p, size_t key, int device, const std::string& source) {
  auto it = p.by_key.find(key);
  if (it == p.by_key.end()) return nullptr;
  for (const auto& program : it->second)
    if (program->device == device && program->source == source) return program;
  return nullptr;
}

std::shared_ptr<const LoadedProgram> load(int device, const GeneratedSource& generated) {
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const Target target = target_for(major, minor);
  std::shared_ptr<const CompiledImage> image = compile(generated, target);

  cuda::DeviceGuard guard(device);
  make_primary_context_current(device);
  const DriverApi& api = driver();
  auto program = std::make_shared<LoadedProgram>();
  program->device = device;
  program->source = generated.source;
  CUresult status = api.module_load_data(&program->module, image->bytes.data());
  if (status != CUDA_SUCCESS && image->from_disk) {
    // A cache file that passed its checks but that the driver refuses (written by a build that
    // compiled differently, say): compile it afresh, which also rewrites the file.
    image = compile(generated, target, /*fresh=*/true);
    status = api.module_load_data(&program->module, image->bytes.data());
  }
  if (status != CUDA_SUCCESS) {
    const std::string call = "cuModuleLoadData for " + generated.what + " (" + target.arch_name() + " on cuda:" +
                             std::to_string(device) + ")";
    throw_driver_error(status, call.c_str(), __FILE__, __LINE__);
  }
  for (const std::string& entry : generated.entry_points) {
    CUfunction function = nullptr;
    CU_CHECK(api.module_get_function(&function, program->module, entry.c_str()));
    program->functions.push_back(function);
  }
  return program;
}

}  // namespace

std::shared_ptr<const LoadedProgram> load_program(int device, const GeneratedSource& generated) {
  Programs& p = programs();
  const size_t key = key_of(device, generated);
  {
    std::shared_lock<std::shared_mutex> lock(p.mutex);
    if (auto found = find(p, key, device, generated.source)) return found;
  }
  std::unique_lock<std::shared_mutex> lock(p.mutex);
  if (auto found = find(p, key, device, generated.source)) return found;  // loaded meanwhile
  auto program = load(device, generated);
  p.by_key[key].push_back(program);
  return program;
}

void clear_loaded_programs() {
  {
    Programs& p = programs();
    std::unique_lock<std::shared_mutex> lock(p.mutex);
    p.by_key.clear();
  }
  clear_compiled_images();
}

}  // namespace minidl::rtc
