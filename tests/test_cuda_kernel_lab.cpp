// The SGEMM kernel lab (kernel_lab/): every rung against a float64 product computed here on the
// CPU, on odd shapes (every edge guard), aligned shapes (the float4 paths) and misaligned pointers
// (the scalar fallback), with NaN in C beforehand (an output never written fails) and canaries
// around it (a write outside C fails). The float64 reference and error metric of apps/bench_ops are
// checked too. No timing here: apps/bench_ops measures.
#include <gtest/gtest.h>

#ifndef MINIDL_KERNEL_LAB

TEST(KernelLab, NeedsTheCudaBuild) {
  GTEST_SKIP() << "the kernel lab (kernel_lab/) is CUDA code and is built only with the CUDA backend; this build "
                  "has none";
}

#else

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "kernel_lab/matmul_bench.h"
#include "kernel_lab/matmul_lab.h"
#include "kernel_lab/reference.h"
#include "test_cuda_util.h"

namespace minidl::cuda_kernel_lab_test {
namespace {

using minidl::kernel_lab::kRungs;

struct GemmCase {
  int m, n, k;
};

std::string case_name(const GemmCase& g) {
  return "M=" + std::to_string(g.m) + " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k);
}

// Odd sizes cross every tile edge of every rung; the aligned ones (K and N multiples of 4) take the
// float4 paths, one of them with partial tiles in all three dimensions.
const std::vector<GemmCase> kCases = {
    {1, 1, 1}, {17, 33, 9}, {129, 65, 257}, {200, 300, 100}, {1, 300, 7}, {300, 1, 3},   // odd
    {256, 128, 64}, {132, 68, 20},                                                         // aligned
};

/// Device memory freed on scope exit.
template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  explicit DeviceArray(size_t count) { CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr), count * sizeof(T))); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

std::vector<float> random_values(size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = uniform(rng);
  return v;
}

constexpr float kCanary = 12345.0f;
constexpr size_t kGuard = 64;  // floats of canary on each side of C (256 bytes keep C 16-byte aligned)

using Launch = std::function<void(const float*, const float*, float*, int, int, int, cudaStream_t)>;

/// Runs `launch` on random A (m x k) and B (k x n) placed `misalign` floats past a 16-byte boundary,
/// and compares every entry of C with the float64 product: |c - ref| <= (2k + 4) 2^-24 sum_i |a||b|,
/// the float32 accumulation bound with room to spare. Wrong indexing is off by whole terms, orders
/// of magnitude more.
::testing::AssertionResult matches_reference(const Launch& launch, const GemmCase& g, int misalign = 0) {
  std::mt19937_64 rng(::minidl::testing::fresh_seed());
  const size_t size_a = size_t(g.m) * g.k, size_b = size_t(g.k) * g.n, size_c = size_t(g.m) * g.n;
  const std::vector<float> a = random_values(size_a, rng), b = random_values(size_b, rng);
  DeviceArray<float> da(size_a + 4), db(size_b + 4), dc(size_c + 2 * kGuard);
  CUDA_CHECK(cudaMemcpy(da.ptr + misalign, a.data(), size_a * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db.ptr + misalign, b.data(), size_b * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<float> c(size_c + 2 * kGuard, std::numeric_limits<float>::quiet_NaN());
  std::fill(c.begin(), c.begin() + kGuard, kCanary);
  std::fill(c.end() - kGuard, c.end(), kCanary);
  CUDA_CHECK(cudaMemcpy(dc.ptr, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));

  launch(da.ptr + misalign, db.ptr + misalign, dc.ptr + kGuard, g.m, g.n, g.k, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(c.data(), dc.ptr, c.size() * sizeof(float), cudaMemcpyDeviceToHost));

  for (size_t i = 0; i < kGuard; ++i) {
    if (c[i] != kCanary || c[kGuard + size_c + i] != kCanary)
      return ::testing::AssertionFailure() << case_name(g) << ": a write landed outside C";
  }
  const double tol = (2.0 * g.k + 4) * std::ldexp(1.0, -24);
  for (int r = 0; r < g.m; ++r) {
    for (int col = 0; col < g.n; ++col) {
      double ref = 0, bound = 0;
      for (int i = 0; i < g.k; ++i) {
        ref += double(a[size_t(r) * g.k + i]) * b[size_t(i) * g.n + col];
        bound += std::abs(double(a[size_t(r) * g.k + i]) * b[size_t(i) * g.n + col]);
      }
      const double got = c[kGuard + size_t(r) * g.n + col];
      if (!(std::abs(got - ref) <= tol * bound)) {  // NaN (never written) fails too
        return ::testing::AssertionFailure() << case_name(g) << ", misaligned by " << misalign << ": C[" << r << "]["
                                             << col << "] = " << got << ", float64 reference " << ref << ", |diff| "
                                             << std::abs(got - ref) << " > " << tol << " * " << bound;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

class KernelLabRung : public ::testing::TestWithParam<size_t> {};

// Skips a rung that needs a newer GPU than this one (rung 6: compute capability 9.0).
#define MINIDL_REQUIRE_RUNG_SUPPORTED(method)                                                          \
  do {                                                                                                 \
    if (!minidl::kernel_lab::gpu_method_supported(method))                                             \
      GTEST_SKIP() << kRungs[method].name << " needs compute capability "                              \
                   << kRungs[method].min_compute_capability / 10 << "." << kRungs[method].min_compute_capability % 10; \
  } while (0)

TEST_P(KernelLabRung, MatchesFloat64ReferenceOnOddAndAlignedShapes) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_REQUIRE_RUNG_SUPPORTED(GetParam());
  const auto& rung = kRungs[GetParam()];
  SCOPED_TRACE(rung.name);
  for (const GemmCase& g : kCases) EXPECT_TRUE(matches_reference(rung.launch, g));
}

// K and N multiples of 4 but A and B off a 16-byte boundary: the float4 rungs must take their
// scalar path (a float4 load there would fault or read the wrong floats).
TEST_P(KernelLabRung, MisalignedPointersFallBackToScalarLoads) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_REQUIRE_RUNG_SUPPORTED(GetParam());
  const auto& rung = kRungs[GetParam()];
  SCOPED_TRACE(rung.name);
  EXPECT_TRUE(matches_reference(rung.launch, {132, 68, 20}, 1));
  EXPECT_TRUE(matches_reference(rung.launch, {64, 128, 32}, 3));
}

TEST_P(KernelLabRung, RejectsEmptySizesWithAClearError) {
  const auto& rung = kRungs[GetParam()];
  try {
    rung.launch(nullptr, nullptr, nullptr, 4, 0, 4, nullptr);
    FAIL() << rung.name << " accepted N = 0";
  } catch (const minidl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected M, N, K >= 1, got M=4 N=0 K=4"), std::string::npos) << e.what();
  }
}

std::string rung_test_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name;
  for (char ch : std::string(kRungs[info.param].name)) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Rungs, KernelLabRung, ::testing::Range(size_t{0}, minidl::kernel_lab::kRungCount),
                         rung_test_name);

// matmul_warptile picks its tile by timing; every configuration must be right on every shape,
// whichever the small test shapes would pick.
TEST(KernelLabWarptile, EveryTileConfigurationMatchesTheReference) {
  MINIDL_REQUIRE_CUDA();
  using minidl::kernel_lab::WarptileConfig;
  for (WarptileConfig config : minidl::kernel_lab::kWarptileConfigs) {
    SCOPED_TRACE(minidl::kernel_lab::warptile_config_name(config));
    const Launch launch = [config](const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
      minidl::kernel_lab::matmul_warptile_with(config, a, b, c, m, n, k, s);
    };
    for (const GemmCase& g : kCases) EXPECT_TRUE(matches_reference(launch, g));
    EXPECT_TRUE(matches_reference(launch, {132, 68, 20}, 2));
  }
}

// Rung 6 sums in float64 and rounds each output once: |c - ref| <= 2^-24 |ref| plus float64's own
// rounding, far tighter than the float32 bound above where the terms cancel (random signs: |ref|
// about sqrt(K) terms' worth, sum |a||b| K terms'). Rung 5, which sums in float32, must break the
// same bound on the same data, or the check could not tell the two apart. Split-K (a small output)
// and a single slice (a large one) both, 32- and 64-row tiles both; odd sizes take the scalar copies.
TEST(KernelLabFp64TensorCores, RoundEachOutputOnce) {
  MINIDL_REQUIRE_CUDA();
  using minidl::kernel_lab::kRungCount;
  MINIDL_REQUIRE_RUNG_SUPPORTED(kRungCount - 1);
  ASSERT_EQ(kRungs[kRungCount - 1].launch, &minidl::kernel_lab::matmul_fp64_tensor_cores);
  const GemmCase cases[] = {{64, 128, 2048}, {1024, 1024, 512}, {70, 65, 1027}};
  std::set<int> tile_rows, splits;
  for (const GemmCase& g : cases) {
    const minidl::kernel_lab::Fp64TensorCorePlan plan = minidl::kernel_lab::fp64_tensor_core_plan(g.m, g.n, g.k);
    tile_rows.insert(plan.tile_rows);
    splits.insert(plan.split);
  }
  EXPECT_EQ(tile_rows, (std::set<int>{32, 64})) << "the cases no longer reach both block tiles";
  EXPECT_TRUE(splits.count(1) == 1 && *splits.rbegin() > 1)
      << "the cases no longer reach both split-K and a single slice";
  for (const GemmCase& g : cases) {
    SCOPED_TRACE(case_name(g));
    std::mt19937_64 rng(::minidl::testing::fresh_seed());
    const std::vector<float> a = random_values(size_t(g.m) * g.k, rng), b = random_values(size_t(g.k) * g.n, rng);
    const size_t size_c = size_t(g.m) * g.n;
    DeviceArray<float> da(a.size()), db(b.size()), dc(size_c);
    CUDA_CHECK(cudaMemcpy(da.ptr, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(db.ptr, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<double> ref(size_c), bound(size_c);
    for (int r = 0; r < g.m; ++r)
      for (int col = 0; col < g.n; ++col)
        for (int i = 0; i < g.k; ++i) {
          const double p = double(a[size_t(r) * g.k + i]) * b[size_t(i) * g.n + col];
          ref[size_t(r) * g.n + col] += p;
          bound[size_t(r) * g.n + col] += std::abs(p);
        }
    auto breaks = [&](minidl::kernel_lab::MatmulLauncher launch) {
      launch(da.ptr, db.ptr, dc.ptr, g.m, g.n, g.k, nullptr);
      std::vector<float> c(size_c);
      CUDA_CHECK(cudaMemcpy(c.data(), dc.ptr, size_c * sizeof(float), cudaMemcpyDeviceToHost));
      size_t count = 0;
      for (size_t i = 0; i < size_c; ++i) {
        const double tol = std::ldexp(std::abs(ref[i]), -24) + std::ldexp(bound[i], -48) * g.k;
        if (!(std::abs(c[i] - ref[i]) <= tol)) ++count;
      }
      return count;
    };
    EXPECT_EQ(breaks(minidl::kernel_lab::matmul_fp64_tensor_cores), 0u);
    EXPECT_GT(breaks(minidl::kernel_lab::matmul_warptile), 0u) << "float32 sums met the float64 bound";
  }
}

// The reference of apps/bench_ops: the float64 product and |A||B| agree with the CPU's, and the
// error metric finds one perturbed entry, and a NaN, and reports 0 for the reference itself.
TEST(KernelLabReference, ProductAndErrorMetric) {
  MINIDL_REQUIRE_CUDA();
  const GemmCase g{37, 29, 45};
  std::mt19937_64 rng(::minidl::testing::fresh_seed());
  const std::vector<float> a = random_values(size_t(g.m) * g.k, rng), b = random_values(size_t(g.k) * g.n, rng);
  const size_t size_c = size_t(g.m) * g.n;
  DeviceArray<float> da(a.size()), db(b.size()), dc(size_c);
  DeviceArray<double> ref(size_c), ref_abs(size_c);
  CUDA_CHECK(cudaMemcpy(da.ptr, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db.ptr, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  minidl::kernel_lab::reference_matmul_f64(da.ptr, db.ptr, ref.ptr, ref_abs.ptr, g.m, g.n, g.k, nullptr);
  std::vector<double> got(size_c), got_abs(size_c);
  CUDA_CHECK(cudaMemcpy(got.data(), ref.ptr, size_c * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_abs.data(), ref_abs.ptr, size_c * sizeof(double), cudaMemcpyDeviceToHost));
  std::vector<float> c(size_c);
  for (int r = 0; r < g.m; ++r) {
    for (int col = 0; col < g.n; ++col) {
      double sum = 0, sum_abs = 0;
      for (int i = 0; i < g.k; ++i) {
        const double p = double(a[size_t(r) * g.k + i]) * b[size_t(i) * g.n + col];
        sum += p;
        sum_abs += std::abs(p);
      }
      const size_t at = size_t(r) * g.n + col;
      ASSERT_NEAR(got[at], sum, 1e-12 * sum_abs) << "entry " << r << ", " << col;
      ASSERT_NEAR(got_abs[at], sum_abs, 1e-12 * sum_abs) << "entry " << r << ", " << col;
      c[at] = static_cast<float>(got[at]);
    }
  }
  auto error_of = [&](const std::vector<float>& values) {
    CUDA_CHECK(cudaMemcpy(dc.ptr, values.data(), size_c * sizeof(float), cudaMemcpyHostToDevice));
    return minidl::kernel_lab::max_relative_error(dc.ptr, ref.ptr, ref_abs.ptr, int64_t(size_c), nullptr);
  };
  EXPECT_LE(error_of(c), std::ldexp(1.0, -24));  // only float32 rounding of the result
  std::vector<float> off = c;
  off[100] = static_cast<float>(got[100] + 0.5 * got_abs[100]);
  EXPECT_NEAR(error_of(off), 0.5, 1e-6);
  off[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isinf(error_of(off)));
}

// bench_ops' --sizes: A is M x K, B is K x N, an optional label after a colon.
TEST(KernelLabBench, ParsesGemmShapes) {
  using minidl::kernel_lab::GemmShape;
  const GemmShape s = GemmShape::parse("64x288x36864:cnn conv2 im2col");
  EXPECT_EQ(s.m, 64);
  EXPECT_EQ(s.k, 288);
  EXPECT_EQ(s.n, 36864);
  EXPECT_EQ(s.label, "cnn conv2 im2col");
  EXPECT_EQ(s.dims(), "64x288x36864");
  EXPECT_DOUBLE_EQ(GemmShape::parse("2x3x4").flops(), 48.0);
  for (const char* bad : {"64x288", "64x288x0", "64x288x12x3", "ax2x3", "4x4x4 ", "-1x2x3"}) {
    try {
      GemmShape::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const minidl::Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected a GEMM shape MxKxN[:label]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace minidl::cuda_kernel_lab_test

#endif  // MINIDL_KERNEL_LAB
