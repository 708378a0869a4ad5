// libtorch calls that fill in the API: the in-place view methods (t_, transpose_, squeeze_,
// unsqueeze_), the random fills exponential_ / geometric_ / log_normal_ / cauchy_, randint_like,
// combinations, the one-argument where, and the index_put / scatter_ methods.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::libtorch_ops_misc_test {

namespace {

using testing::expect_error;
using D = std::vector<double>;
using L = std::vector<int64_t>;

D values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }
L longs(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }

TEST(LibtorchOpsMisc, InplaceViewsChangeTheTensorItself) {
  Tensor x = arange(6, kFloat32).reshape({2, 3});
  const Tensor alias = x;  // another handle to the same tensor sees the change
  x.t_();
  EXPECT_EQ(alias.sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(alias.select(0, 1)), (D{1, 4}));
  x.unsqueeze_(0);
  EXPECT_EQ(x.sizes(), (Shape{1, 3, 2}));
  x.squeeze_(1);  // not of size 1: unchanged, as PyTorch's
  EXPECT_EQ(x.sizes(), (Shape{1, 3, 2}));
  x.squeeze_();
  EXPECT_EQ(x.sizes(), (Shape{3, 2}));
  x.transpose_(0, 1);
  EXPECT_EQ(values(x), (D{0, 1, 2, 3, 4, 5}));
  Tensor v = arange(3, kFloat32);
  v.t_();  // fewer than 2 dims: nothing to do
  EXPECT_EQ(v.sizes(), (Shape{3}));
  expect_error([] { zeros({2, 2, 2}).t_(); }, {"t_", "at most 2 dims"});
  // Recorded: the gradient reaching the new layout goes back to the old one.
  Tensor a = randn({2, 3}, kFloat64).requires_grad_();
  const Tensor w = arange(6, kFloat64).reshape({3, 2});
  Tensor b = a * 2;
  b.t_();
  (b * w).sum().backward();
  EXPECT_TRUE(equal(a.grad(), w.t() * 2));
  Tensor c = a * 1;
  c.unsqueeze_(1).squeeze_(1);
  EXPECT_EQ(c.sizes(), (Shape{2, 3}));
  expect_error([&] { a.t_(); }, {"t_", "leaf"});
  {
    NoGradGuard no_grad;
    a.t_();  // allowed without recording
  }
  EXPECT_EQ(a.sizes(), (Shape{3, 2}));
}

TEST(LibtorchOpsMisc, RandomFillsFollowTheirDistributions) {
  manual_seed(1);
  const int64_t n = 200000;
  Tensor e = Tensor::empty({n}, kFloat32).exponential_(2.0);
  EXPECT_GE(e.min().item<float>(), 0);
  EXPECT_NEAR(e.mean().item<float>(), 0.5, 0.01);  // 1 / lambd
  Tensor g = Tensor::empty({n}, kInt64);
  g.geometric_(0.25);
  EXPECT_EQ(g.min().item<int64_t>(), 1);  // the trial of the first success counts from 1
  EXPECT_NEAR(g.to(kFloat64).mean().item<double>(), 4.0, 0.05);  // 1 / p
  Tensor ln = Tensor::empty({n}, kFloat64).log_normal_(0.5, 0.25);
  EXPECT_NEAR(log(ln).mean().item<double>(), 0.5, 0.005);
  EXPECT_NEAR(log(ln).std().item<double>(), 0.25, 0.005);
  Tensor c = Tensor::empty({n}, kFloat64).cauchy_(1.0, 2.0);
  const Tensor sorted = std::get<0>(sort(c));
  EXPECT_NEAR(sorted[n / 2].item<double>(), 1.0, 0.05);  // the median
  EXPECT_NEAR(sorted[3 * n / 4].item<double>() - sorted[n / 4].item<double>(), 4.0, 0.1);  // quartiles at +-sigma
  // manual_seed repeats them; a view is filled through its strides.
  manual_seed(7);
  const D first = values(Tensor::empty({5}).exponential_());
  manual_seed(7);
  EXPECT_EQ(values(Tensor::empty({5}).exponential_()), first);
  Tensor m = zeros({3, 4});
  m.select(1, 2).cauchy_();
  EXPECT_EQ(values(m.select(1, 0)), (D{0, 0, 0}));
  EXPECT_NE(values(m.select(1, 2)), (D{0, 0, 0}));
  expect_error([] { Tensor::empty({2}).exponential_(0); }, {"exponential_", "lambd > 0"});
  expect_error([] { Tensor::empty({2}).geometric_(1.5); }, {"geometric_", "0 < p < 1"});
  expect_error([] { Tensor::empty({2}, kInt64).cauchy_(); }, {"cauchy_", "floating", "int64"});
  expect_error([] { Tensor::empty({2}).log_normal_(0, -1); }, {"log_normal_", "std > 0"});
}

TEST(LibtorchOpsMisc, RandintLike) {
  manual_seed(2);
  const Tensor like = zeros({3, 50}, kInt32);
  const Tensor r = randint_like(like, 10);
  EXPECT_EQ(r.dtype(), kInt32);
  EXPECT_EQ(r.sizes(), (Shape{3, 50}));
  EXPECT_GE(r.min().item<int32_t>(), 0);
  EXPECT_LE(r.max().item<int32_t>(), 9);
  const Tensor f = randint_like(zeros({100}), -3, 3);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(equal(f, floor(f)));
  EXPECT_GE(f.min().item<float>(), -3);
  EXPECT_LE(f.max().item<float>(), 2);
}

TEST(LibtorchOpsMisc, Combinations) {
  const Tensor x = tensor({1, 2, 3, 4}, kInt64);
  EXPECT_EQ(longs(combinations(x)), (L{1, 2, 1, 3, 1, 4, 2, 3, 2, 4, 3, 4}));
  EXPECT_EQ(combinations(x).sizes(), (Shape{6, 2}));
  const Tensor three = tensor({1, 2, 3}, kInt64);
  EXPECT_EQ(longs(combinations(three, 2, /*with_replacement=*/true)), (L{1, 1, 1, 2, 1, 3, 2, 2, 2, 3, 3, 3}));
  EXPECT_EQ(longs(combinations(three, 3)), (L{1, 2, 3}));
  EXPECT_EQ(combinations(three, 4).sizes(), (Shape{0, 4}));
  EXPECT_EQ(combinations(three, 1).sizes(), (Shape{3, 1}));
  EXPECT_EQ(combinations(three, 0).sizes(), (Shape{0}));
  expect_error([] { combinations(zeros({2, 2})); }, {"combinations", "1-D", "[2, 2]"});
  expect_error([] { combinations(arange(2000), 5); }, {"combinations", "too many"});
  // Each element of 4 sits in 3 of the 6 pairs.
  Tensor w = tensor({1.0, 2.0, 3.0, 4.0}, kFloat64).requires_grad_();
  combinations(w).sum().backward();
  EXPECT_EQ(values(w.grad()), (D{3, 3, 3, 3}));
}

TEST(LibtorchOpsMisc, WhereOfOneArgumentAndTheScatterAndIndexPutMethods) {
  const Tensor mask = tensor({{1, 0, 1}, {0, 1, 0}}, kInt64).to(kBool);
  const std::vector<Tensor> at = where(mask);
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(longs(at[0]), (L{0, 0, 1}));
  EXPECT_EQ(longs(at[1]), (L{0, 2, 1}));
  EXPECT_EQ(longs(where(full({}, 1.0))[0]), (L{0}));
  const Tensor x = zeros({3});
  const Tensor put = x.index_put({tensor({0, 2}, kInt64)}, tensor({5.0, 7.0}));
  EXPECT_EQ(values(put), (D{5, 0, 7}));
  EXPECT_EQ(values(x), (D{0, 0, 0}));  // out of place
  EXPECT_EQ(values(index_put(x, {tensor({1, 1}, kInt64)}, tensor({1.0, 2.0}), true)), (D{0, 3, 0}));
  Tensor s = zeros({2, 3});
  s.scatter_(1, tensor({{2}, {0}}, kInt64), 1.0);
  EXPECT_EQ(values(s), (D{0, 0, 1, 1, 0, 0}));
  s.scatter_add_(1, tensor({{2}, {2}}, kInt64), ones({2, 1}));
  EXPECT_EQ(values(s), (D{0, 0, 2, 1, 0, 1}));
  s.scatter_(0, tensor({{1, 1, 1}}, kInt64), full({1, 3}, 9.0));
  EXPECT_EQ(values(s), (D{0, 0, 2, 9, 9, 9}));
}

TEST(CudaLibtorchOpsMisc, MatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(3);
  const Tensor e = Tensor::empty({100000}, kFloat32, Device::cuda()).exponential_(4.0);
  EXPECT_GE(e.min().item<float>(), 0);
  EXPECT_NEAR(e.mean().item<float>(), 0.25, 0.01);
  Tensor g = Tensor::empty({100000}, kInt64, Device::cuda());
  g.geometric_(0.5);
  EXPECT_NEAR(g.to(kFloat64).mean().item<double>(), 2.0, 0.05);
  const Tensor x = tensor({1.0, 2.0, 3.0}).cuda();
  EXPECT_EQ(values(combinations(x).cpu()), (D{1, 2, 1, 3, 2, 3}));
  Tensor v = x.reshape({3, 1}).clone();
  v.t_();
  EXPECT_EQ(v.sizes(), (Shape{1, 3}));
  EXPECT_EQ(longs(where(gt(x, 1.5))[0].cpu()), (L{1, 2}));
}

}  // namespace

}  // namespace minidl::libtorch_ops_misc_test
