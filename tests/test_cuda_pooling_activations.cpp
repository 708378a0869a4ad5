// Average pooling, adaptive pooling, nearest upsampling, transposed convolution, max_pool2d's
// ceil_mode and dilation, and the activations leaky_relu, gelu and silu on CUDA: a float64 gradient
// check on the GPU for each, and forward and backward against the CPU in float32 on fresh random
// inputs. GPU tests skip, saying why, where no CUDA device is usable.
#include "test_cuda_util.h"

namespace minidl::cuda_pooling_activations_test {

using namespace minidl::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A float64 leaf on the GPU that wants a gradient.
Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).to(gpu()).requires_grad_(); }

void expect_gradcheck(const std::string& what, const Fn& f, std::vector<Tensor> inputs) {
  GradcheckResult r = gradcheck(f, std::move(inputs));
  EXPECT_TRUE(r) << what << ": " << r.message;
}

// Runs f on float32 copies of `shapes`-sized random inputs on the CPU and on the GPU, seeds the
// same random output gradient on both, and compares outputs and input gradients.
void expect_cpu_agreement(const std::string& what, const Fn& f, const std::vector<Shape>& shapes, double scale = 1.0) {
  SCOPED_TRACE(what);
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Shape& s : shapes) {
    Tensor x = randn(s, kFloat32) * scale;
    cpu_in.push_back(x.clone().requires_grad_());
    gpu_in.push_back(x.to(gpu()).requires_grad_());
  }
  Tensor y = f(cpu_in), yg = f(gpu_in);
  ASSERT_EQ(yg.device(), gpu());
  EXPECT_TRUE(all_close(yg, y, tol(kFloat32), tol(kFloat32)));
  Tensor seed = randn(y.shape(), kFloat32);
  y.backward(seed);
  yg.backward(seed.to(gpu()));
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    ASSERT_TRUE(gpu_in[i].grad().defined()) << "input " << i;
    EXPECT_TRUE(all_close(gpu_in[i].grad(), cpu_in[i].grad(), tol(kFloat32), tol(kFloat32))) << "input " << i;
  }
}

InterpolateOptions by_size(Size2 s) { return InterpolateOptions().size(s); }
InterpolateOptions by_scale(Scale2 s) { return InterpolateOptions().scale_factor(s); }

}  // namespace

TEST(CudaPooling, GradcheckAvgPool) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("avg_pool2d 2x2", [](auto& in) { return avg_pool2d(in[0], 2); }, {leaf({2, 2, 4, 6})});
  expect_gradcheck("avg_pool2d 3, stride 2, padding 1",
                   [](auto& in) { return avg_pool2d(in[0], 3, 2, 1); }, {leaf({1, 2, 5, 6})});
  expect_gradcheck("avg_pool2d count_include_pad=false",
                   [](auto& in) { return avg_pool2d(in[0], 3, 2, 1, false, false); }, {leaf({2, 1, 5, 7})});
  expect_gradcheck("avg_pool2d ceil_mode, both divisors", [](auto& in) {
    return avg_pool2d(in[0], 3, 2, 1, true, true) + avg_pool2d(in[0], 3, 2, 1, true, false);
  }, {leaf({1, 2, 6, 7})});
  expect_gradcheck("avg_pool2d non-square, overlapping",
                   [](auto& in) { return avg_pool2d(in[0], {3, 2}, Size2(1, 2), {1, 0}); }, {leaf({2, 1, 5, 6})});
}

TEST(CudaPooling, GradcheckAdaptiveAndUpsample) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("adaptive_avg_pool2d 3x2", [](auto& in) { return adaptive_avg_pool2d(in[0], {3, 2}); },
                   {leaf({2, 2, 7, 5})});
  expect_gradcheck("adaptive_avg_pool2d larger than the input",
                   [](auto& in) { return adaptive_avg_pool2d(in[0], {5, 7}); }, {leaf({1, 2, 3, 4})});
  expect_gradcheck("adaptive_avg_pool2d global", [](auto& in) { return adaptive_avg_pool2d(in[0], 1); },
                   {leaf({2, 3, 5, 4})});
  expect_gradcheck("interpolate scale 2", [](auto& in) { return interpolate(in[0], by_scale(2)); },
                   {leaf({2, 2, 3, 4})});
  expect_gradcheck("interpolate scale (1.5, 2.5)", [](auto& in) { return interpolate(in[0], by_scale({1.5, 2.5})); },
                   {leaf({1, 2, 5, 3})});
  expect_gradcheck("interpolate down to 3x4", [](auto& in) { return interpolate(in[0], by_size({3, 4})); },
                   {leaf({2, 1, 5, 6})});
  expect_gradcheck("interpolate up to 5x7", [](auto& in) { return interpolate(in[0], by_size({5, 7})); },
                   {leaf({1, 1, 2, 3})});
  expect_gradcheck("max_pool2d ceil_mode", [](auto& in) { return max_pool2d(in[0], 3, 2, 1, 1, true); },
                   {leaf({2, 2, 7, 6})});
  expect_gradcheck("max_pool2d dilation", [](auto& in) { return max_pool2d(in[0], {2, 3}, 1, 1, 2); },
                   {leaf({1, 2, 7, 6})});
}

TEST(CudaPooling, GradcheckConvTranspose) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("conv_transpose2d", [](auto& in) { return conv_transpose2d(in[0], in[1], in[2]); },
                   {leaf({2, 3, 3, 4}), leaf({3, 2, 3, 2}), leaf({2})});
  expect_gradcheck("conv_transpose2d stride 2, padding 1, output_padding 1",
                   [](auto& in) { return conv_transpose2d(in[0], in[1], in[2], 2, 1, 1); },
                   {leaf({1, 2, 3, 3}), leaf({2, 3, 3, 3}), leaf({3})});
  expect_gradcheck("conv_transpose2d groups 2",
                   [](auto& in) { return conv_transpose2d(in[0], in[1], in[2], 1, 1, 0, 2); },
                   {leaf({2, 4, 3, 3}), leaf({4, 3, 3, 3}), leaf({6})});
  expect_gradcheck("conv_transpose2d dilation 2, output_padding 1",
                   [](auto& in) { return conv_transpose2d(in[0], in[1], Tensor(), 1, 0, 1, 1, 2); },
                   {leaf({2, 1, 3, 2}), leaf({1, 2, 2, 2})});
}

TEST(CudaActivations, Gradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Values kept away from leaky_relu's kink so central differences never straddle it.
  auto away = [](const Shape& s) {
    std::vector<double> v = randn(s, kFloat64).to_vector<double>();
    for (double& e : v) e = e >= 0 ? e + 0.05 : e - 0.05;
    return Tensor::from_vector(v, s).to(gpu()).requires_grad_();
  };
  expect_gradcheck("leaky_relu", [](auto& in) { return leaky_relu(in[0]); }, {away({4, 5})});
  expect_gradcheck("leaky_relu 0.2, strided", [](auto& in) { return leaky_relu(in[0].t(), 0.2); }, {away({3, 4})});
  expect_gradcheck("gelu", [](auto& in) { return gelu(in[0]); }, {leaf({4, 5})});
  expect_gradcheck("gelu tanh", [](auto& in) { return gelu(in[0], "tanh"); }, {leaf({4, 5})});
  expect_gradcheck("gelu strided", [](auto& in) { return gelu(in[0].t()); }, {leaf({3, 4})});
  expect_gradcheck("silu", [](auto& in) { return silu(in[0]); }, {leaf({4, 5})});
  expect_gradcheck("silu strided", [](auto& in) { return silu(in[0].t()); }, {leaf({3, 4})});
}

TEST(CudaPooling, MatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_agreement("avg_pool2d", [](auto& in) { return avg_pool2d(in[0], 3, 2, 1); }, {{8, 16, 33, 31}});
  expect_cpu_agreement("avg_pool2d ceil_mode count_include_pad=false",
                       [](auto& in) { return avg_pool2d(in[0], {3, 2}, Size2(2, 1), {1, 1}, true, false); },
                       {{4, 8, 17, 20}});
  expect_cpu_agreement("avg_pool2d 2x2", [](auto& in) { return avg_pool2d(in[0], 2); }, {{16, 32, 24, 24}});
  expect_cpu_agreement("adaptive_avg_pool2d", [](auto& in) { return adaptive_avg_pool2d(in[0], {5, 3}); },
                       {{4, 8, 17, 13}});
  expect_cpu_agreement("adaptive_avg_pool2d up", [](auto& in) { return adaptive_avg_pool2d(in[0], {9, 11}); },
                       {{2, 4, 4, 5}});
  // What a ResNet ends with.
  expect_cpu_agreement("global average pooling", [](auto& in) { return adaptive_avg_pool2d(in[0], 1); },
                       {{16, 512, 7, 7}});
  expect_cpu_agreement("interpolate scale 2", [](auto& in) { return interpolate(in[0], by_scale(2)); },
                       {{4, 8, 13, 14}});
  expect_cpu_agreement("interpolate scale (1.7, 0.6)",
                       [](auto& in) { return interpolate(in[0], by_scale({1.7, 0.6})); }, {{2, 4, 23, 29}});
  expect_cpu_agreement("interpolate to 37x19", [](auto& in) { return interpolate(in[0], by_size({37, 19})); },
                       {{2, 3, 11, 23}});
  expect_cpu_agreement("max_pool2d ceil_mode", [](auto& in) { return max_pool2d(in[0], 3, 2, 1, 1, true); },
                       {{4, 8, 17, 20}});
  expect_cpu_agreement("max_pool2d dilation", [](auto& in) { return max_pool2d(in[0], 3, 1, 1, 2); },
                       {{2, 4, 15, 12}});
}

TEST(CudaPooling, UpsampleCopiesExactlyTheCpuSources) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Nearest resizing only copies: the GPU must pick the very elements the CPU picks, for sizes whose
  // float source positions land near integers.
  for (Size2 size : {Size2(37, 19), Size2(3, 100), Size2(97, 7), Size2(64, 64)}) {
    Tensor x = randn({2, 3, 29, 31}, kFloat32);
    EXPECT_TRUE(all_equal(interpolate(x.to(gpu()), by_size(size)), interpolate(x, by_size(size))))
        << size.h << "x" << size.w;
  }
  Tensor x = randn({1, 2, 10, 41}, kFloat32);
  for (double s : {1.05, 1.5, 2.0, 2.3, 0.7, 3.0}) {
    EXPECT_TRUE(all_equal(interpolate(x.to(gpu()), by_scale(s)), interpolate(x, by_scale(s)))) << "scale " << s;
  }
}

TEST(CudaPooling, ConvTransposeMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_agreement("conv_transpose2d stride 2",
                       [](auto& in) { return conv_transpose2d(in[0], in[1], in[2], 2, 1, 1); },
                       {{4, 16, 9, 11}, {16, 8, 4, 4}, {8}}, 0.5);
  expect_cpu_agreement("conv_transpose2d groups 4, dilation 2",
                       [](auto& in) { return conv_transpose2d(in[0], in[1], in[2], {1, 2}, {2, 1}, {0, 1}, 4, 2); },
                       {{2, 8, 7, 6}, {8, 3, 3, 3}, {12}}, 0.5);
  expect_cpu_agreement("conv_transpose2d batch 1, 1x1",
                       [](auto& in) { return conv_transpose2d(in[0], in[1], Tensor(), 3); },
                       {{1, 5, 6, 4}, {5, 7, 1, 1}});
}

TEST(CudaActivations, MatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_cpu_agreement("leaky_relu", [](auto& in) { return leaky_relu(in[0], 0.1); }, {{64, 257}}, 3.0);
  expect_cpu_agreement("leaky_relu negative slope, strided", [](auto& in) { return leaky_relu(in[0].t(), -0.3); },
                       {{33, 17}}, 3.0);
  expect_cpu_agreement("gelu", [](auto& in) { return gelu(in[0]); }, {{64, 257}}, 3.0);
  expect_cpu_agreement("gelu tanh", [](auto& in) { return gelu(in[0], "tanh"); }, {{64, 257}}, 3.0);
  expect_cpu_agreement("gelu strided", [](auto& in) { return gelu(in[0].t()); }, {{33, 17}}, 3.0);
  expect_cpu_agreement("silu", [](auto& in) { return silu(in[0]); }, {{64, 257}}, 3.0);
  expect_cpu_agreement("silu strided", [](auto& in) { return silu(in[0].t()); }, {{33, 17}}, 3.0);
}

namespace {

// Position of a 16-bit float on the number line, so that neighbours differ by one (the two zeros
// both 0).
int ordered(uint16_t bits) { return (bits & 0x8000) ? -int(bits & 0x7fff) : int(bits); }
uint16_t bits_at(const Tensor& t, int64_t i) {
  return t.dtype() == kBFloat16 ? t.data_ptr<BFloat16>()[i].bits : t.data_ptr<Half>()[i].bits;
}

struct Rounding {
  int64_t differing = 0;  // elements not equal to the correctly rounded value
  int most_ulps = 0;
};
Rounding rounding_against(const Tensor& got, const std::vector<double>& exact) {
  const Tensor want = Tensor::from_vector(exact, {int64_t(exact.size())}).to(got.dtype());
  const Tensor have = got.cpu().contiguous().reshape({int64_t(exact.size())});
  Rounding r;
  for (int64_t i = 0; i < int64_t(exact.size()); ++i) {
    const int ulps = std::abs(ordered(bits_at(have, i)) - ordered(bits_at(want, i)));
    r.differing += ulps != 0;
    r.most_ulps = std::max(r.most_ulps, ulps);
  }
  return r;
}

}  // namespace

// GELU over 16-bit storage computes its normal CDF in a form of its own (ops/cuda/elementwise.cu):
// its forward and gradient against the exact values rounded once, through the vector kernel, the
// strided one and the fused backward, on normal inputs and on a grid down to the tail at -12 (where
// 0.5 x (1 + erf(x / sqrt 2)) in float32 is off by thousands of bf16 units).
TEST(CudaActivations, SixteenBitGeluIsCorrectlyRoundedAlmostEverywhere) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const int64_t normal = 1 << 17, grid = 20001;
  Tensor x32 = cat({randn({normal}) * 2.0, linspace(-12.0, 8.0, grid)}, 0);
  for (DType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = x32.to(dtype);
    const Tensor xd = x.to(kFloat64);
    std::vector<double> value, slope;
    for (int64_t i = 0; i < xd.numel(); ++i) {
      const double v = xd.data_ptr<double>()[i];
      const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
      value.push_back(v * cdf);
      slope.push_back(cdf + v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI));
    }
    const int64_t n = xd.numel();
    const int64_t allowed = n / 2000;  // 0.05%
    Tensor xg = x.cuda().requires_grad_();
    Tensor y = gelu(xg);
    y.backward(ones_like(y));
    const Rounding forward = rounding_against(y.detach(), value), backward = rounding_against(xg.grad(), slope);
    EXPECT_LE(forward.differing, allowed) << "forward";
    EXPECT_LE(forward.most_ulps, 1) << "forward";
    EXPECT_LE(backward.differing, 2 * allowed) << "gradient";
    EXPECT_LE(backward.most_ulps, 1) << "gradient";
    // The strided kernel (a transposed view) gives the vector kernel's bits.
    const Tensor square = x.cuda().narrow(0, 0, 256 * 256).reshape({256, 256});
    const Tensor square_y = y.detach().narrow(0, 0, 256 * 256).reshape({256, 256});
    EXPECT_TRUE(gelu(square.t()).contiguous().cpu().equal(square_y.t().contiguous().cpu())) << "strided";
    // The fused backward (linear_gelu_linear's) gives the same output and gradient bits.
    Tensor grad = ones_like(x).cuda(), out = empty_like(grad);
    kernels_for(gpu()).gelu_backward_with_output(false, x.cuda(), grad, out);
    EXPECT_TRUE(out.cpu().equal(y.detach().cpu())) << "fused output";
    EXPECT_TRUE(grad.cpu().equal(xg.grad().cpu())) << "fused gradient";
  }
}

}  // namespace minidl::cuda_pooling_activations_test
