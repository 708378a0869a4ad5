// The order statistics, searching, unique and cov/corrcoef on CUDA against the CPU: values and
// gradients of one drawn input on both devices, and the integer results element for element.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::cuda_order_stats_search_test {

using minidl::testing::expect_cpu_cuda_agree;

namespace {

using V = const std::vector<Tensor>&;

// An integer (or exact) result of f on x's CUDA copy equals the CPU's.
void expect_same_on_cuda(const std::string& what, const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  SCOPED_TRACE(what);
  const Tensor a = f(x), b = f(x.to(Device::cuda(0)));
  ASSERT_TRUE(b.device().is_cuda());
  EXPECT_EQ(b.dtype(), a.dtype());
  EXPECT_TRUE(b.to(Device::cpu()).equal(a));
}

Tensor r(const Shape& s) { return randn(s, kFloat64); }

}  // namespace

TEST(CudaOrderStats, MatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_cuda_agree("median", [](V x) { return median(x[0]); }, {r({4, 5})});
  expect_cpu_cuda_agree("median dim", [](V x) { return std::get<0>(median(x[0], 1, true)); }, {r({3, 6})});
  expect_cpu_cuda_agree("nanmedian", [](V x) {
    return std::get<0>(nanmedian(where(x[0] > 1.0, full_like(x[0], NAN), x[0]), 0));
  }, {r({5, 3})});
  expect_cpu_cuda_agree("kthvalue", [](V x) { return std::get<0>(kthvalue(x[0], 3, 0)); }, {r({5, 4})});
  for (const std::string mode : {"linear", "lower", "higher", "nearest", "midpoint"}) {
    expect_cpu_cuda_agree(("quantile " + mode).c_str(), [&](V x) {
      return quantile(x[0], Tensor::from_vector<double>({0.2, 0.5, 0.9}).to(x[0].device()), 1, false, mode);
    }, {r({3, 6})});
    expect_cpu_cuda_agree(("nanquantile " + mode).c_str(), [&](V x) {
      return nanquantile(where(x[0] > 1.0, full_like(x[0], NAN), x[0]), 0.3, 0, true, mode);
    }, {r({7, 2})});
  }
  expect_cpu_cuda_agree("cov", [](V x) { return cov(x[0]); }, {r({3, 8})});
  expect_cpu_cuda_agree("cov weights", [](V x) {
    return cov(x[0], 1, Tensor::from_vector<int64_t>({1, 2, 1, 1}).to(x[0].device()), exp(x[1]));
  }, {r({2, 4}), r({4})});
  expect_cpu_cuda_agree("corrcoef", [](V x) { return corrcoef(x[0]); }, {r({4, 7})});
  const Tensor x = r({3, 5});
  expect_same_on_cuda("median indices", [](const Tensor& t) { return std::get<1>(median(t, 1)); }, x);
  expect_same_on_cuda("kthvalue indices", [](const Tensor& t) { return std::get<1>(kthvalue(t, 2, 0)); }, x);
}

TEST(CudaSearchUnique, MatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Tensor seq = std::get<0>(sort(randint(0, 20, {2, 30}, TensorOptions().dtype(kInt64)), 1));
  const Tensor values = randint(-2, 22, {2, 9}, TensorOptions().dtype(kInt64));
  for (bool right : {false, true}) {
    expect_same_on_cuda("searchsorted", [&](const Tensor& v) {
      return searchsorted(seq.to(v.device()), v, false, right);
    }, values);
    expect_same_on_cuda("searchsorted 1-D", [&](const Tensor& v) {
      return searchsorted(seq[0].to(v.device()), v, true, right);
    }, values);
    expect_same_on_cuda("bucketize", [&](const Tensor& v) {
      return bucketize(v, seq[1].to(v.device()), false, right);
    }, values);
  }
  const Tensor labels = randint(0, 7, {40}, TensorOptions().dtype(kInt64));
  expect_same_on_cuda("bincount", [](const Tensor& t) { return bincount(t, {}, 9); }, labels);
  expect_same_on_cuda("bincount weights", [](const Tensor& t) {
    return bincount(t, ones({40}, kFloat64, t.device()) * 0.5);
  }, labels);
  expect_same_on_cuda("histc", [](const Tensor& t) { return histc(t, 7); }, r({100}));
  const auto part = [](const std::tuple<Tensor, Tensor, Tensor>& t, int which) {
    return which == 0 ? std::get<0>(t) : which == 1 ? std::get<1>(t) : std::get<2>(t);
  };
  const Tensor grid = randint(0, 3, {6, 2}, TensorOptions().dtype(kInt64));
  for (int which = 0; which < 3; ++which) {
    expect_same_on_cuda("unique", [&](const Tensor& t) { return part(unique(t, true, true, true), which); }, labels);
    expect_same_on_cuda("unique dim", [&](const Tensor& t) { return part(unique(t, true, true, true, 0), which); },
                        grid);
    expect_same_on_cuda("unique_consecutive",
                        [&](const Tensor& t) { return part(unique_consecutive(t, true, true), which); }, labels);
  }
}

}  // namespace minidl::cuda_order_stats_search_test
