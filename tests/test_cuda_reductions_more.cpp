// The reductions, scans and sorts on CUDA against the CPU on the same random inputs (odd sizes, dims
// that are not innermost, long rows that span several scan tiles, ties and NaN for the sorts), and
// float64 gradchecks on the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"

namespace minidl::cuda_reductions_more_test {

using namespace minidl::testing;

namespace {

// Random integers in [0, 5) as `dtype`: many ties.
Tensor ties(const Shape& shape, DType dtype) {
  return floor_divide(rand(shape, kFloat64) * 5.0, 1.0).to(dtype);
}

void expect_gradcheck_gpu(const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const Shape& shape) {
  SCOPED_TRACE(what);
  Tensor x = randn(shape, kFloat64, gpu()).requires_grad_();
  GradcheckResult r = gradcheck(f, {x});
  EXPECT_TRUE(r) << r.message;
}

// f on the CPU and on the GPU, on the same values, compared with the dtype's tolerance.
void expect_matches_cpu(const char* what, const std::function<Tensor(const Tensor&)>& f, const Tensor& x_cpu) {
  SCOPED_TRACE(std::string(what) + " on " + shape_str(x_cpu.shape()) + " " + dtype_name(x_cpu.dtype()));
  Tensor ref = f(x_cpu);
  Tensor got = f(x_cpu.to(gpu()));
  EXPECT_EQ(got.device(), gpu());
  const double t = is_floating(x_cpu.dtype()) ? tol(x_cpu.dtype()) : 0;
  EXPECT_TRUE(all_close(got, ref, t, t));
}

const Shape kShapes[] = {{7}, {3, 5}, {4, 1, 6}, {2, 3, 33}, {5, 300}, {2, 1030, 3}};

}  // namespace

TEST(CudaReductionsMore, ProdAnyAllExtremaMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Shape& s : kShapes) {
      // Values near 1 keep long products finite.
      Tensor x = (rand(s, kFloat64) * 0.2 + 0.9).to(dtype);
      const int64_t last = static_cast<int64_t>(s.size()) - 1;
      expect_matches_cpu("prod", [](const Tensor& t) { return prod(t); }, x);
      expect_matches_cpu("prod dim 0", [](const Tensor& t) { return prod(t, 0); }, x);
      expect_matches_cpu("prod last", [last](const Tensor& t) { return prod(t, last, true); }, x);
      Tensor r = randn(s, dtype);
      expect_matches_cpu("max", [](const Tensor& t) { return max(t); }, r);
      expect_matches_cpu("amin dim 0", [](const Tensor& t) { return amin(t, {0}); }, r);
      expect_matches_cpu("amax last", [last](const Tensor& t) { return amax(t, {last}, true); }, r);
      Tensor z = ties(s, dtype);
      expect_matches_cpu("any", [](const Tensor& t) { return any(t, 0); }, z);
      expect_matches_cpu("all", [last](const Tensor& t) { return all(t, last); }, z);
      expect_matches_cpu("all of all", [](const Tensor& t) { return all(t); }, z);
    }
  }
  Tensor i = ties({3, 7}, kInt64);
  expect_matches_cpu("prod int64", [](const Tensor& t) { return prod(t, 1); }, i);
  expect_matches_cpu("amin int64", [](const Tensor& t) { return amin(t, {0}); }, i);
  expect_matches_cpu("any bool", [](const Tensor& t) { return any(t, 1); }, ties({3, 7}, kBool));
  // Exact zeros in a product and its gradient.
  Tensor zz = Tensor::from_vector<double>({2, 0, 3, 1, 4, 5, 0, 2, 0}, {3, 3});
  for (const Device d : {Device::cpu(), gpu()}) {
    Tensor x = zz.to(d).detach().requires_grad_();
    prod(x, 1).sum().backward();
    EXPECT_EQ(x.grad().to(Device::cpu()).to_vector<double>(), (std::vector<double>{0, 6, 0, 20, 5, 4, 0, 0, 0}));
  }
}

TEST(CudaReductionsMore, StatisticsMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Shape& s : kShapes) {
      Tensor x = randn(s, dtype);
      expect_matches_cpu("std", [](const Tensor& t) { return minidl::std(t); }, x);
      expect_matches_cpu("std dim 0", [](const Tensor& t) { return minidl::std(t, {0}, false, true); }, x);
      expect_matches_cpu("logsumexp dim 0", [](const Tensor& t) { return logsumexp(t, {0}); }, x);
      expect_matches_cpu("logsumexp all", [](const Tensor& t) { return logsumexp(t, {}); }, x);
      for (double p : {2.0, 1.0, 0.0, 3.0, 0.5, double(INFINITY), -double(INFINITY)}) {
        expect_matches_cpu("norm", [p](const Tensor& t) { return norm(t, p); }, x);
        expect_matches_cpu("norm dim 0", [p](const Tensor& t) { return norm(t, p, {0}); }, x);
      }
    }
  }
  Tensor a = randn({4, 5}, kFloat64);
  Tensor b = a + 1e-7 * randn({4, 5}, kFloat64);
  EXPECT_TRUE(all_equal(isclose(a.to(gpu()), b.to(gpu())), isclose(a, b)));
  EXPECT_EQ(allclose(a.to(gpu()), b.to(gpu()), 1e-5, 1e-6), allclose(a, b, 1e-5, 1e-6));
  EXPECT_TRUE(equal(a.to(gpu()), a.to(gpu()).clone()));
  EXPECT_FALSE(equal(a.to(gpu()), b.to(gpu())));
}

TEST(CudaReductionsMore, ScansMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Shape shapes[] = {{7}, {3, 5}, {2, 3, 33}, {2, 1000}, {3, 4097}, {4, 600, 3}, {1, 1}};
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const Shape& s : shapes) {
      Tensor x = randn(s, dtype);
      Tensor near1 = (rand(s, kFloat64) * 0.2 + 0.9).to(dtype);
      for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
        expect_matches_cpu("cumsum", [d](const Tensor& t) { return cumsum(t, d); }, x);
        expect_matches_cpu("cumprod", [d](const Tensor& t) { return cumprod(t, d); }, near1);
        // The gradients: reversed cumsum, and cumprod's exact kernel.
        Tensor g = randn(s, dtype);
        expect_matches_cpu("cumsum backward", [d, &g](const Tensor& t) {
          Tensor leaf = t.detach().requires_grad_();
          cumsum(leaf, d).backward(g.to(t.device()));
          return leaf.grad();
        }, x);
        expect_matches_cpu("cumprod backward", [d, &g](const Tensor& t) {
          return cumprod_backward(g.to(t.device()), t, d);
        }, near1);
      }
    }
  }
  expect_matches_cpu("cumsum int64", [](const Tensor& t) { return cumsum(t, 1); }, ties({3, 300}, kInt64));
  expect_matches_cpu("cumsum bool", [](const Tensor& t) { return cumsum(t, 0); }, ties({70, 3}, kBool));
  // Zeros in cumprod's gradient.
  Tensor z = randn({3, 5}, kFloat64);
  for (int64_t i : {1, 6, 8, 12}) z.data<double>()[i] = 0;
  Tensor g = randn({3, 5}, kFloat64);
  for (int64_t d : {0, 1}) {
    expect_matches_cpu("cumprod backward with zeros", [d, &g](const Tensor& t) {
      return cumprod_backward(g.to(t.device()), t, d);
    }, z);
  }
}

TEST(CudaReductionsMore, SortsMatchCpuExactly) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Stable on both devices, so values and indices agree exactly, ties included.
  const Shape shapes[] = {{7}, {3, 5}, {2, 3, 33}, {1, 5000}, {300, 17}, {4, 129, 3}};
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    for (const Shape& s : shapes) {
      Tensor x = ties(s, dtype);
      if (is_floating(dtype)) {
        // NaN, infinities and zeros of both signs among the ties.
        Tensor flat = x.reshape({x.numel()});
        const int64_t n = x.numel();
        Tensor special = Tensor::from_vector<double>({NAN, INFINITY, -INFINITY, -0.0, 0.0, NAN}).to(dtype);
        for (int64_t k = 0; k < std::min<int64_t>(6, n); ++k) {
          NoGradGuard no_grad;
          Tensor dst = flat.slice(0, (k * 7) % n, (k * 7) % n + 1);
          copy_(dst, special.slice(0, k, k + 1));
        }
      }
      for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
        for (bool descending : {false, true}) {
          expect_matches_cpu("sort values", [d, descending](const Tensor& t) {
            return std::get<0>(sort(t, d, descending));
          }, x);
          expect_matches_cpu("sort indices", [d, descending](const Tensor& t) {
            return std::get<1>(sort(t, d, descending));
          }, x);
        }
        const int64_t k = std::min<int64_t>(3, s[static_cast<size_t>(d)]);
        expect_matches_cpu("topk indices", [d, k](const Tensor& t) { return std::get<1>(topk(t, k, d)); }, x);
        expect_matches_cpu("topk smallest", [d, k](const Tensor& t) {
          return std::get<0>(topk(t, k, d, false));
        }, x);
      }
    }
  }
  expect_matches_cpu("sort bool", [](const Tensor& t) { return std::get<1>(sort(t, 1)); }, ties({4, 9}, kBool));
}

TEST(CudaReductionsMore, GradcheckOnGpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck_gpu("prod", [](auto& in) { return prod(in[0], 1); }, {3, 4});
  expect_gradcheck_gpu("prod all", [](auto& in) { return prod(in[0]); }, {2, 3});
  expect_gradcheck_gpu("std", [](auto& in) { return minidl::std(in[0], {0}); }, {4, 3});
  expect_gradcheck_gpu("norm 2", [](auto& in) { return norm(in[0], 2, {1}); }, {3, 4});
  expect_gradcheck_gpu("norm 3", [](auto& in) { return norm(in[0], 3); }, {3, 4});
  expect_gradcheck_gpu("norm inf", [](auto& in) { return norm(in[0], INFINITY, {0}); }, {3, 4});
  expect_gradcheck_gpu("logsumexp", [](auto& in) { return logsumexp(in[0], {1}); }, {3, 5});
  expect_gradcheck_gpu("amax", [](auto& in) { return amax(in[0], {0, 2}); }, {2, 3, 4});
  expect_gradcheck_gpu("min", [](auto& in) { return min(in[0]); }, {3, 4});
  expect_gradcheck_gpu("cumsum", [](auto& in) { return cumsum(in[0], 0); }, {4, 3});
  expect_gradcheck_gpu("cumprod", [](auto& in) { return cumprod(in[0], 1); }, {3, 5});
  expect_gradcheck_gpu("sort", [](auto& in) { return std::get<0>(sort(in[0], 0, true)); }, {4, 3});
  expect_gradcheck_gpu("topk", [](auto& in) { return std::get<0>(topk(in[0], 2, 1)); }, {3, 5});
}

TEST(CudaReductionsMore, Errors) {
  MINIDL_REQUIRE_CUDA();
  Tensor x = zeros({2, 3}, kFloat32, gpu());
  EXPECT_THROW(topk(x, 4), Error);
  EXPECT_THROW(cumsum(x, 2), Error);
  EXPECT_THROW(isclose(x, zeros({2, 3})), Error);  // two devices
  EXPECT_THROW(equal(x, zeros({2, 3})), Error);
  EXPECT_THROW(norm(zeros({2}, kInt64, gpu())), Error);
}

}  // namespace minidl::cuda_reductions_more_test
