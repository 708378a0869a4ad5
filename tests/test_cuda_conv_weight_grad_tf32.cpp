// conv2d's TF32 weight-gradient kernel (ops/cuda/conv2d_weight_grad_tf32.cu) against the CPU's
// float32 gradient: geometries of every block width it takes, pixel counts that leave a partial
// stage, padding, stride and dilation, each output layout and dtype; and the convolution's backward
// under TF32, whichever weight gradient the autotuner took there.
#include <gtest/gtest.h>

#include <string>

#include "minidl.h"
#include "ops/backend_setting.h"
#include "ops/conv2d_core.h"
#include "test_cuda_util.h"
#include "test_util.h"

#ifdef MINIDL_WITH_CUDA
#include "ops/cuda/cuda_kernels.h"
#endif

namespace minidl::cuda_conv_weight_grad_tf32_test {

using namespace minidl::testing;

namespace {

#ifdef MINIDL_WITH_CUDA
struct Case {
  Shape x, w;
  Size2 stride, padding, dilation;
};

// The filter's columns (taps x channels) 288, 144 and 48: blocks six, three and one warp wide; 2 x 9
// x 11 = 198 and 3 x 5 x 7 = 105 output pixels end in a partial stage of 32.
const Case kCases[] = {{{2, 32, 11, 13}, {64, 32, 3, 3}, 1, 1, 1},
                       {{3, 16, 9, 11}, {128, 16, 3, 3}, 1, {0, 1}, 1},
                       {{3, 8, 10, 15}, {64, 8, 3, 2}, 2, {1, 0}, {2, 1}}};

// dW of conv2d(x, w) against dy, on the CPU in float32.
Tensor cpu_weight_grad(const Tensor& x, const Tensor& w, const Tensor& dy, const Case& c) {
  const Tensor wr = w.detach().requires_grad_();
  (conv2d(x, wr, Tensor(), c.stride, c.padding, c.dilation) * dy).sum().backward();
  return wr.grad();
}

// Small whole numbers are exact in TF32 and every sum of their products is exact in float32: the
// kernel must give the float32 gradient bit for bit, in each layout and in float32 and bfloat16.
TEST(CudaConvWeightGradTf32, WholeNumbersExactlyInEveryLayout) {
  MINIDL_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    SCOPED_TRACE("weight " + shape_str(c.w));
    manual_seed(71);
    const Tensor x = randint(-3, 4, c.x).to(kFloat32), w = randint(-3, 4, c.w).to(kFloat32);
    const ConvGeometry g = conv2d_check("conv2d", x, w, Tensor(), c.stride, c.padding, c.dilation);
    const Tensor dy = randint(-3, 4, {c.x[0], c.w[0], g.out_h, g.out_w}).to(kFloat32);
    const Tensor want = cpu_weight_grad(x, w, dy, c);
    ASSERT_TRUE(CudaKernels::conv2d_weight_grad_tf32_applies(kFloat32, c.x[0], c.w[0], g));
    CudaKernels kernels(0);
    const Tensor xd = x.to(gpu()).contiguous(MemoryFormat::ChannelsLast);
    const Tensor dyd = dy.to(gpu()).contiguous(MemoryFormat::ChannelsLast);
    const Tensor workspace = Tensor::empty(
        {static_cast<int64_t>(kernels.conv2d_weight_grad_tf32_workspace(c.x[0], c.w[0], g))}, kByte, gpu());
    for (const MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
      Tensor dw = Tensor::empty(c.w, kFloat32, gpu(), format);
      kernels.conv2d_weight_grad_tf32(xd, dyd, g, dw, workspace.raw_data());
      EXPECT_TRUE(equal(dw.to(Device::cpu()).contiguous(), want)) << "float32, channels-last " << (format != MemoryFormat::Contiguous);
    }
    // Beside another kernel: half the slices, each over twice the patches, in its own workspace size.
    const Tensor half_workspace = Tensor::empty(
        {static_cast<int64_t>(kernels.conv2d_weight_grad_tf32_workspace(c.x[0], c.w[0], g, true))}, kByte, gpu());
    Tensor beside = Tensor::empty(c.w, kFloat32, gpu());
    kernels.conv2d_weight_grad_tf32(xd, dyd, g, beside, half_workspace.raw_data(), true);
    EXPECT_TRUE(equal(beside.to(Device::cpu()), want)) << "beside another kernel";
    Tensor narrow = Tensor::empty(c.w, kBFloat16, gpu());
    kernels.conv2d_weight_grad_tf32(xd, dyd, g, narrow, workspace.raw_data());
    EXPECT_TRUE(equal(narrow.to(Device::cpu()), want.to(kBFloat16))) << "bfloat16: the float32 sum rounded once";
  }
}

// At the MNIST CNN's second convolution, batch 64, the kernel run beside another (half a wave of
// blocks) takes no more slices, so no larger a workspace (on an H100 or H200, 66 against 128), and
// still gives the float32 gradient bit for bit on whole numbers (every partial sum below 2^24).
TEST(CudaConvWeightGradTf32, BesideAnotherKernelOnHalfAWave) {
  MINIDL_REQUIRE_CUDA();
  const Case c{{64, 32, 26, 26}, {64, 32, 3, 3}, 1, 0, 1};
  manual_seed(73);
  const Tensor x = randint(-3, 4, c.x).to(kFloat32), w = randint(-3, 4, c.w).to(kFloat32);
  const ConvGeometry g = conv2d_check("conv2d", x, w, Tensor(), c.stride, c.padding, c.dilation);
  const Tensor dy = randint(-3, 4, {c.x[0], c.w[0], g.out_h, g.out_w}).to(kFloat32);
  const Tensor want = cpu_weight_grad(x, w, dy, c);
  CudaKernels kernels(0);
  const size_t alone = kernels.conv2d_weight_grad_tf32_workspace(c.x[0], c.w[0], g),
               beside = kernels.conv2d_weight_grad_tf32_workspace(c.x[0], c.w[0], g, true);
  EXPECT_LE(beside, alone);
  const Tensor xd = x.to(gpu()).contiguous(MemoryFormat::ChannelsLast);
  const Tensor dyd = dy.to(gpu()).contiguous(MemoryFormat::ChannelsLast);
  for (const bool half : {false, true}) {
    const Tensor workspace = Tensor::empty({static_cast<int64_t>(half ? beside : alone)}, kByte, gpu());
    Tensor dw = Tensor::empty(c.w, kFloat32, gpu());
    kernels.conv2d_weight_grad_tf32(xd, dyd, g, dw, workspace.raw_data(), half);
    EXPECT_TRUE(equal(dw.to(Device::cpu()), want)) << (half ? "beside" : "alone");
  }
}

// Random normal data: within TF32's rounding of the float64 gradient, measured against the sum of
// the terms' magnitudes, and not strict float32's accuracy (the products did run in TF32).
TEST(CudaConvWeightGradTf32, RandomDataWithinTf32Rounding) {
  MINIDL_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    SCOPED_TRACE("weight " + shape_str(c.w));
    manual_seed(72);
    const Tensor x = randn(c.x), w = randn(c.w);
    const ConvGeometry g = conv2d_check("conv2d", x, w, Tensor(), c.stride, c.padding, c.dilation);
    const Tensor dy = randn({c.x[0], c.w[0], g.out_h, g.out_w});
    const Tensor want = cpu_weight_grad(x.to(kFloat64), w.to(kFloat64), dy.to(kFloat64), c);
    const Tensor magnitude = cpu_weight_grad(x.abs().to(kFloat64), w.to(kFloat64), dy.abs().to(kFloat64), c);
    CudaKernels kernels(0);
    const Tensor workspace = Tensor::empty(
        {static_cast<int64_t>(kernels.conv2d_weight_grad_tf32_workspace(c.x[0], c.w[0], g))}, kByte, gpu());
    Tensor dw = Tensor::empty(c.w, kFloat32, gpu());
    kernels.conv2d_weight_grad_tf32(x.to(gpu()).contiguous(MemoryFormat::ChannelsLast),
                                    dy.to(gpu()).contiguous(MemoryFormat::ChannelsLast), g, dw, workspace.raw_data());
    const Tensor error = (dw.to(Device::cpu()).to(kFloat64) - want).abs();
    // Each input rounded to TF32 moves a product by at most 2 * 2^-11 of its size.
    EXPECT_TRUE(error.le(magnitude * (2.0 / 2048)).all().item<bool>()) << "largest error " << error.max().item<double>();
    EXPECT_GT((error / magnitude).max().item<double>(), 1e-6) << "strict float32's accuracy: did it run in TF32?";
  }
}

TEST(CudaConvWeightGradTf32, TakesOnlyWhatItCan) {
  const ConvGeometry g{32, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 12, 12};
  EXPECT_TRUE(CudaKernels::conv2d_weight_grad_tf32_applies(kFloat32, 4, 64, g));
  EXPECT_FALSE(CudaKernels::conv2d_weight_grad_tf32_applies(kBFloat16, 4, 64, g)) << "float32 only";
  EXPECT_FALSE(CudaKernels::conv2d_weight_grad_tf32_applies(kFloat32, 4, 48, g)) << "64 output channels a block";
  ConvGeometry odd = g;
  odd.channels = 6;  // 54 columns, and a run of four channels would straddle two taps
  EXPECT_FALSE(CudaKernels::conv2d_weight_grad_tf32_applies(kFloat32, 4, 64, odd));
}

// The MNIST CNN's second convolution under TF32 at batch 64: the weight's gradient, by whichever path
// the autotuner took (this kernel where it timed fastest), is within TF32's rounding of float64's,
// measured against the sum of the terms' magnitudes, and in the float32 weight's own layout.
TEST(CudaConvWeightGradTf32, ConvolutionBackwardUnderTf32) {
  MINIDL_REQUIRE_CUDNN();
  const bool before = allow_tf32_cudnn();
  set_allow_tf32_cudnn(true);
  manual_seed(73);
  const Tensor x = randn({64, 32, 26, 26}), w = mul(randn({64, 32, 3, 3}), 0.1), b = mul(randn({64}), 0.1);
  const Tensor up = randn({64, 64, 24, 24});
  const Tensor wg = w.to(gpu()).requires_grad_(), bg = b.to(gpu()).requires_grad_();
  (conv2d(x.to(gpu()), wg, bg) * up.to(gpu())).sum().backward();
  set_allow_tf32_cudnn(before);
  EXPECT_TRUE(wg.grad().is_contiguous());
  const Case c{x.shape(), w.shape(), 1, 0, 1};
  const Tensor want = cpu_weight_grad(x.to(kFloat64), w.to(kFloat64), up.to(kFloat64), c);
  const Tensor magnitude = cpu_weight_grad(x.abs().to(kFloat64), w.to(kFloat64), up.abs().to(kFloat64), c);
  const Tensor error = (wg.grad().to(Device::cpu()).to(kFloat64) - want).abs();
  // TF32's rounding of both inputs, 2^-10 of each product at most, and float32's sums.
  EXPECT_TRUE(error.le(magnitude * (1.0 / 512)).all().item<bool>()) << "largest error " << error.max().item<double>();
}
#endif

}  // namespace

}  // namespace minidl::cuda_conv_weight_grad_tf32_test
