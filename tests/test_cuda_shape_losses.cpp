// On CUDA: repeat, flip, roll, tril/triu, one_hot, repeat_interleave, pad (every mode), einsum,
// conv1d, the 1-d pools, adaptive_max_pool2d (its own kernel), and the losses binary_cross_entropy,
// kl_div, smooth_l1_loss, huber_loss and the spatial nll_loss / cross_entropy. CUDA against the CPU
// on the same random inputs (forward and gradients), float64 gradchecks on the GPU, and the device
// errors. GPU tests skip, saying why, where no CUDA device is usable.
#include "nn/nn.h"
#include "ops/adaptive_max_pool2d.h"
#include "ops/conv1d.h"
#include "ops/einsum.h"
#include "ops/pad.h"
#include "ops/rearrange.h"
#include "float64_util.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::cuda_shape_losses_test {

using namespace minidl::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;


Tensor on(const Tensor& t, const Tensor& like) { return t.device() == like.device() ? t : t.to(like.device()); }

}  // namespace

TEST(CudaShapeOps, AgreeWithCpuAndGradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_cuda_agree("repeat", [](auto& in) { return repeat(in[0], {2, 1, 3}); }, {randn({3, 4})});
  expect_cpu_cuda_agree("flip", [](auto& in) { return flip(in[0], {0, 2}); }, {randn({2, 3, 4})});
  expect_cpu_cuda_agree("roll", [](auto& in) { return roll(in[0], {2, -1}, {0, 1}); }, {randn({3, 5})});
  expect_cpu_cuda_agree("roll flat", [](auto& in) { return roll(in[0], {4}); }, {randn({3, 5})});
  expect_cpu_cuda_agree("tril", [](auto& in) { return tril(in[0], 1); }, {randn({2, 4, 3})});
  expect_cpu_cuda_agree("triu", [](auto& in) { return triu(in[0], -1); }, {randn({4, 4})});
  expect_cpu_cuda_agree("repeat_interleave", [](auto& in) { return repeat_interleave(in[0], 3, 1); }, {randn({2, 3})});
  Tensor classes = Tensor::from_vector<int64_t>({3, 0, 1, 3, 2}).to(gpu());
  Tensor h = one_hot(classes);
  EXPECT_EQ(h.device(), gpu());
  EXPECT_EQ(h.to(Device::cpu()).to_vector<int64_t>(), one_hot(classes.to(Device::cpu())).to_vector<int64_t>());
  expect_gradcheck("repeat", [](auto& in) { return repeat(in[0], {2, 2}); }, {leaf({2, 3}, gpu())});
  expect_gradcheck("flip", [](auto& in) { return flip(in[0], {1}); }, {leaf({2, 3}, gpu())});
  expect_gradcheck("roll", [](auto& in) { return roll(in[0], {1}, {1}); }, {leaf({2, 3}, gpu())});
  expect_gradcheck("tril", [](auto& in) { return tril(in[0]); }, {leaf({3, 3}, gpu())});
  expect_gradcheck("triu", [](auto& in) { return triu(in[0], 1); }, {leaf({3, 4}, gpu())});
  expect_gradcheck("repeat_interleave", [](auto& in) { return repeat_interleave(in[0], 2); }, {leaf({2, 2}, gpu())});
}

TEST(CudaPad, EveryModeAgreesWithCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_cuda_agree("constant", [](auto& in) { return pad(in[0], {1, 2, -1, 1}, "constant", 0.5); },
                        {randn({2, 3, 4})});
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    expect_cpu_cuda_agree("1-D", [mode](auto& in) { return pad(in[0], {2, 3}, mode); }, {randn({2, 3, 5})});
    expect_cpu_cuda_agree("2-D", [mode](auto& in) { return pad(in[0], {1, 2, 2, 1}, mode); }, {randn({2, 3, 4, 5})});
    expect_cpu_cuda_agree("3-D", [mode](auto& in) { return pad(in[0], {1, 1, 0, 1, 1, 0}, mode); },
                          {randn({1, 2, 3, 3, 3})});
    expect_gradcheck("2-D", [mode](auto& in) { return pad(in[0], {1, 2, 2, 1}, mode); }, {leaf({1, 2, 3, 4}, gpu())});
  }
  expect_gradcheck("constant", [](auto& in) { return pad(in[0], {1, 1, 2, 0}); }, {leaf({2, 3}, gpu())});
}

TEST(CudaEinsum, AgreesWithCpuAndGradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_cuda_agree("matmul", [](auto& in) { return einsum("ij,jk->ik", {in[0], in[1]}); },
                        {randn({5, 6}), randn({6, 7})});
  expect_cpu_cuda_agree("bilinear", [](auto& in) { return einsum("bn,anm,bm->ba", {in[0], in[1], in[2]}); },
                        {randn({3, 4}), randn({5, 4, 6}), randn({3, 6})});
  expect_cpu_cuda_agree("trace and diagonal", [](auto& in) { return einsum("bii->bi", {in[0]}); }, {randn({2, 4, 4})});
  expect_cpu_cuda_agree("ellipsis", [](auto& in) { return einsum("...ij,...jk->...ik", {in[0], in[1]}); },
                        {randn({2, 1, 3, 4}), randn({5, 4, 2})});
  expect_gradcheck("batched", [](auto& in) { return einsum("bij,bjk->bik", {in[0], in[1]}); },
                   {leaf({2, 3, 4}, gpu()), leaf({2, 4, 2}, gpu())});
  expect_gradcheck("trace", [](auto& in) { return einsum("ii", {in[0]}); }, {leaf({3, 3}, gpu())});
  expect_gradcheck("bilinear", [](auto& in) { return einsum("bn,anm,bm->ba", {in[0], in[1], in[2]}); },
                   {leaf({2, 3}, gpu()), leaf({2, 3, 4}, gpu()), leaf({2, 4}, gpu())});
  expect_error([&] { einsum("ij,jk->ik", {zeros({2, 3}).to(gpu()), zeros({3, 4})}); }, {"einsum", "cpu", "cuda"});
}

TEST(CudaConv1dPools, AgreeWithCpuAndGradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_cuda_agree("conv1d", [](auto& in) { return conv1d(in[0], in[1], in[2], 2, 1, 2); },
                        {randn({2, 3, 11}), randn({4, 3, 3}), randn({4})});
  expect_cpu_cuda_agree("conv1d groups", [](auto& in) { return conv1d(in[0], in[1], in[2], 1, 1, 1, 2); },
                        {randn({2, 4, 9}), randn({6, 2, 3}), randn({6})});
  expect_cpu_cuda_agree("max_pool1d", [](auto& in) { return max_pool1d(in[0], 3, 2, 1); }, {randn({2, 3, 10})});
  expect_cpu_cuda_agree("avg_pool1d", [](auto& in) { return avg_pool1d(in[0], 3, 2, 1, true, false); },
                        {randn({2, 3, 10})});
  for (Shape out : {Shape{1, 1}, Shape{3, 4}, Shape{7, 9}, Shape{12, 5}}) {
    SCOPED_TRACE(shape_str(out));
    Size2 size(out[0], out[1]);
    expect_cpu_cuda_agree("adaptive_max_pool2d", [size](auto& in) { return std::get<0>(adaptive_max_pool2d(in[0], size)); },
                          {randn({2, 3, 9, 10})});
    Tensor x = randn({2, 3, 9, 10});
    EXPECT_TRUE(all_equal(std::get<1>(adaptive_max_pool2d(x.to(gpu()), size)), std::get<1>(adaptive_max_pool2d(x, size))));
  }
  // A NaN wins its window on both devices.
  Tensor nan_in = pad(full({1, 1, 1, 1}, std::nan(""), kFloat32), {1, 2, 1, 2});
  EXPECT_TRUE(all_equal(std::get<0>(adaptive_max_pool2d(nan_in.to(gpu()), 2)), std::get<0>(adaptive_max_pool2d(nan_in, 2))));
  expect_gradcheck("conv1d", [](auto& in) { return conv1d(in[0], in[1], in[2], 1, 1); },
                   {leaf({2, 2, 6}, gpu()), leaf({3, 2, 3}, gpu()), leaf({3}, gpu())});
  expect_gradcheck("max_pool1d", [](auto& in) { return max_pool1d(in[0], 2); }, {leaf({2, 2, 6}, gpu())});
  expect_gradcheck("avg_pool1d", [](auto& in) { return avg_pool1d(in[0], 3, 1, 1); }, {leaf({2, 2, 6}, gpu())});
  expect_gradcheck("adaptive_max_pool2d", [](auto& in) { return std::get<0>(adaptive_max_pool2d(in[0], {3, 4})); },
                   {leaf({2, 2, 5, 7}, gpu())});
}

TEST(CudaLossesMore, AgreeWithCpuAndGradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor p = rand({4, 5}) * 0.8 + 0.1, q = rand({4, 5});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_cpu_cuda_agree("bce", [r](auto& in) { return binary_cross_entropy(in[0], in[1], in[2], r); },
                          {p, q, rand({5})});
    expect_cpu_cuda_agree("smooth_l1", [r](auto& in) { return smooth_l1_loss(in[0], in[1], r, 0.5); },
                          {randn({4, 5}), randn({4, 5})});
    expect_cpu_cuda_agree("huber", [r](auto& in) { return huber_loss(in[0], in[1], r, 0.5); },
                          {randn({4, 5}), randn({4, 5})});
  }
  expect_cpu_cuda_agree("kl_div", [](auto& in) { return kl_div(in[0], in[1], Reduction::BatchMean); },
                        {log_softmax(randn({4, 5}), 1), softmax(randn({4, 5}), 1)});
  Tensor target = Tensor::from_vector<int64_t>({0, 2, 1, 1, 2, 0, 0, 1, 2, 2, 1, 0}, {2, 2, 3});
  Tensor with_ignored = Tensor::from_vector<int64_t>({0, -100, 1, 1, 2, 0, 0, 1, -100, 2, 1, 0}, {2, 2, 3});
  expect_cpu_cuda_agree("cross_entropy spatial", [&](auto& in) { return cross_entropy(in[0], on(target, in[0])); },
                        {randn({2, 3, 2, 3})});
  expect_cpu_cuda_agree("cross_entropy spatial, options",
                        [&](auto& in) {
                          return cross_entropy(in[0], on(with_ignored, in[0]), in[1], Reduction::Mean, -100, 0.1);
                        },
                        {randn({2, 3, 2, 3}), rand({3}) + 0.5});
  expect_cpu_cuda_agree("nll_loss spatial none",
                        [&](auto& in) { return nll_loss(in[0], on(with_ignored, in[0]), {}, Reduction::None); },
                        {randn({2, 3, 2, 3})});
  auto probs = [] { return (rand({3, 4}, kFloat64) * 0.8 + 0.1).to(gpu()).requires_grad_(); };
  expect_gradcheck("bce", [](auto& in) { return binary_cross_entropy(in[0], in[1]); }, {probs(), probs()});
  expect_gradcheck("kl_div", [](auto& in) { return kl_div(in[0], in[1], Reduction::BatchMean); },
                   {leaf({3, 4}, gpu()), probs()});
  expect_gradcheck("smooth_l1", [](auto& in) { return smooth_l1_loss(in[0], in[1], Reduction::Mean, 0.7); },
                   {leaf({3, 4}, gpu()), leaf({3, 4}, gpu())});
  expect_gradcheck("huber", [](auto& in) { return huber_loss(in[0], in[1], Reduction::Sum, 0.7); },
                   {leaf({3, 4}, gpu()), leaf({3, 4}, gpu())});
  Tensor t = target.to(gpu());
  expect_gradcheck("cross_entropy spatial", [&](auto& in) { return cross_entropy(in[0], t); }, {leaf({2, 3, 2, 3}, gpu())});
  expect_gradcheck("nll_loss spatial", [&](auto& in) { return nll_loss(in[0], t, {}, Reduction::Sum); },
                   {leaf({2, 3, 2, 3}, gpu())});
  expect_error([&] { binary_cross_entropy(p.to(gpu()), q); }, {"binary_cross_entropy", "cpu", "cuda"});
  expect_error([&] { cross_entropy(randn({2, 3, 2, 3}).to(gpu()), target); }, {"cross_entropy", "cpu", "cuda"});
}

}  // namespace minidl::cuda_shape_losses_test
