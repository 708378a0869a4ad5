// cuda::profile_kernels on CUPTI's activity API: kernel, memset and memcpy records (start, end) are
// collected in buffers CUPTI fills asynchronously and hands back on a flush. Memsets and copies are
// listed beside the kernels because a library may queue them between two kernels (cuBLASLt zeroing a
// workspace, say), and a timeline of kernels alone would show that time as idle.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/cuda.h"

#ifdef MINIDL_WITH_CUPTI
#include <cupti.h>

namespace minidl::cuda {

namespace {

std::mutex mutex;
KernelActivity* sink = nullptr;
uint64_t first_start = 0, last_end = 0;
std::map<std::string, KernelActivity::Kernel>* per_name = nullptr;
struct Record {
  std::string mangled;
  uint64_t start, end;
  uint32_t stream;
};
std::vector<Record>* records = nullptr;

// "void minidl::(anonymous namespace)::relu_kernel<float>(float*, ...)" -> "relu_kernel<float>".
std::string short_name(const char* mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  for (const char* noise : {"(anonymous namespace)::", "void "})
    for (auto at = name.find(noise); at != std::string::npos; at = name.find(noise)) name.erase(at, std::strlen(noise));
  if (auto paren = name.find('('); paren != std::string::npos) name.resize(paren);
  if (auto space = name.rfind(' ', name.find('<')); space != std::string::npos) name.erase(0, space + 1);
  if (auto colons = name.rfind("::", name.find('<')); colons != std::string::npos) name.erase(0, colons + 2);
  return name;
}

constexpr size_t kBufferBytes = size_t{8} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void add(const char* name, uint64_t start, uint64_t end, uint32_t stream) {
  ++sink->kernels;
  const double us = static_cast<double>(end - start) / 1000;
  sink->kernel_us += us;
  KernelActivity::Kernel& entry = (*per_name)[name ? name : "?"];
  ++entry.count;
  entry.us += us;
  if (first_start == 0 || start < first_start) first_start = start;
  if (end > last_end) last_end = end;
  records->push_back({name ? name : "?", start, end, stream});
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard lock(mutex);
  CUpti_Activity* record = nullptr;
  while (sink && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      add(k->name, k->start, k->end, k->streamId);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      add("[memset]", m->start, m->end, m->streamId);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      add("[memcpy]", m->start, m->end, m->streamId);
    }
  }
  std::free(buffer);
}

void check(CUptiResult status, const char* call) {
  if (status == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(status, &text);
  MINIDL_FAIL("CUPTI call ", call, " failed: ", text ? text : "unknown error");
}

}  // namespace

KernelActivity profile_kernels(const std::function<void()>& work) {
  synchronize();
  static std::once_flag once;
  std::call_once(once, [] { check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register"); });
  KernelActivity result;
  std::map<std::string, KernelActivity::Kernel> names;
  std::vector<Record> kernels;
  {
    std::lock_guard lock(mutex);
    sink = &result;
    per_name = &names;
    records = &kernels;
    first_start = last_end = 0;
  }
  constexpr CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                                           CUPTI_ACTIVITY_KIND_MEMCPY};
  for (CUpti_ActivityKind kind : kinds) check(cuptiActivityEnable(kind), "cuptiActivityEnable");
  work();
  synchronize();
  check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  for (CUpti_ActivityKind kind : kinds) check(cuptiActivityDisable(kind), "cuptiActivityDisable");
  std::lock_guard lock(mutex);
  sink = nullptr;
  per_name = nullptr;
  records = nullptr;
  for (auto& [mangled, k] : names) {
    k.name = short_name(mangled.c_str());
    result.by_time.push_back(k);
  }
  std::sort(kernels.begin(), kernels.end(), [](const Record& a, const Record& b) { return a.start < b.start; });
  for (const Record& r : kernels)
    result.launches.push_back({names[r.mangled].name, static_cast<double>(r.start - first_start) / 1000,
                               static_cast<double>(r.end - first_start) / 1000, r.stream});
  std::sort(result.by_time.begin(), result.by_time.end(), [](const auto& a, const auto& b) { return a.us > b.us; });
  result.span_us = last_end > first_start ? static_cast<double>(last_end - first_start) / 1000 : 0;
  return result;
}

}  // namespace minidl::cuda

#else

namespace minidl::cuda {
KernelActivity profile_kernels(const std::function<void()>&) {
  MINIDL_FAIL("cuda::profile_kernels: minidl was built without CUPTI (the CUDA toolkit's libcupti was not found)");
}
}  // namespace minidl::cuda

#endif
