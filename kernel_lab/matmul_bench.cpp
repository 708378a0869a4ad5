// GemmBench: the measuring side of apps/bench_ops (timing rules in matmul_bench.h).
#include "kernel_lab/matmul_bench.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/cuda.h"
#include "core/cuda/check.h"
#include "kernel_lab/matmul_lab.h"
#include "kernel_lab/reference.h"
#include "ops/cuda/timing.h"

namespace minidl::kernel_lab {
namespace {

constexpr int kDevice = 0;

// splitmix64: fast enough to fill two 4096 x 4096 matrices in a fraction of a second.
float uniform_pm1(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;  // 24 random bits, in [-1, 1)
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

template <class T>
T* device_alloc(size_t count) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return static_cast<T*>(p);
}

template <class T>
T* pinned_alloc(size_t count) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, count * sizeof(T)));
  return static_cast<T*>(p);
}

}  // namespace

GemmShape GemmShape::parse(const std::string& spec) {
  GemmShape s;
  const size_t colon = spec.find(':');
  if (colon != std::string::npos) s.label = spec.substr(colon + 1);
  const std::string dims = spec.substr(0, colon);
  char x1 = 0, x2 = 0;
  int used = 0;
  MINIDL_CHECK(std::sscanf(dims.c_str(), "%d%c%d%c%d%n", &s.m, &x1, &s.k, &x2, &s.n, &used) == 5 && x1 == 'x' &&
                   x2 == 'x' && used == static_cast<int>(dims.size()) && s.m >= 1 && s.k >= 1 && s.n >= 1,
               "expected a GEMM shape MxKxN[:label] with positive integers (A is MxK, B is KxN), got '", spec, "'");
  return s;
}

std::vector<std::string> gpu_methods() {
  std::vector<std::string> names;
  for (const Rung& rung : kRungs) names.emplace_back(rung.name);
  names.emplace_back("cublas fp32");
  names.emplace_back("cublas tf32");
  return names;
}

std::size_t cublas_fp32_method() { return kRungCount; }

bool gpu_method_supported(std::size_t method) {
  if (method >= kRungCount || kRungs[method].min_compute_capability == 0) return true;
  const cuda::DeviceProperties p = cuda::device_properties(kDevice);
  return p.major * 10 + p.minor >= kRungs[method].min_compute_capability;
}

std::string gpu_description() {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, kDevice));
  int runtime = 0, major = 0, minor = 0, patch = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &major));
  CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &minor));
  CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &patch));
  return std::string(p.name) + ", sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs, CUDA runtime " + std::to_string(runtime / 1000) + "." +
         std::to_string(runtime % 1000 / 10) + ", cuBLAS " + std::to_string(major) + "." + std::to_string(minor) +
         "." + std::to_string(patch);
}

struct GemmBench::Impl {
  GemmShape shape;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::vector<float> a, b, c;                                     // pageable host memory
  float *a_pinned = nullptr, *b_pinned = nullptr, *c_pinned = nullptr;
  float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
  double *d_ref = nullptr, *d_ref_abs = nullptr;
  std::vector<cudaEvent_t> starts, stops;

  size_t size_a() const { return size_t(shape.m) * shape.k; }
  size_t size_b() const { return size_t(shape.k) * shape.n; }
  size_t size_c() const { return size_t(shape.m) * shape.n; }

  ~Impl() {  // frees what was allocated; errors here cannot be reported
    if (stream) cudaStreamSynchronize(stream);
    for (cudaEvent_t e : starts) cudaEventDestroy(e);
    for (cudaEvent_t e : stops) cudaEventDestroy(e);
    for (void* p : {static_cast<void*>(d_a), static_cast<void*>(d_b), static_cast<void*>(d_c),
                    static_cast<void*>(d_ref), static_cast<void*>(d_ref_abs)})
      if (p) cudaFree(p);
    for (float* p : {a_pinned, b_pinned, c_pinned})
      if (p) cudaFreeHost(p);
    if (cublas) cublasDestroy(cublas);
    if (stream) cudaStreamDestroy(stream);
  }

  void events(size_t count) {
    while (starts.size() < count) {
      cudaEvent_t start = nullptr, stop = nullptr;
      CUDA_CHECK(cudaEventCreate(&start));
      starts.push_back(start);
      CUDA_CHECK(cudaEventCreate(&stop));
      stops.push_back(stop);
    }
  }

  void launch(size_t method) {
    const int m = shape.m, n = shape.n, k = shape.k;
    const float one = 1.0f, zero = 0.0f;
    if (method < kRungCount) {
      kRungs[method].launch(d_a, d_b, d_c, m, n, k, stream);
    } else if (method == kRungCount) {
      // Row-major C = A B is column-major C^T = B^T A^T: swap the operands, no transposes.
      CUBLAS_CHECK(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, d_b, n, d_a, k, &zero, d_c, n));
    } else {
      CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, d_b, CUDA_R_32F, n, d_a, CUDA_R_32F,
                                k, &zero, d_c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    }
  }

  int plan_repeats(double estimate_ms, const TimingRules& rules) const {
    const int most = std::max(1, rules.max_repeats), least = std::min(3, most);
    if (!(estimate_ms > 0)) return most;
    return static_cast<int>(std::clamp(std::floor(rules.budget_ms / estimate_ms), double(least), double(most)));
  }

  double elapsed_ms(size_t i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, starts[i], stops[i]));
    return ms;
  }

  Timing time_kernel(size_t method, const TimingRules& rules) {
    events(std::max(1, rules.max_repeats));
    CUDA_CHECK(cudaEventRecord(starts[0], stream));
    launch(method);
    CUDA_CHECK(cudaEventRecord(stops[0], stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const int repeats = plan_repeats(elapsed_ms(0), rules);
    // Everything below is queued while the stream is held, so the GPU runs it back to back and each
    // event pair brackets the GEMM alone, not the host's call into the launcher or cuBLAS.
    {
      cuda::StreamHold hold(stream);
      for (int r = 0; r < repeats; ++r) {
        CUDA_CHECK(cudaEventRecord(starts[r], stream));
        launch(method);
        CUDA_CHECK(cudaEventRecord(stops[r], stream));
      }
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) ms.push_back(elapsed_ms(r));
    return {median(ms), repeats};
  }

  Timing time_with_transfers(size_t method, bool pinned, const TimingRules& rules) {
    events(1);
    const float* ha = pinned ? a_pinned : a.data();
    const float* hb = pinned ? b_pinned : b.data();
    float* hc = pinned ? c_pinned : c.data();
    auto once = [&] {
      CUDA_CHECK(cudaEventRecord(starts[0], stream));
      CUDA_CHECK(cudaMemcpyAsync(d_a, ha, size_a() * sizeof(float), cudaMemcpyHostToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(d_b, hb, size_b() * sizeof(float), cudaMemcpyHostToDevice, stream));
      launch(method);
      CUDA_CHECK(cudaMemcpyAsync(hc, d_c, size_c() * sizeof(float), cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaEventRecord(stops[0], stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      return elapsed_ms(0);
    };
    const int repeats = plan_repeats(once(), rules);  // the first run is the warm-up
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) ms.push_back(once());
    return {median(ms), repeats};
  }
};

GemmBench::GemmBench(const GemmShape& shape, uint64_t seed) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.shape = shape;
  CUDA_CHECK(cudaSetDevice(kDevice));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&s.cublas));
  CUBLAS_CHECK(cublasSetStream(s.cublas, s.stream));
  CUBLAS_CHECK(cublasSetMathMode(s.cublas, CUBLAS_DEFAULT_MATH));  // no TF32 unless the call asks for it

  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 1;
  s.a.resize(s.size_a());
  s.b.resize(s.size_b());
  s.c.assign(s.size_c(), 0.0f);
  for (float& x : s.a) x = uniform_pm1(state);
  for (float& x : s.b) x = uniform_pm1(state);
  s.a_pinned = pinned_alloc<float>(s.size_a());
  s.b_pinned = pinned_alloc<float>(s.size_b());
  s.c_pinned = pinned_alloc<float>(s.size_c());
  std::copy(s.a.begin(), s.a.end(), s.a_pinned);
  std::copy(s.b.begin(), s.b.end(), s.b_pinned);

  s.d_a = device_alloc<float>(s.size_a());
  s.d_b = device_alloc<float>(s.size_b());
  s.d_c = device_alloc<float>(s.size_c());
  s.d_ref = device_alloc<double>(s.size_c());
  s.d_ref_abs = device_alloc<double>(s.size_c());
  CUDA_CHECK(cudaMemcpyAsync(s.d_a, s.a_pinned, s.size_a() * sizeof(float), cudaMemcpyHostToDevice, s.stream));
  CUDA_CHECK(cudaMemcpyAsync(s.d_b, s.b_pinned, s.size_b() * sizeof(float), cudaMemcpyHostToDevice, s.stream));
  reference_matmul_f64(s.d_a, s.d_b, s.d_ref, s.d_ref_abs, shape.m, shape.n, shape.k, s.stream);
  CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

GemmBench::~GemmBench() = default;

const GemmShape& GemmBench::shape() const { return impl_->shape; }
const std::vector<float>& GemmBench::a() const { return impl_->a; }
const std::vector<float>& GemmBench::b() const { return impl_->b; }

GemmResult GemmBench::run(std::size_t method, const TimingRules& rules, bool with_transfers) {
  Impl& s = *impl_;
  MINIDL_CHECK(method < kRungCount + 2, "GemmBench::run: method ", method, " out of range (", kRungCount + 2,
               " methods)");
  GemmResult result;
  // The check: C starts as NaN (all bits set), so an output the kernel never writes is an error.
  CUDA_CHECK(cudaMemsetAsync(s.d_c, 0xFF, s.size_c() * sizeof(float), s.stream));
  s.launch(method);
  const MatmulLauncher launcher = method < kRungCount ? kRungs[method].launch : nullptr;
  if (launcher == matmul_warptile)
    result.detail = warptile_config_name(warptile_config(s.shape.m, s.shape.n, s.shape.k));
  if (launcher == matmul_fp64_tensor_cores) {
    const Fp64TensorCorePlan plan = fp64_tensor_core_plan(s.shape.m, s.shape.n, s.shape.k);
    result.detail = std::to_string(plan.tile_rows) + "x64 tiles, " +
                    (plan.split == 1 ? "no split" : "k in " + std::to_string(plan.split) + " slices");
  }
  result.max_rel_error = max_relative_error(s.d_c, s.d_ref, s.d_ref_abs, int64_t(s.size_c()), s.stream);
  for (int w = 0; w < rules.warmup; ++w) s.launch(method);
  CUDA_CHECK(cudaStreamSynchronize(s.stream));
  result.kernel = s.time_kernel(method, rules);
  if (with_transfers) {
    result.pageable = s.time_with_transfers(method, false, rules);
    result.pinned = s.time_with_transfers(method, true, rules);
  }
  return result;
}

double GemmBench::max_rel_error(const std::vector<float>& c) {
  Impl& s = *impl_;
  MINIDL_CHECK(c.size() == s.size_c(), "GemmBench::max_rel_error: expected ", s.size_c(), " values (", s.shape.m,
               " x ", s.shape.n, "), got ", c.size());
  CUDA_CHECK(cudaMemcpyAsync(s.d_c, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice, s.stream));
  return max_relative_error(s.d_c, s.d_ref, s.d_ref_abs, int64_t(s.size_c()), s.stream);
}

}  // namespace minidl::kernel_lab
