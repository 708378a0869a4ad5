// Factories with TensorOptions, tensor(...) literals and random draws, against libtorch's values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "minidl.h"
#include "test_util.h"

namespace minidl::factories_test {

namespace {

using testing::expect_error;
using F = std::vector<float>;
using L = std::vector<int64_t>;

TEST(Factories, OptionsAndSizes) {
  TensorOptions o = TensorOptions().dtype(kFloat64).device(kCPU).requires_grad(true);
  EXPECT_EQ(o.dtype(), kFloat64);
  EXPECT_TRUE(o.requires_grad());
  EXPECT_FALSE(TensorOptions().has_dtype());
  EXPECT_EQ(TensorOptions(kCUDA).device(), Device::cuda(0));
  EXPECT_EQ(dtype(kInt64).dtype(), kInt64);
  EXPECT_EQ(dtype<double>().dtype(), kFloat64);
  EXPECT_EQ(device(Device::cpu()).device(), Device::cpu());
  EXPECT_TRUE(requires_grad().requires_grad());

  EXPECT_EQ(zeros({2, 3}).sizes(), (Shape{2, 3}));
  EXPECT_EQ(zeros(4).sizes(), (Shape{4}));  // one integer is a 1-d size
  Shape s{2, 2};
  EXPECT_EQ(ones(s, kInt64).to_vector<int64_t>(), (L{1, 1, 1, 1}));
  EXPECT_EQ(zeros({2}, kFloat64, Device::cpu()).dtype(), kFloat64);
  EXPECT_EQ(zeros({2}, dtype(kFloat64).requires_grad(true)).requires_grad(), true);
  EXPECT_EQ(empty({3, 1}, kInt64).sizes(), (Shape{3, 1}));
  EXPECT_EQ(minidl::empty(2).dtype(), kFloat32);
  EXPECT_EQ(zeros({}).dim(), 0);
}

TEST(Factories, FullInfersItsDtype) {
  EXPECT_EQ(full({2}, 0.5).dtype(), kFloat32);
  EXPECT_EQ(full({2}, 7).dtype(), kInt64);  // torch.full((2,), 7).dtype == torch.int64
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_EQ(full({2}, 7, kFloat64).to_vector<double>(), (std::vector<double>{7, 7}));
  Tensor x = tensor({1.5, 2.});
  EXPECT_EQ(full_like(x, 3).dtype(), kFloat32);  // like x, not like the value
  EXPECT_EQ(full_like(x, 3, kInt64).to_vector<int64_t>(), (L{3, 3}));
  EXPECT_EQ(zeros_like(x).to_vector<float>(), (F{0, 0}));
  EXPECT_EQ(ones_like(x, kInt64).dtype(), kInt64);
  EXPECT_EQ(empty_like(x).sizes(), (Shape{2}));
  EXPECT_EQ(rand_like(x, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(randn_like(x).sizes(), (Shape{2}));
}

TEST(Factories, EyeLinspaceLogspace) {
  EXPECT_EQ(eye(2).to_vector<float>(), (F{1, 0, 0, 1}));
  EXPECT_EQ(eye(2, 3, kInt64).to_vector<int64_t>(), (L{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(eye(3, 2).to_vector<float>(), (F{1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(linspace(0, 1, 5).to_vector<float>(), (F{0, 0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(linspace(-1, 1, 1).to_vector<float>(), (F{-1}));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  EXPECT_EQ(linspace(0, 1, 3, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(logspace(0, 2, 3).to_vector<float>(), (F{1, 10, 100}));
  EXPECT_EQ(logspace(0, 3, 4, 2).to_vector<float>(), (F{1, 2, 4, 8}));
  expect_error([] { (void)linspace(0, 1, -1); }, {"linspace", "non-negative", "-1"});
  expect_error([] { (void)eye(-1); }, {"eye", "non-negative"});
}

TEST(Factories, ArangeDtypeFollowsTheBounds) {
  EXPECT_EQ(arange(5).dtype(), kInt64);  // torch.arange(5).dtype == torch.int64
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (L{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(2, 5).to_vector<int64_t>(), (L{2, 3, 4}));
  EXPECT_EQ(arange(0, 10, 4).to_vector<int64_t>(), (L{0, 4, 8}));
  Tensor f = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.to_vector<float>(), (F{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(0.0, 1.0, 0.1).numel(), 10);  // torch.arange(0., 1., 0.1) has 10 values
  EXPECT_EQ(arange(5, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(arange(3, kInt64, Device::cpu()).to_vector<int64_t>(), (L{0, 1, 2}));
  expect_error([] { (void)arange(0, 5, -1); }, {"arange", "never reaches"});
  EXPECT_EQ(arange(1.0, -1.0, -0.5, kBFloat16, Device::cpu()).to(kFloat32).to_vector<float>(),
            (F{1, 0.5f, 0, -0.5f}));
  EXPECT_EQ(arange(3, kInt32, Device::cpu()).to(kInt64).to_vector<int64_t>(), (L{0, 1, 2}));
  expect_error([] { (void)arange(3, kBool, Device::cpu()); }, {"arange", "numeric", "bool"});
}

TEST(Factories, TensorLiterals) {
  Tensor i = tensor({1, 2, 3});
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (L{1, 2, 3}));
  Tensor m = tensor({{1.5, 2.}, {3., 4.}});
  EXPECT_EQ(m.dtype(), kFloat32);  // double literals take the default float dtype
  EXPECT_EQ(m.sizes(), (Shape{2, 2}));
  EXPECT_EQ(m.to_vector<float>(), (F{1.5f, 2, 3, 4}));
  EXPECT_EQ(tensor({true, false}).to_vector<bool>(), (std::vector<bool>{true, false}));
  Tensor d = tensor({0.1, 1.0}, kFloat64);
  EXPECT_EQ(d.to_vector<double>()[0], 0.1);  // exact: not rounded through float32
  EXPECT_EQ(tensor(3.5).dim(), 0);
  EXPECT_EQ(tensor(3).dtype(), kInt64);
  Tensor deep = tensor({{{{1, 2}}, {{3, 4}}}});
  EXPECT_EQ(deep.sizes(), (Shape{1, 2, 1, 2}));
  EXPECT_EQ(tensor({1, 2}, dtype(kFloat32).requires_grad(true)).requires_grad(), true);
  EXPECT_EQ(tensor(std::vector<float>{1, 2, 3}).to_vector<float>(), (F{1, 2, 3}));
  EXPECT_EQ(tensor(std::vector<double>{1, 2}).dtype(), kFloat32);
  EXPECT_EQ(tensor(std::vector<int>{4, 5}).to_vector<int64_t>(), (L{4, 5}));
  EXPECT_EQ(tensor(std::vector<bool>{true}).dtype(), kBool);
  expect_error([] { (void)tensor({{1, 2}, {3}}); }, {"ragged", "element 1", "[1]", "[2]"});
  expect_error([] { (void)tensor({1, 2.5}); }, {"tensor", "element 1", "float32", "int64"});
}

TEST(Factories, RandomDrawsAreSeededAndInRange) {
  manual_seed(7);
  Tensor a = rand({2000});
  manual_seed(7);
  Tensor b = rand(2000);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NEAR(a.mean().item<float>(), 0.5, 0.03);
  EXPECT_GE(std::get<0>(a.min(0)).item<float>(), 0.0f);
  EXPECT_LT(std::get<0>(a.max(0)).item<float>(), 1.0f);

  Tensor n = randn({4000}, kFloat64);
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.06);
  EXPECT_NEAR(n.var(0).item<double>(), 1.0, 0.08);

  Tensor g = normal(2.0, 0.5, {4000});
  EXPECT_NEAR(g.mean().item<float>(), 2.0, 0.03);
  EXPECT_NEAR(g.var(0).item<float>(), 0.25, 0.03);

  Tensor r = randint(10, {3000});
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_GE(std::get<0>(r.min(0)).item<int64_t>(), 0);
  EXPECT_EQ(std::get<0>(r.max(0)).item<int64_t>(), 9);  // 3000 draws reach the top value
  EXPECT_NEAR(r.to(kFloat64).mean().item<double>(), 4.5, 0.25);
  Tensor r2 = randint(-2, 3, {2, 500});
  EXPECT_EQ(r2.sizes(), (Shape{2, 500}));
  EXPECT_EQ(std::get<0>(r2.min(1)).to_vector<int64_t>(), (L{-2, -2}));
  EXPECT_EQ(std::get<0>(r2.max(1)).to_vector<int64_t>(), (L{2, 2}));
  EXPECT_EQ(randint(5, {2}, kFloat32).dtype(), kFloat32);
  expect_error([] { (void)randint(3, 3, {2}); }, {"randint", "low < high"});

  Tensor p = randperm(50);
  EXPECT_EQ(p.dtype(), kInt64);
  std::vector<int64_t> values = p.to_vector<int64_t>();
  std::sort(values.begin(), values.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(values[i], i);
  manual_seed(3);
  Tensor p1 = randperm(20);
  manual_seed(3);
  EXPECT_EQ(p1.to_vector<int64_t>(), randperm(20).to_vector<int64_t>());

  Tensor probs = full({4000}, 0.3);
  Tensor draws = bernoulli(probs);
  EXPECT_EQ(draws.dtype(), kFloat32);
  EXPECT_NEAR(draws.mean().item<float>(), 0.3, 0.04);
  EXPECT_EQ(draws.eq(0).sum().item<int64_t>() + draws.eq(1).sum().item<int64_t>(), 4000);
  Tensor ones_or_zeros = bernoulli(zeros({2, 2}, kFloat64), 1.0);
  EXPECT_EQ(ones_or_zeros.to_vector<double>(), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(bernoulli(zeros({3}), 0.0).to_vector<float>(), (F{0, 0, 0}));
}

TEST(Factories, DeviceTypeAndCuda) {
  EXPECT_EQ(Device(kCUDA, 1).index, 1);
  EXPECT_TRUE(Device(kCUDA).is_cuda());
  EXPECT_EQ(Device(kCUDA).type(), kCUDA);
  EXPECT_EQ(Device("cuda:2"), Device(kCUDA, 2));
  EXPECT_EQ(Device(kCPU).str(), "cpu");
  EXPECT_GE(cuda::device_count(), 0);
  EXPECT_EQ(cuda::is_available(), cuda::device_count() > 0);
}

TEST(Factories, FillScalarsWritesEachItsValue) {
  Tensor a = zeros({}), b = zeros({1}, kFloat64), c = zeros({}, kInt64), big = zeros({3});
  Tensor middle = big.select(0, 1);
  fill_scalars_({&a, &b, &c, &middle}, {0.5, -2.25, 7, 3});
  EXPECT_EQ(a.item<float>(), 0.5f);
  EXPECT_EQ(b.item<double>(), -2.25);
  EXPECT_EQ(c.item<int64_t>(), 7);
  EXPECT_EQ(big.to_vector<float>(), (F{0, 3, 0}));
  const int64_t version = a._version();
  fill_scalars_({&a}, {1});
  EXPECT_GT(a._version(), version);
  expect_error([&] { fill_scalars_({&a, &b}, {1}); }, {"one value per tensor", "1 values for 2 tensors"});
  expect_error([&] { fill_scalars_({&big}, {1}); }, {"one-element tensors", "[3]"});
}

}  // namespace

}  // namespace minidl::factories_test
