// The BLAS-named products of ops/mm.h on CUDA (cuBLAS's beta): values and gradients against the
// CPU, the 16-bit types against float32, and PyTorch's beta = 0 rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_cuda_util.h"

namespace minidl::cuda_blas_products_test {

using namespace minidl::testing;

namespace {

struct ProductCase {
  const char* name;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  std::vector<Shape> shapes;
};

std::vector<ProductCase> product_cases() {
  return {
      {"addmm", [](auto& t) { return addmm(t[0], t[1], t[2], 0.5, -1.5); }, {{33, 17}, {33, 40}, {40, 17}}},
      {"addmm, transposed mat2, broadcast input", [](auto& t) { return addmm(t[0], t[1], t[2].t(), 2, 1); },
       {{33, 1}, {33, 40}, {17, 40}}},
      {"addmm, bias row", [](auto& t) { return addmm(t[0], t[1], t[2].t()); }, {{17}, {33, 40}, {17, 40}}},
      {"baddbmm, keys transposed", [](auto& t) { return baddbmm(t[0], t[1], t[2].transpose(1, 2), 1, 0.125); },
       {{3, 20, 24}, {3, 20, 64}, {3, 24, 64}}},
      {"baddbmm, broadcast mask", [](auto& t) { return baddbmm(t[0], t[1], t[2], -1, 2); },
       {{20, 24}, {3, 20, 16}, {3, 16, 24}}},
      {"addbmm", [](auto& t) { return addbmm(t[0], t[1], t[2], 1.5, 0.5); }, {{24}, {5, 20, 16}, {5, 16, 24}}},
      {"addmv", [](auto& t) { return addmv(t[0], t[1], t[2], 2, -1); }, {{33}, {33, 40}, {40}}},
      {"addr", [](auto& t) { return addr(t[0], t[1], t[2], 0.5, 2); }, {{33, 17}, {33}, {17}}},
      {"mv", [](auto& t) { return mv(t[0], t[1]); }, {{33, 40}, {40}}},
      {"dot", [](auto& t) { return dot(t[0], t[1]); }, {{300}, {300}}},
      {"outer", [](auto& t) { return outer(t[0], t[1]); }, {{33}, {17}}},
  };
}

}  // namespace

TEST(CudaBlasProducts, AgreeWithTheCpuInFloat32AndFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64})
    for (const ProductCase& c : product_cases()) {
      std::vector<Tensor> inputs;
      for (const Shape& s : c.shapes) inputs.push_back(randn(s, dtype));
      expect_cpu_cuda_agree((std::string(c.name) + " " + dtype_name(dtype)).c_str(), c.f, inputs,
                            dtype == kFloat64 ? 1e-10 : 1e-4);
    }
}

TEST(CudaBlasProducts, SixteenBitTypesAgreeWithFloat32) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kBFloat16, kFloat16})
    for (const ProductCase& c : product_cases()) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype));
      std::vector<Tensor> low, wide;
      for (const Shape& s : c.shapes) {
        low.push_back(randn(s, kFloat32, gpu()).to(dtype));
        wide.push_back(low.back().to(kFloat32));  // the same values, so only the arithmetic differs
      }
      const Tensor out = c.f(low);
      EXPECT_EQ(out.dtype(), dtype);
      // One rounding of a float32-accumulated result: a few units in the last place.
      EXPECT_TRUE(all_close(out.to(kFloat32), c.f(wide), dtype == kBFloat16 ? 0.1 : 0.02, dtype == kBFloat16 ? 2e-2 : 4e-3));
    }
}

TEST(CudaBlasProducts, BetaZeroIgnoresNaNInTheInput) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = randn({2, 5, 4}, kFloat32, gpu()), b = randn({2, 4, 3}, kFloat32, gpu());
  const Tensor poison = full({2, 5, 3}, nan, kFloat32, gpu());
  for (const Tensor& out : {baddbmm(poison, a, b, 0, 2), addmm(poison[0], a[0], b[0], 0),
                            addbmm(poison[0], a, b, 0)}) {
    EXPECT_FALSE(out.isnan().any().item<bool>()) << "a NaN reached the output";
  }
  EXPECT_TRUE(all_close(baddbmm(poison, a, b, 0, 2), mul(bmm(a, b), 2.0), 1e-5, 1e-5));
}

}  // namespace minidl::cuda_blas_products_test
