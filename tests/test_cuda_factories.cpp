// Factories and in-place view writes on CUDA: devices, dtypes, seeded draws and statistics, and
// the same results as on the CPU where the op is deterministic.
#include <gtest/gtest.h>

#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::cuda_factories_test {

namespace {

using F = std::vector<float>;
using L = std::vector<int64_t>;

TEST(CudaFactories, OptionsPlaceTensorsOnTheGpu) {
  MINIDL_REQUIRE_CUDA();
  EXPECT_TRUE(zeros({2, 3}, kCUDA).is_cuda());
  EXPECT_EQ(ones(3, TensorOptions().dtype(kFloat64).device(kCUDA)).to_vector<double>(),
            (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(full({2}, 7, kCUDA).dtype(), kInt64);
  EXPECT_EQ(eye(2, 3, kCUDA).cpu().to_vector<float>(), eye(2, 3).to_vector<float>());
  EXPECT_EQ(arange(5, Device::cuda()).cpu().to_vector<int64_t>(), (L{0, 1, 2, 3, 4}));
  EXPECT_EQ(linspace(0, 1, 5, kCUDA).cpu().to_vector<float>(), linspace(0, 1, 5).to_vector<float>());
  Tensor t = tensor({{1.5, 2.}, {3., 4.}}, device(kCUDA));
  EXPECT_TRUE(t.is_cuda());
  EXPECT_EQ(t.cpu().to_vector<float>(), (F{1.5f, 2, 3, 4}));
  Tensor x = randn({4});
  EXPECT_TRUE(x.cuda().is_cuda());
  EXPECT_TRUE(x.to(kCUDA).is_cuda());
  EXPECT_EQ(x.cuda().cpu().to_vector<float>(), x.to_vector<float>());
  EXPECT_TRUE(zeros_like(x, kCUDA).is_cuda());
  EXPECT_TRUE(x.to(x.cuda()).is_cuda());
}

TEST(CudaFactories, SeededDrawsRepeatAndHaveTheirStatistics) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(11);
  Tensor a = rand({4000}, kCUDA);
  manual_seed(11);
  Tensor b = rand({4000}, kCUDA);
  EXPECT_EQ(a.cpu().to_vector<float>(), b.cpu().to_vector<float>());
  EXPECT_NEAR(a.mean().item<float>(), 0.5, 0.03);
  Tensor n = normal(1.0, 2.0, {8000}, TensorOptions().dtype(kFloat64).device(kCUDA));
  EXPECT_NEAR(n.mean().item<double>(), 1.0, 0.1);
  EXPECT_NEAR(n.var(0).item<double>(), 4.0, 0.3);
  Tensor r = randint(-3, 4, {3000}, kCUDA);
  EXPECT_TRUE(r.is_cuda());
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(std::get<0>(r.min(0)).item<int64_t>(), -3);
  EXPECT_EQ(std::get<0>(r.max(0)).item<int64_t>(), 3);
  Tensor p = randperm(30, kCUDA);
  EXPECT_TRUE(p.is_cuda());
  EXPECT_EQ(p.sum().item<int64_t>(), 29 * 30 / 2);
  Tensor d = bernoulli(full({4000}, 0.75, kCUDA));
  EXPECT_NEAR(d.mean().item<float>(), 0.75, 0.04);
}

// More tensors than one launch takes, of several dtypes, a view among them: each gets its value.
TEST(CudaFactories, FillScalarsWritesEachItsValue) {
  MINIDL_REQUIRE_CUDA();
  const DType dtypes[] = {kFloat32, kFloat64, kBFloat16, kInt64, kFloat32};
  std::vector<Tensor> tensors;
  std::vector<double> values;
  for (int i = 0; i < 11; ++i) {
    tensors.push_back(zeros({}, dtypes[i % 5], kCUDA));
    values.push_back(1.5 * i - 4);  // exact in every dtype above
  }
  Tensor big = zeros({4}, kCUDA);
  tensors.push_back(big.select(0, 2));
  values.push_back(9);
  std::vector<Tensor*> scalars;
  for (Tensor& t : tensors) scalars.push_back(&t);
  fill_scalars_(scalars, values);
  for (size_t i = 0; i + 1 < tensors.size(); ++i) {
    const double expected = tensors[i].dtype() == kInt64 ? std::trunc(values[i]) : values[i];
    EXPECT_EQ(tensors[i].to(kFloat64).item<double>(), expected) << "tensor " << i << " " << tensors[i].dtype();
  }
  EXPECT_EQ(big.cpu().to_vector<float>(), (F{0, 0, 9, 0}));
  Tensor on_cpu = zeros({});
  testing::expect_error([&] { fill_scalars_({&tensors[0], &on_cpu}, {1, 2}); }, {"one-element tensors on", "cpu"});
}

TEST(CudaFactories, InplaceWritesThroughViewsMatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  Tensor cpu = arange(12.0).view({3, 4});
  Tensor gpu = cpu.cuda();
  for (Tensor* x : {&cpu, &gpu}) {
    x->t().add_(1);
    x->select(1, 2).mul_(tensor({2., 3., 4.}).to(x->device()));
    x->slice(0, 0, 3, 2).fill_(-1);
    x->narrow(1, 0, 2).sub_(0.5);
    x->select(0, 1).div_(2);
    x->slice(1, 3).zero_();
    x->select(1, 1).copy_(tensor({9, 8, 7}));
  }
  EXPECT_EQ(gpu.cpu().to_vector<float>(), cpu.to_vector<float>());
  Tensor g = zeros({50, 2}, kCUDA);
  g.select(1, 1).uniform_(2, 3);
  EXPECT_EQ(g.select(1, 0).abs().sum().item<float>(), 0.0f);
  EXPECT_GE(std::get<0>(g.select(1, 1).min(0)).item<float>(), 2.0f);
}

}  // namespace

}  // namespace minidl::cuda_factories_test
