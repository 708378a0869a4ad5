// CudaKernels::conv2d_winograd (ops/cuda/conv2d_winograd.cu) called directly, whatever the
// autotuner would pick, and conv2d_winograd_weight_grad: the forward with and without a bias, the
// input gradient through the flipped filter and the weight gradient (its slices over a whole wave
// of blocks and over the shares it takes beside the input gradient), against conv2d and its
// gradient in float64 on the CPU, within 1e-5 of the terms' magnitudes, at the MNIST CNN's second
// convolution and at sizes that leave partial tiles, partial channel chunks and partial blocks of
// output channels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

#ifdef MINIDL_WITH_CUDA
#include "ops/cuda/cuda_kernels.h"
#endif

namespace minidl::cuda_conv2d_winograd_test {

using namespace minidl::testing;

namespace {

#ifdef MINIDL_WITH_CUDA
struct Case {
  Shape x;  // [N, C, H, W]
  int64_t outs, pad;
};

// Even widths and padding take the kernels' 8-byte loads (the first and last), the others single floats.
const Case kCases[] = {{{3, 32, 26, 26}, 64, 0}, {{2, 5, 9, 7}, 7, 1},   {{1, 12, 6, 5}, 40, 2},
                       {{2, 16, 3, 3}, 33, 0},   {{4, 9, 11, 10}, 32, 1}, {{2, 12, 8, 10}, 20, 2}};

// The case's convolution: 3 x 3 at stride 1, padded by c.pad.
ConvGeometry geometry(const Case& c) {
  return {c.x[1], c.x[2], c.x[3], 3, 3, 1, 1, c.pad, c.pad, 1, 1, c.x[2] + 2 * c.pad - 2, c.x[3] + 2 * c.pad - 2};
}

std::string name(const Case& c) {
  return shape_str(c.x) + " -> " + std::to_string(c.outs) + " pad " + std::to_string(c.pad);
}

bool within(const Tensor& got, const Tensor& want, const Tensor& magnitude, double tolerance) {
  const Tensor error = (got.to(Device::cpu()).to(kFloat64) - want).abs();
  const bool ok = error.le(magnitude * tolerance + 1e-30).all().item<bool>();
  if (!ok) ADD_FAILURE() << "largest error " << error.max().item<double>();
  return ok;
}

TEST(CudaConv2dWinograd, ForwardMatchesFloat64) {
  MINIDL_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    for (const bool with_bias : {false, true}) {
      SCOPED_TRACE(name(c) + (with_bias ? " with bias" : ""));
      manual_seed(41);
      const Tensor x = randn(c.x), w = mul(randn({c.outs, c.x[1], 3, 3}), 0.2), b = randn({c.outs});
      const ConvGeometry g = geometry(c);
      ASSERT_TRUE(CudaKernels::conv2d_winograd_applies(kFloat32, c.x[0], c.outs, g));
      Tensor y = Tensor::empty({c.x[0], c.outs, g.out_h, g.out_w}, kFloat32, gpu());
      y.fill_(std::nan(""));
      const Tensor bg = b.to(gpu());
      CudaKernels(gpu().index).conv2d_winograd(x.to(gpu()), w.to(gpu()), with_bias ? &bg : nullptr, c.pad, c.pad,
                                               false, y);
      const Tensor none;
      const Tensor want = conv2d(x.to(kFloat64), w.to(kFloat64), with_bias ? b.to(kFloat64) : none, 1, c.pad);
      const Tensor magnitude = conv2d(x.abs().to(kFloat64), w.abs().to(kFloat64),
                                      with_bias ? b.abs().to(kFloat64) : none, 1, c.pad);
      within(y, want, magnitude, 1e-5);
    }
  }
}

TEST(CudaConv2dWinograd, InputGradientMatchesFloat64) {
  MINIDL_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    manual_seed(43);
    const Tensor x = randn(c.x), w = mul(randn({c.outs, c.x[1], 3, 3}), 0.2);
    const ConvGeometry g = geometry(c);
    const Tensor dy = randn({c.x[0], c.outs, g.out_h, g.out_w});
    Tensor dx = Tensor::empty(c.x, kFloat32, gpu());
    dx.fill_(std::nan(""));
    CudaKernels(gpu().index).conv2d_winograd(dy.to(gpu()), w.to(gpu()), nullptr, 2 - c.pad, 2 - c.pad, true, dx);
    const auto input_grad = [&](const Tensor& ws, const Tensor& dys) {
      const Tensor xr = x.to(kFloat64).requires_grad_();
      (conv2d(xr, ws.to(kFloat64), Tensor(), 1, c.pad) * dys.to(kFloat64)).sum().backward();
      return xr.grad();
    };
    within(dx, input_grad(w, dy), input_grad(w.abs(), dy.abs()), 1e-5);
  }
}

TEST(CudaConv2dWinograd, WeightGradientMatchesFloat64) {
  MINIDL_REQUIRE_CUDA();
  for (const Case& c : kCases) {
    for (const double share : {1.0, CudaKernels::kWinogradWeightGradBesideCudnn,
                               CudaKernels::kWinogradWeightGradBesideWinograd}) {
      SCOPED_TRACE(name(c) + " on " + std::to_string(share) + " of a wave");
      manual_seed(47);
      const Tensor x = randn(c.x), w = randn({c.outs, c.x[1], 3, 3});
      const ConvGeometry g = geometry(c);
      const Tensor dy = randn({c.x[0], c.outs, g.out_h, g.out_w});
      CudaKernels kernels(gpu().index);
      const Tensor space = Tensor::empty(
          {static_cast<int64_t>(kernels.conv2d_winograd_weight_grad_workspace(c.x[0], c.outs, g, share))}, kByte,
          gpu());
      Tensor dw = Tensor::empty(w.shape(), kFloat32, gpu());
      dw.fill_(std::nan(""));
      kernels.conv2d_winograd_weight_grad(x.to(gpu()), dy.to(gpu()), g, dw, space.raw_data(), share);
      const auto weight_grad = [&](const Tensor& xs, const Tensor& dys) {
        const Tensor wr = w.to(kFloat64).requires_grad_();
        (conv2d(xs.to(kFloat64), wr, Tensor(), 1, c.pad) * dys.to(kFloat64)).sum().backward();
        return wr.grad();
      };
      within(dw, weight_grad(x, dy), weight_grad(x.abs(), dy.abs()), 1e-5);
    }
  }
}

TEST(CudaConv2dWinograd, RejectsWhatItCannotTake) {
  MINIDL_REQUIRE_CUDA();
  const ConvGeometry strided{4, 8, 8, 3, 3, 2, 2, 0, 0, 1, 1, 3, 3};
  const ConvGeometry five{4, 8, 8, 5, 5, 1, 1, 0, 0, 1, 1, 4, 4};
  const ConvGeometry plain{4, 8, 8, 3, 3, 1, 1, 0, 0, 1, 1, 6, 6};
  EXPECT_FALSE(CudaKernels::conv2d_winograd_applies(kFloat32, 2, 8, strided));
  EXPECT_FALSE(CudaKernels::conv2d_winograd_applies(kFloat32, 2, 8, five));
  EXPECT_FALSE(CudaKernels::conv2d_winograd_applies(kFloat64, 2, 8, plain));
  EXPECT_TRUE(CudaKernels::conv2d_winograd_applies(kFloat32, 2, 8, plain));
  const Tensor x = randn({2, 4, 8, 8}).to(gpu()), w = randn({8, 4, 3, 3}).to(gpu());
  Tensor wrong = Tensor::empty({2, 8, 5, 5}, kFloat32, gpu());
  EXPECT_THROW(CudaKernels(gpu().index).conv2d_winograd(x, w, nullptr, 0, 0, false, wrong), Error);
  Tensor y = Tensor::empty({2, 8, 6, 6}, kFloat32, gpu());
  EXPECT_THROW(CudaKernels(gpu().index).conv2d_winograd(x.to(kFloat64), w, nullptr, 0, 0, false, y), Error);
}
#endif

}  // namespace

}  // namespace minidl::cuda_conv2d_winograd_test
