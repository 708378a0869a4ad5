// The margin, embedding and likelihood losses and the layers of nn/layers_more.h, nn/padding.h,
// nn/normalization_more.h and nn/parameter_containers.h on CUDA: values and gradients against the
// CPU's on the same inputs (they are compositions of ops, so this checks that every op they use
// runs there), through the public API only.
#include <gtest/gtest.h>

#include "minidl.h"
#include "nn/functional_more.h"
#include "nn/layers_more.h"
#include "nn/loss_more.h"
#include "nn/normalization_more.h"
#include "nn/padding.h"
#include "nn/parameter_containers.h"
#include "test_cuda_util.h"

namespace minidl::cuda_losses_layers_more_test {

using minidl::testing::all_close;
using minidl::testing::expect_cpu_cuda_agree;
using minidl::testing::gpu;

namespace {

Tensor signs(Shape shape) { return where(gt(rand(shape), Scalar(0.5)), ones(shape), Scalar(-1.0)); }

}  // namespace

TEST(CudaMarginLosses, MarginAndEmbeddingLossesMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Reduction reductions[] = {Reduction::Mean, Reduction::Sum, Reduction::None};
  for (Reduction r : reductions) {
    expect_cpu_cuda_agree("margin_ranking_loss", [r](auto& in) { return margin_ranking_loss(in[0], in[1], in[2], 0.3, r); },
                          {randn({6}), randn({6}), signs({6})});
    expect_cpu_cuda_agree("hinge_embedding_loss", [r](auto& in) { return hinge_embedding_loss(in[0], in[1], 0.5, r); },
                          {randn({4, 3}), signs({4, 3})});
    expect_cpu_cuda_agree("soft_margin_loss", [r](auto& in) { return soft_margin_loss(in[0], in[1], r); },
                          {randn({4, 3}), signs({4, 3})});
    expect_cpu_cuda_agree("cosine_embedding_loss",
                          [r](auto& in) { return cosine_embedding_loss(in[0], in[1], in[2], 0.1, r); },
                          {randn({5, 4}), randn({5, 4}), signs({5})});
    expect_cpu_cuda_agree("triplet_margin_loss",
                          [r](auto& in) { return triplet_margin_loss(in[0], in[1], in[2], 1.0, 2.0, 1e-6, true, r); },
                          {randn({5, 4}), randn({5, 4}), randn({5, 4})});
    expect_cpu_cuda_agree("multilabel_soft_margin_loss",
                          [r](auto& in) { return multilabel_soft_margin_loss(in[0], in[1], in[2], r); },
                          {randn({4, 3}), rand({4, 3}), rand({3})});
    expect_cpu_cuda_agree("multi_margin_loss", [r](auto& in) { return multi_margin_loss(in[0], in[1], 2, 0.7, in[2], r); },
                          {randn({5, 4}), Tensor::from_vector<int64_t>({0, 3, 1, 1, 2}), rand({4})});
    expect_cpu_cuda_agree("multilabel_margin_loss", [r](auto& in) { return multilabel_margin_loss(in[0], in[1], r); },
                          {randn({3, 4}), Tensor::from_vector<int64_t>({3, 0, -1, 1, 2, 2, 1, -1, -1, 0, 0, 0}, {3, 4})});
  }
  // The range check reads the target on the host: an error there too.
  EXPECT_THROW(multi_margin_loss(randn({2, 3}, gpu()), Tensor::from_vector<int64_t>({0, 3}).to(gpu())), Error);
}

TEST(CudaMarginLosses, LikelihoodLossesMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_cpu_cuda_agree("poisson_nll_loss", [r](auto& in) { return poisson_nll_loss(in[0], in[1], true, true, 1e-8, r); },
                          {randn({4, 3}), rand({4, 3}) * 4.0});
    expect_cpu_cuda_agree("poisson_nll_loss rate",
                          [r](auto& in) { return poisson_nll_loss(in[0], in[1], false, false, 1e-8, r); },
                          {rand({4, 3}) + 0.1, rand({4, 3}) * 4.0});
    expect_cpu_cuda_agree("gaussian_nll_loss", [r](auto& in) { return gaussian_nll_loss(in[0], in[1], in[2], true, 1e-6, r); },
                          {randn({4, 3}), randn({4, 3}), rand({4}) + 0.1});
  }
  EXPECT_THROW(gaussian_nll_loss(randn({2}, gpu()), randn({2}, gpu()), full({2}, -1.0, kFloat32, gpu())), Error);
}

TEST(CudaLayersMore, ShapeLayersMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_cuda_agree("pixel_shuffle", [](auto& in) { return pixel_shuffle(in[0], 2); }, {randn({2, 8, 3, 4})});
  expect_cpu_cuda_agree("pixel_unshuffle", [](auto& in) { return pixel_unshuffle(in[0], 2); }, {randn({2, 3, 4, 6})});
  expect_cpu_cuda_agree("Unflatten", [](auto& in) { return nn::Unflatten(1, std::vector<int64_t>{2, 3})(in[0]); },
                        {randn({4, 6})});
  expect_cpu_cuda_agree("threshold", [](auto& in) { return threshold(in[0], 0.1, -3.0); }, {randn({5, 7})});
  expect_cpu_cuda_agree("Softmax2d", [](auto& in) { return nn::Softmax2d()(in[0]); }, {randn({2, 3, 4, 5})});
  expect_cpu_cuda_agree("ZeroPad2d", [](auto& in) { return nn::ZeroPad2d(nn::ZeroPad2dOptions({1, 2, 0, 3}))(in[0]); },
                        {randn({2, 3, 4, 5})});
  expect_cpu_cuda_agree("ConstantPad1d",
                        [](auto& in) { return nn::ConstantPad1d(nn::ConstantPad1dOptions({3, 1}, 2.5))(in[0]); },
                        {randn({2, 3, 5})});
  expect_cpu_cuda_agree("ReflectionPad2d",
                        [](auto& in) { return nn::ReflectionPad2d(nn::ReflectionPad2dOptions({2, 1, 3, 0}))(in[0]); },
                        {randn({2, 3, 4, 5})});
  expect_cpu_cuda_agree("ReflectionPad1d", [](auto& in) { return nn::ReflectionPad1d(2)(in[0]); }, {randn({3, 5})});
  expect_cpu_cuda_agree("ReplicationPad2d", [](auto& in) { return nn::ReplicationPad2d(2)(in[0]); }, {randn({2, 3, 4, 5})});
  expect_cpu_cuda_agree("ReplicationPad1d",
                        [](auto& in) { return nn::ReplicationPad1d(nn::ReplicationPad1dOptions({4, 1}))(in[0]); },
                        {randn({2, 3, 5})});
}

TEST(CudaLayersMore, NormalizationAndBilinearMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_cuda_agree("instance_norm", [](auto& in) { return instance_norm(in[0], {}, {}, in[1], in[2]); },
                        {randn({2, 3, 4, 5}), randn({3}), randn({3})});
  expect_cpu_cuda_agree("instance_norm eval",
                        [](auto& in) { return instance_norm(in[0], in[1].detach(), in[2].detach(), {}, {}, false); },
                        {randn({2, 3, 6}), randn({3}), rand({3}) + 0.5});
  expect_cpu_cuda_agree("local_response_norm", [](auto& in) { return local_response_norm(in[0], 3, 0.2, 0.75, 2.0); },
                        {randn({2, 5, 3, 4})});
  expect_cpu_cuda_agree("bilinear", [](auto& in) { return bilinear(in[0], in[1], in[2], in[3]); },
                        {randn({4, 5}), randn({4, 3}), randn({2, 5, 3}), randn({2})});
  // Running statistics on the device, as on the CPU.
  nn::InstanceNorm1d cpu(nn::InstanceNorm1dOptions(3).track_running_stats(true).affine(true));
  auto cuda = std::dynamic_pointer_cast<nn::InstanceNorm1dImpl>(cpu->clone(gpu()));
  ASSERT_TRUE(cuda);
  Tensor x = randn({4, 3, 7});
  cpu(x);
  cuda->forward(x.to(gpu()));
  EXPECT_TRUE(all_close(cuda->running_mean, cpu->running_mean, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(cuda->running_var, cpu->running_var, 1e-5, 1e-5));
  cpu->eval();
  cuda->eval();
  EXPECT_TRUE(all_close(cuda->forward(x.to(gpu())), cpu(x), 1e-4, 1e-4));
  // A module's parameters move with it.
  nn::Bilinear bl(5, 3, 2);
  Tensor a = randn({4, 5}), b = randn({4, 3});
  Tensor on_cpu = bl(a, b);
  bl->to(gpu());
  EXPECT_TRUE(all_close(bl(a.to(gpu()), b.to(gpu())), on_cpu, 1e-4, 1e-4));
}

TEST(CudaLayersMore, ParameterContainersMove) {
  MINIDL_REQUIRE_CUDA();
  nn::ParameterList list(randn({3}), randn({2, 2}));
  nn::ParameterDict dict;
  dict->insert("scale", ones({4}));
  list->to(gpu());
  dict->to(gpu());
  EXPECT_EQ(list[1].device(), gpu());
  EXPECT_EQ(dict["scale"].device(), gpu());
  auto back = std::dynamic_pointer_cast<nn::ParameterListImpl>(list->clone(Device::cpu()));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->at(0).device().is_cpu());
  EXPECT_TRUE(all_close(list[0], back->at(0).to(gpu()), 0, 0));
}

}  // namespace minidl::cuda_losses_layers_more_test
