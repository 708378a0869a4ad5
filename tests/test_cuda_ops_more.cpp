// The diagonal, combining, composed math, skipping reductions, splits and index ops on CUDA against
// the CPU: values and gradients of one drawn input on both devices.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::cuda_ops_more_test {

using minidl::testing::expect_cpu_cuda_agree;

namespace {


Tensor r(const Shape& s) { return randn(s, kFloat64); }

}  // namespace

TEST(CudaOpsMore, MatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  using V = const std::vector<Tensor>&;
  expect_cpu_cuda_agree("diagonal", [](V x) { return diagonal(x[0], 1, 0, 2); }, {r({3, 2, 4})});
  expect_cpu_cuda_agree("diag_embed", [](V x) { return diag_embed(x[0], -1); }, {r({2, 3})});
  expect_cpu_cuda_agree("trace", [](V x) { return trace(x[0]); }, {r({4, 3})});
  expect_cpu_cuda_agree("kron", [](V x) { return kron(x[0], x[1]); }, {r({2, 3}), r({3, 2})});
  expect_cpu_cuda_agree("block_diag", [](V x) { return block_diag({x[0], x[1]}); }, {r({2, 2}), r({3})});
  expect_cpu_cuda_agree("meshgrid", [](V x) { return meshgrid({x[0], x[1]}, "xy")[1] * 2.0; }, {r({3}), r({2})});
  expect_cpu_cuda_agree("cdist product", [](V x) { return cdist(x[0], x[1]); }, {r({40, 5}), r({30, 5})});
  expect_cpu_cuda_agree("cdist p=1", [](V x) { return cdist(x[0], x[1], 1.0); }, {r({4, 5}), r({3, 5})});
  expect_cpu_cuda_agree("logaddexp", [](V x) { return logaddexp(x[0], x[1]); }, {r({3, 4}), r({4})});
  expect_cpu_cuda_agree("xlogy", [](V x) { return xlogy(x[0], x[1].abs() + 0.5); }, {r({6}), r({6})});
  expect_cpu_cuda_agree("sinc", [](V x) { return sinc(x[0]); }, {r({9})});
  expect_cpu_cuda_agree("frac", [](V x) { return frac(x[0] * 4.0); }, {r({9})});
  expect_cpu_cuda_agree("nansum", [](V x) { return nansum(where(x[0] > 1.0, full_like(x[0], NAN), x[0]), {1}); },
                          {r({3, 4})});
  expect_cpu_cuda_agree("nanmean", [](V x) { return nanmean(x[0], {0}); }, {r({3, 4})});
  expect_cpu_cuda_agree("split by sizes", [](V x) { return split(x[0], std::vector<int64_t>{1, 3}, 1)[1]; },
                          {r({2, 4})});
  expect_cpu_cuda_agree("tensor_split", [](V x) { return tensor_split(x[0], 3, 0)[2]; }, {r({5, 2})});
  expect_cpu_cuda_agree("take_along_dim",
                          [](V x) { return take_along_dim(x[0], argsort(x[0].detach(), 1), 1); }, {r({3, 5})});
  expect_cpu_cuda_agree("index_fill", [](V x) {
    return index_fill(x[0], 1, Tensor::from_vector<int64_t>({0, 2}).to(x[0].device()), x[1]);
  }, {r({2, 3}), r({})});
  expect_cpu_cuda_agree("index_copy", [](V x) {
    return index_copy(x[0], 0, Tensor::from_vector<int64_t>({2, 0}).to(x[0].device()), x[1]);
  }, {r({3, 2}), r({2, 2})});
  expect_cpu_cuda_agree("rot90", [](V x) { return rot90(x[0], 1, {-2, -1}); }, {r({2, 3, 4})});
  expect_cpu_cuda_agree("column_stack", [](V x) { return column_stack({x[0], x[1]}); }, {r({3}), r({3, 2})});
  expect_cpu_cuda_agree("tensordot", [](V x) { return tensordot(x[0], x[1], {1, 2}, {2, 0}); },
                          {r({3, 4, 5}), r({5, 2, 4})});
  expect_cpu_cuda_agree("multi_dot", [](V x) { return multi_dot({x[0], x[1], x[2]}); }, {r({3}), r({3, 4}), r({4, 2})});
  expect_cpu_cuda_agree("matrix_power", [](V x) { return matrix_power(x[0] * 0.5, 5); }, {r({2, 3, 3})});
  expect_cpu_cuda_agree("pdist", [](V x) { return pdist(x[0]); }, {r({5, 3})});
  expect_cpu_cuda_agree("renorm", [](V x) { return renorm(x[0] * 3.0, 2, 0, 1.0); }, {r({3, 4})});
  expect_cpu_cuda_agree("unfold", [](V x) { return unfold(x[0], 1, 4, 3); }, {r({2, 10})});
  expect_cpu_cuda_agree("masked_scatter", [](V x) {
    const Tensor mask = Tensor::from_vector<int64_t>({1, 0, 1, 0, 1, 1}, {2, 3}).to(kBool).to(x[0].device());
    return masked_scatter(x[0], mask, x[1]);
  }, {r({2, 3}), r({5})});
  Tensor filled = zeros({7, 3}, kFloat64, Device::cuda(0));
  filled.fill_diagonal_(1.0, true);
  Tensor filled_cpu = zeros({7, 3}, kFloat64);
  filled_cpu.fill_diagonal_(1.0, true);
  EXPECT_TRUE(filled.to(Device::cpu()).equal(filled_cpu));
  Tensor ids = zeros({1000}, kInt64, Device::cuda(0));
  ids.random_(2, 6);
  EXPECT_EQ(amin(ids).item<int64_t>(), 2);
  EXPECT_EQ(amax(ids).item<int64_t>(), 5);
  const Tensor x = r({3, 4}).to(Device::cuda(0));
  EXPECT_EQ(count_nonzero(x > 0).item<int64_t>(), count_nonzero(x.to(Device::cpu()) > 0).item<int64_t>());
  auto [lo, hi] = aminmax(x, 1);
  EXPECT_TRUE(lo.to(Device::cpu()).equal(amin(x.to(Device::cpu()), {1})));
  EXPECT_TRUE(triu_indices(3, 4, 1, TensorOptions().dtype(kInt64).device(Device::cuda(0))).to(Device::cpu())
                  .equal(triu_indices(3, 4, 1)));
}

}  // namespace minidl::cuda_ops_more_test
