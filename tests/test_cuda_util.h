#pragma once
// Helpers of the CUDA tests: skipping where no GPU is usable, fresh random inputs, and elementwise
// comparison of a CUDA result with its CPU twin.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "core/deterministic.h"
#include "minidl.h"
#include "ops/backend_setting.h"

namespace minidl::testing {

/// Skips the calling test, saying why, where CUDA is not usable (CI, a machine without a GPU).
#define MINIDL_REQUIRE_CUDA()                                                                          \
  do {                                                                                                 \
    if (!::minidl::cuda::is_available())                                                               \
      GTEST_SKIP() << "no usable CUDA device: " << ::minidl::cuda::unavailable_reason();               \
  } while (0)

#ifdef MINIDL_WITH_CUDNN
inline constexpr bool kBuiltWithCudnn = true;
#else
inline constexpr bool kBuiltWithCudnn = false;
#endif

/// MINIDL_REQUIRE_CUDA, and skips too where minidl was built without cuDNN.
#define MINIDL_REQUIRE_CUDNN()                                                                         \
  do {                                                                                                 \
    MINIDL_REQUIRE_CUDA();                                                                             \
    if (!::minidl::testing::kBuiltWithCudnn)                                                           \
      GTEST_SKIP() << "minidl was built without cuDNN (set CUDNN_ROOT at configure time)";             \
  } while (0)

/// Sets a process-wide setting for a scope (a backend switch, deterministic mode), and puts the
/// previous value back at its end.
template <class T, T (*Get)(), void (*Set)(T)>
struct SettingScope {
  T saved = Get();
  explicit SettingScope(T value) { Set(value); }
  ~SettingScope() { Set(saved); }
  SettingScope(const SettingScope&) = delete;
  SettingScope& operator=(const SettingScope&) = delete;
};
using ConvBackendScope = SettingScope<ConvBackend, conv_backend, set_conv_backend>;
using AttentionBackendScope = SettingScope<AttentionBackend, attention_backend, set_attention_backend>;
using DeterministicScope = SettingScope<bool, is_deterministic, set_deterministic>;

/// A seed that differs run to run (inputs are fresh every run), printed with any failure.
inline uint64_t fresh_seed() {
  static uint64_t counter = 0;
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) + 7919 * ++counter;
}

/// Seeds the generator freshly and records the seed in the test's trace.
#define MINIDL_FRESH_SEED()                                                \
  const uint64_t minidl_seed_ = ::minidl::testing::fresh_seed();           \
  ::minidl::manual_seed(minidl_seed_);                                     \
  SCOPED_TRACE("manual_seed(" + std::to_string(minidl_seed_) + ")")

/// "[2, 3]": gtest cannot find minidl's operator<< for shapes (std::vector) by itself.
inline std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  ::minidl::operator<<(os, shape);
  return os.str();
}

/// Elementwise |a - b| <= atol + rtol * |b| (a: the CUDA result, b: the CPU reference), same shape
/// and dtype; NaN only where both are NaN. Reports the worst element.
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double atol, double rtol) {
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure() << "shapes differ: " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  }
  if (a.dtype() != b.dtype()) return ::testing::AssertionFailure() << "dtypes differ: " << a.dtype() << " vs " << b.dtype();
  std::vector<double> x = a.to(Device::cpu()).to(kFloat64).to_vector<double>();
  std::vector<double> y = b.to(Device::cpu()).to(kFloat64).to_vector<double>();
  double worst = 0;
  size_t worst_i = 0;
  bool bad = false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (std::isnan(x[i]) != std::isnan(y[i])) {
        return ::testing::AssertionFailure() << "NaN mismatch at " << i << ": " << x[i] << " vs " << y[i];
      }
      continue;
    }
    const double excess = std::abs(x[i] - y[i]) - (atol + rtol * std::abs(y[i]));
    if (excess > 0 && (!bad || excess > worst)) {
      bad = true;
      worst = excess;
      worst_i = i;
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst_i << " of " << x.size() << " (shape " << shape_str(a.shape())
                                       << "): " << x[worst_i] << " vs reference " << y[worst_i] << ", |diff| "
                                       << std::abs(x[worst_i] - y[worst_i]) << " > atol " << atol << " + rtol " << rtol
                                       << " * |reference|";
}

/// Exact equality of two tensors of any dtype (compared on the CPU).
inline ::testing::AssertionResult all_equal(const Tensor& a, const Tensor& b) { return all_close(a, b, 0, 0); }

/// Tolerances for comparing a CUDA kernel with the CPU one.
inline double tol(DType dtype) { return dtype == kFloat64 ? 1e-9 : 1e-3; }

inline Device gpu() { return Device::cuda(0); }

/// Runs f on CPU inputs and on their GPU copies (as leaves when they are floating) and compares the
/// outputs and, when the output is floating, the gradients of sum(output * seed).
inline void expect_cpu_cuda_agree(const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                  const std::vector<Tensor>& cpu_inputs, double tol = 1e-4) {
  SCOPED_TRACE(what);
  std::vector<Tensor> c, g;
  for (const Tensor& t : cpu_inputs) {
    Tensor a = t.clone(), b = t.to(gpu());
    if (is_floating(t.dtype())) {
      a.requires_grad_();
      b.requires_grad_();
    }
    c.push_back(a);
    g.push_back(b);
  }
  Tensor out_c = f(c), out_g = f(g);
  ASSERT_EQ(out_g.device(), gpu());
  EXPECT_TRUE(all_close(out_g, out_c, tol, tol)) << "forward";
  if (!is_floating(out_c.dtype()) || !out_c.requires_grad()) return;
  Tensor seed = randn(out_c.shape(), out_c.dtype());
  sum(mul(out_c, seed)).backward();
  sum(mul(out_g, seed.to(gpu()))).backward();
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].requires_grad() || !c[i].grad().defined()) continue;
    EXPECT_TRUE(all_close(g[i].grad(), c[i].grad(), tol, tol)) << "gradient of input " << i;
  }
}

}  // namespace minidl::testing
