// The TF32 switches (ops/backend_setting.h): their defaults, set and get, the precision strings and
// their errors; on CUDA, what they change. TF32 keeps 10 bits of each float32 input's mantissa, so a
// product over k terms with TF32 differs from strict float32 by about 2^-11 * sqrt(k) of its scale,
// while strict float32 stays within about 2^-24 * k of the float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "minidl.h"
#include "ops/backend_setting.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::tf32_test {

using namespace minidl::testing;

namespace {

// Puts both switches back as they were at the end of a scope.
struct Tf32Scope {
  bool matmul = allow_tf32_matmul(), cudnn = allow_tf32_cudnn();
  std::string precision = float32_matmul_precision();
  ~Tf32Scope() {
    set_allow_tf32_matmul(matmul);
    if (precision == "medium") set_float32_matmul_precision(precision);
    set_allow_tf32_cudnn(cudnn);
  }
};

// The largest |a - b|, over the largest |b|.
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.detach().to(Device::cpu()).to(kFloat64).to_vector<double>();
  const std::vector<double> y = b.detach().to(Device::cpu()).to(kFloat64).to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

}  // namespace

TEST(Tf32Settings, DefaultsAreStrict) {
  if (std::getenv("MINIDL_ALLOW_TF32")) GTEST_SKIP() << "MINIDL_ALLOW_TF32 is set: the defaults are overridden";
  // Other tests restore what they change, so the defaults still hold here.
  EXPECT_FALSE(allow_tf32_matmul());
  EXPECT_FALSE(allow_tf32_cudnn());
  EXPECT_EQ(float32_matmul_precision(), "highest");
}

TEST(Tf32Settings, SetAndGet) {
  Tf32Scope scope;
  set_allow_tf32_matmul(true);
  EXPECT_TRUE(allow_tf32_matmul());
  EXPECT_EQ(float32_matmul_precision(), "high");
  set_allow_tf32_matmul(false);
  EXPECT_FALSE(allow_tf32_matmul());
  EXPECT_EQ(float32_matmul_precision(), "highest");

  // The two switches are independent.
  set_allow_tf32_cudnn(true);
  EXPECT_TRUE(allow_tf32_cudnn());
  EXPECT_FALSE(allow_tf32_matmul());
  set_allow_tf32_cudnn(false);
  EXPECT_FALSE(allow_tf32_cudnn());
}

TEST(Tf32Settings, PrecisionStrings) {
  Tf32Scope scope;
  set_float32_matmul_precision("high");
  EXPECT_TRUE(allow_tf32_matmul());
  EXPECT_EQ(float32_matmul_precision(), "high");
  set_float32_matmul_precision("medium");  // no bf16x3 path: TF32, as "high"
  EXPECT_TRUE(allow_tf32_matmul());
  EXPECT_EQ(float32_matmul_precision(), "medium");
  set_float32_matmul_precision("highest");
  EXPECT_FALSE(allow_tf32_matmul());
  EXPECT_EQ(float32_matmul_precision(), "highest");
  // The precision is matmul's only: cuDNN's switch is untouched.
  EXPECT_EQ(allow_tf32_cudnn(), scope.cudnn);
}

TEST(Tf32Settings, InvalidPrecisionIsAClearError) {
  Tf32Scope scope;
  expect_error([] { set_float32_matmul_precision("low"); }, {"highest", "high", "medium", "\"low\""});
  expect_error([] { set_float32_matmul_precision("HIGH"); }, {"\"HIGH\""});
  EXPECT_EQ(float32_matmul_precision(), scope.precision);  // unchanged by the failed calls
}

// A float32 product on CUDA: strict equals the float64 reference to float32's tolerance; with TF32
// it differs from strict by about TF32's rounding, no more. One call per setting: the first call of
// a shape runs cuBLASLt's heuristic pick, a tensor-core kernel under TF32 at this size.
// The GEMM timing switch beside the TF32 ones (ops/backend_setting.h): set wins over the environment.
TEST(BackendSettings, GemmAutotuneSetAndGet) {
  const bool before = gemm_autotune();
  set_gemm_autotune(false);
  EXPECT_FALSE(gemm_autotune());
  set_gemm_autotune(true);
  EXPECT_TRUE(gemm_autotune());
  set_gemm_autotune(before);
}

TEST(CudaTf32, MatmulDiffersFromStrictByTf32Rounding) {
  MINIDL_REQUIRE_CUDA();
  Tf32Scope scope;
  manual_seed(321);
  const int64_t k = 512;
  const Tensor a = randn({256, k}), b = randn({k, 192});
  const Tensor reference = matmul(a.to(kFloat64), b.to(kFloat64));
  set_allow_tf32_matmul(false);
  const Tensor strict = matmul(a.to(gpu()), b.to(gpu()));
  set_allow_tf32_matmul(true);
  const Tensor tf32 = matmul(a.to(gpu()), b.to(gpu()));
  const double strict_error = relative_error(strict, reference);
  const double tf32_error = relative_error(tf32, reference);
  EXPECT_LT(strict_error, 1e-5) << "strict float32 against float64";
  EXPECT_GT(tf32_error, 1e-5) << "TF32 gave strict float32's accuracy: did it run in TF32?";
  EXPECT_LT(tf32_error, 1e-2) << "TF32 against float64: more than TF32's rounding";
  EXPECT_GT(tf32_error, 5 * strict_error);
}

// The cached GEMM choices are keyed by the setting: strict after TF32 (same shape, same operands, past
// the call that times configurations) is strict again, and TF32 applies to the fused linear
// epilogue and the batched products too.
TEST(CudaTf32, StrictAfterTf32StaysStrict) {
  MINIDL_REQUIRE_CUDA();
  Tf32Scope scope;
  manual_seed(322);
  const Tensor x = randn({128, 384}).to(gpu()), w = randn({96, 384}).to(gpu()), bias = randn({96}).to(gpu());
  const Tensor reference = linear(x.to(kFloat64), w.to(kFloat64), bias.to(kFloat64));
  const Tensor a3 = randn({4, 64, 256}).to(gpu()), b3 = randn({4, 256, 80}).to(gpu());
  const Tensor reference3 = matmul(a3.to(kFloat64), b3.to(kFloat64));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    set_allow_tf32_matmul(false);
    EXPECT_LT(relative_error(linear(x, w, bias), reference), 1e-5);
    EXPECT_LT(relative_error(matmul(a3, b3), reference3), 1e-5);
    set_allow_tf32_matmul(true);
    EXPECT_LT(relative_error(linear(x, w, bias), reference), 1e-2);
    EXPECT_LT(relative_error(matmul(a3, b3), reference3), 1e-2);
  }
}

// cuDNN: strict float32 by default, within TF32's rounding where allowed; a shape measured under one
// setting is measured again under the other, so strict comes back strict. Under TF32 the
// convolutions run channels-last, as the 16-bit ones do (cudnn_format), and strict ones NCHW.
TEST(CudaTf32, ConvolutionFollowsTheCudnnSwitch) {
  MINIDL_REQUIRE_CUDNN();
  Tf32Scope scope;
  ConvBackendScope backend(ConvBackend::Cudnn);
  manual_seed(323);
  const Tensor x = randn({4, 32, 12, 12}), w = randn({48, 32, 3, 3});
  const Tensor reference = conv2d(x.to(kFloat64), w.to(kFloat64));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    set_allow_tf32_cudnn(false);
    // Strict float32, on whichever algorithm: FFT and Winograd round more than a direct sum does.
    const Tensor strict = conv2d(x.to(gpu()), w.to(gpu()));
    EXPECT_LT(relative_error(strict, reference), 1e-4);
    EXPECT_TRUE(strict.is_contiguous());
    set_allow_tf32_cudnn(true);
    const Tensor fast = conv2d(x.to(gpu()), w.to(gpu()));
    EXPECT_LT(relative_error(fast, reference), 1e-2);
    EXPECT_TRUE(fast.is_contiguous(MemoryFormat::ChannelsLast));
  }
}

// Under TF32 a first layer of one input channel (conv2d_relu, input without gradient) runs on the
// direct kernels (ops/cuda/conv2d_direct.cu), channels-last for the next layer's cuDNN, and their
// products are strict float32 even so: within float32 rounding of float64, gradients too.
TEST(CudaTf32, FirstLayerRunsDirectAndStrictUnderTf32) {
  MINIDL_REQUIRE_CUDA();
  Tf32Scope scope;
  set_allow_tf32_cudnn(true);
  manual_seed(324);
  const Tensor image = randn({6, 1, 28, 28}), w1 = mul(randn({32, 1, 3, 3}), 0.3), b1 = mul(randn({32}), 0.1);
  const Tensor up = randn({6, 32, 26, 26});
  Tensor w64 = w1.to(kFloat64).requires_grad_(), b64 = b1.to(kFloat64).requires_grad_();
  const Tensor want = conv2d_relu(image.to(kFloat64), w64, b64);
  (want * up.to(kFloat64)).sum().backward();
  Tensor wg = w1.to(gpu()).requires_grad_(), bg = b1.to(gpu()).requires_grad_();
  const Tensor got = conv2d_relu(image.to(gpu()), wg, bg);
  EXPECT_TRUE(got.is_contiguous(MemoryFormat::ChannelsLast));
  (got * up.to(gpu())).sum().backward();
  EXPECT_LT(relative_error(got, want), 1e-6);
  EXPECT_LT(relative_error(wg.grad(), w64.grad()), 1e-5);
  EXPECT_LT(relative_error(bg.grad(), b64.grad()), 1e-5);
}

// The layout of a float32 convolution on cuDNN follows the TF32 switch, so a switch flipped between
// a forward and its backward is a clear error, not a layout mismatch deep in cuDNN.
TEST(CudaTf32, SwitchFlippedBeforeTheBackwardIsAClearError) {
  MINIDL_REQUIRE_CUDNN();
  Tf32Scope scope;
  ConvBackendScope backend(ConvBackend::Cudnn);
  manual_seed(325);
  set_allow_tf32_cudnn(true);
  Tensor w = randn({8, 4, 3, 3}).to(gpu()).requires_grad_();
  const Tensor y = conv2d(randn({2, 4, 9, 9}).to(gpu()), w);
  set_allow_tf32_cudnn(false);
  try {
    y.sum().backward();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("TF32 setting for convolutions"), std::string::npos) << e.what();
  }
}

}  // namespace minidl::tf32_test
