// A stand-in for the NVIDIA driver (libcuda.so.1) that loads but runs nothing: it reports the CUDA
// version in $FAKE_CUDA_DRIVER_VERSION (12020 = 12.2) and fails everything else, so that
// tests/test_doctor.cpp can check what doctor says about an old driver on a machine without one.
#include <cstdlib>

namespace {
constexpr int kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED
}

extern "C" {

int cuDriverGetVersion(int* version) {
  const char* text = std::getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = text ? std::atoi(text) : 12020;
  return 0;
}

int cuInit(unsigned) { return kNotSupported; }
int cuGetProcAddress(const char*, void** fn, int, unsigned long long) {
  *fn = nullptr;
  return kNotSupported;
}
int cuGetProcAddress_v2(const char*, void** fn, int, unsigned long long, int*) {
  *fn = nullptr;
  return kNotSupported;
}
int cuGetExportTable(const void** table, const void*) {
  *table = nullptr;
  return kNotSupported;
}

}  // extern "C"
