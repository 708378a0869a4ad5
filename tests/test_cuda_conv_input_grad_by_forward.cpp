// conv2d's input gradient as the forward convolution of the output gradient with the flipped filter
// (ops/cuda/conv2d_flip_filter.cu, ConvAlgorithms::bwd_data_by_forward): the flip against the CPU's
// flip and transpose, in each layout and dtype; the identity it rests on, through conv2d's own
// forward; and the input gradient in strict float32 and under TF32, by whichever path the autotuner
// took, against float64.
#include <gtest/gtest.h>

#include <string>

#include "minidl.h"
#include "ops/backend_setting.h"
#include "test_cuda_util.h"
#include "test_util.h"

#ifdef MINIDL_WITH_CUDA
#include "ops/cuda/cuda_kernels.h"
#endif

namespace minidl::cuda_conv_input_grad_by_forward_test {

using namespace minidl::testing;

namespace {

#ifdef MINIDL_WITH_CUDA
// flipped[c][k][r][s] = w[k][c][R-1-r][S-1-s], on the CPU.
Tensor cpu_flipped(const Tensor& w) { return w.flip({2, 3}).transpose(0, 1).contiguous(); }

TEST(CudaConvFlipFilter, MatchesFlipAndTransposeInEveryLayout) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(5);
  for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
    for (const Shape& shape : {Shape{64, 32, 3, 3}, Shape{8, 5, 2, 3}, Shape{3, 16, 1, 1}}) {
      const Tensor w = randn(shape).to(dt);
      const Tensor want = cpu_flipped(w);
      for (MemoryFormat in : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
        for (MemoryFormat out : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape) + (in == out ? " same" : " other") +
                       " layout");
          const Tensor wg = w.to(gpu()).contiguous(in);
          Tensor flipped = Tensor::empty({shape[1], shape[0], shape[2], shape[3]}, dt, gpu(), out);
          flipped.fill_(7.0);
          CudaKernels(gpu().index).conv2d_flip_filter(wg, flipped);
          EXPECT_TRUE(all_equal(flipped.contiguous().to(Device::cpu()), want));
        }
    }
  }
}

// What the path computes, by conv2d's own forward in float64 on the GPU: the input gradient of a
// stride-1 convolution is the output gradient convolved with the flipped filter, padded by
// dilation * (kernel - 1) - pad.
TEST(CudaConvFlipFilter, ForwardOfFlippedFilterIsTheInputGradient) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(9);
  struct Geometry {
    Shape x, w;
    int64_t pad, dilation;
  };
  for (const Geometry& c : {Geometry{{2, 6, 9, 8}, {5, 6, 3, 3}, 0, 1}, Geometry{{2, 6, 9, 8}, {5, 6, 3, 3}, 1, 1},
                            Geometry{{1, 4, 11, 10}, {3, 4, 3, 2}, 1, 2}}) {
    const Tensor x = randn(c.x).to(kFloat64).to(gpu()).requires_grad_(), w = randn(c.w).to(kFloat64).to(gpu());
    const Tensor y = conv2d(x, w, Tensor(), 1, c.pad, c.dilation);
    const Tensor dy = randn(y.shape()).to(kFloat64).to(gpu());
    (y * dy).sum().backward();
    Tensor flipped = Tensor::empty({c.w[1], c.w[0], c.w[2], c.w[3]}, kFloat64, gpu());
    CudaKernels(gpu().index).conv2d_flip_filter(w, flipped);
    const Size2 pad{c.dilation * (c.w[2] - 1) - c.pad, c.dilation * (c.w[3] - 1) - c.pad};
    const Tensor dx = conv2d(dy, flipped, Tensor(), 1, pad, c.dilation);
    EXPECT_TRUE(all_close(dx.to(Device::cpu()), x.grad().to(Device::cpu()), 1e-12, 1e-12));
  }
}

// The autotuner times cuDNN's input-gradient algorithms against the flipped filter's forward and
// takes the faster, in strict float32 and under TF32: at the MNIST CNN's second convolution, padded,
// and dilated, the input's gradient is within the mode's rounding of float64's, measured against the
// terms' magnitudes (cuDNN's FFT and Winograd round in strict float32 far below TF32's 2^-11).
TEST(CudaConvInputGradByForward, InputGradientMatchesFloat64) {
  MINIDL_REQUIRE_CUDNN();
  struct Geometry {
    Shape x, w;
    int64_t pad, dilation;
  };
  for (const bool tf32 : {false, true})
    for (const Geometry& c : {Geometry{{64, 32, 26, 26}, {64, 32, 3, 3}, 0, 1},
                              Geometry{{8, 16, 12, 12}, {32, 16, 3, 3}, 1, 1},
                              Geometry{{4, 8, 13, 11}, {16, 8, 3, 3}, 2, 2}}) {
      SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + (tf32 ? " TF32" : " strict float32"));
      manual_seed(31);
      const Tensor x = randn(c.x), w = mul(randn(c.w), 0.1);
      const Tensor xg = x.to(gpu()).requires_grad_();
      const bool before = allow_tf32_cudnn();
      set_allow_tf32_cudnn(tf32);
      const Tensor y = conv2d(xg, w.to(gpu()), Tensor(), 1, c.pad, c.dilation);
      const Tensor up = randn(y.shape());
      (y * up.to(gpu())).sum().backward();
      set_allow_tf32_cudnn(before);
      const auto cpu_grad = [&](const Tensor& xs, const Tensor& ws, const Tensor& ups) {
        const Tensor xr = xs.to(kFloat64).requires_grad_();
        (conv2d(xr, ws.to(kFloat64), Tensor(), 1, c.pad, c.dilation) * ups.to(kFloat64)).sum().backward();
        return xr.grad();
      };
      const Tensor want = cpu_grad(x, w, up), magnitude = cpu_grad(x, w.abs(), up.abs());
      const Tensor error = (xg.grad().to(Device::cpu()).to(kFloat64) - want).abs();
      EXPECT_TRUE(error.le(magnitude * (tf32 ? 1.0 / 512 : 1e-4)).all().item<bool>())
          << "largest error " << error.max().item<double>();
    }
}
#endif

}  // namespace

}  // namespace minidl::cuda_conv_input_grad_by_forward_test
