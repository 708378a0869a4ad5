// The machine's float32 matrix-multiply ceiling as OpenBLAS reaches it: cblas_sgemm on square
// matrices (2048 by default), best of several calls, for each thread count asked for. It is the
// yardstick for how close a framework's GEMM-bound training (the MLP) comes to the hardware.
//
//   sgemm_peak [--lib PATH] [--size N] [--threads 1,2] [--repeats 5]
//
// OpenBLAS is opened with dlopen (by default Debian's OpenMP build, libopenblas0-openmp), so the
// figure is OpenBLAS's whatever libblas.so.3 points to, and no BLAS headers are needed.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

// cblas.h's values for the arguments used here.
constexpr int kRowMajor = 101, kNoTrans = 111;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using SetThreadsFn = void (*)(int);
using ConfigFn = char* (*)();

template <typename Fn>
Fn symbol(void* lib, const char* name, bool required) {
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && required) {
    std::fprintf(stderr, "sgemm_peak: %s not found in the library\n", name);
    std::exit(1);
  }
  return fn;
}

}  // namespace

int main(int argc, char** argv) {
  std::string lib_path = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0", thread_list = "1,2";
  int n = 2048, repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--lib") lib_path = value;
    else if (flag == "--size") n = std::atoi(value.c_str());
    else if (flag == "--threads") thread_list = value;
    else if (flag == "--repeats") repeats = std::atoi(value.c_str());
    else {
      std::fprintf(stderr, "usage: sgemm_peak [--lib PATH] [--size N] [--threads 1,2] [--repeats R]\n");
      return 2;
    }
  }
  if (n <= 0 || repeats <= 0) {
    std::fprintf(stderr, "sgemm_peak: --size and --repeats must be positive\n");
    return 2;
  }
  void* lib = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    std::fprintf(stderr, "sgemm_peak: cannot open %s: %s (apt-get install libopenblas0-openmp)\n", lib_path.c_str(),
                 dlerror());
    return 1;
  }
  auto sgemm = symbol<SgemmFn>(lib, "cblas_sgemm", true);
  auto set_threads = symbol<SetThreadsFn>(lib, "openblas_set_num_threads", true);
  auto config = symbol<ConfigFn>(lib, "openblas_get_config", false);
  auto corename = symbol<ConfigFn>(lib, "openblas_get_corename", false);
  std::printf("sgemm_peak: %s  config %s  core %s\n", lib_path.c_str(), config ? config() : "?",
              corename ? corename() : "?");

  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<float> a(count), b(count), c(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    b[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  }
  const double flop = 2.0 * n * static_cast<double>(n) * n;
  std::stringstream threads_in(thread_list);
  for (std::string item; std::getline(threads_in, item, ',');) {
    const int threads = std::atoi(item.c_str());
    if (threads <= 0) continue;
    set_threads(threads);
    sgemm(kRowMajor, kNoTrans, kNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      sgemm(kRowMajor, kNoTrans, kNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("sgemm n %d  threads %d  %.1f GFLOP/s  (best of %d, %.3f s)\n", n, threads, flop / best / 1e9,
                repeats, best);
    std::fflush(stdout);
  }
  return 0;
}
