// conv2d_relu and conv2d_relu_max_pool2d on CUDA, by im2col and by cuDNN: float64 gradchecks on the
// GPU, and values and gradients equal to the CPU's and to the unfused composition's on the GPU.
#include "conv2d_relu_cases.h"
#include "core/autocast.h"
#include "ops/backend_setting.h"
#include "test_cuda_util.h"

namespace minidl::cuda_conv2d_relu_test {

using namespace minidl::testing;

namespace {

std::vector<Tensor> forward_backward(const ConvReluCase& c, const std::vector<Tensor>& in, bool fused,
                                     const Tensor& up) {
  Tensor out = run_conv_relu(c, in, fused);
  (out * up.to(out.device())).sum().backward();
  std::vector<Tensor> r = {out.detach().to(Device::cpu())};
  for (const Tensor& t : in) r.push_back(t.grad().to(Device::cpu()));
  return r;
}

}  // namespace

TEST(CudaConv2dRelu, MatchesCpuAndComposition) {
  MINIDL_REQUIRE_CUDA();
  for (ConvBackend backend : {ConvBackend::Im2col, ConvBackend::Cudnn}) {
    ConvBackendScope scope(backend);
    for (const ConvReluCase& c : conv_relu_cases()) {
      SCOPED_TRACE(c.name + " by " + conv_backend_name(backend));
      manual_seed(5);
      std::vector<Tensor> cpu_in = conv_relu_inputs(c, kFloat32, Device::cpu());
      auto copy_to = [&](Device d) {
        std::vector<Tensor> v;
        for (const Tensor& t : cpu_in) v.push_back(t.detach().to(d).requires_grad_());
        return v;
      };
      const Tensor up = randn(run_conv_relu(c, cpu_in, false).shape());
      std::vector<Tensor> on_cpu = forward_backward(c, copy_to(Device::cpu()), true, up);
      std::vector<Tensor> fused = forward_backward(c, copy_to(gpu()), true, up);
      std::vector<Tensor> plain = forward_backward(c, copy_to(gpu()), false, up);
      for (size_t i = 0; i < fused.size(); ++i) {
        EXPECT_TRUE(all_close(fused[i], on_cpu[i], 1e-4, 1e-4)) << "CUDA against CPU, tensor " << i;
        EXPECT_TRUE(all_close(fused[i], plain[i], 1e-4, 1e-4)) << "fused against composed, tensor " << i;
      }
    }
  }
}

TEST(CudaConv2dRelu, Gradcheck) {
  MINIDL_REQUIRE_CUDA();
  for (ConvBackend backend : {ConvBackend::Im2col, ConvBackend::Cudnn}) {
    ConvBackendScope scope(backend);
    for (const ConvReluCase& c : conv_relu_cases()) {
      SCOPED_TRACE(c.name + " by " + conv_backend_name(backend));
      manual_seed(9);
      auto r = gradcheck([&](const std::vector<Tensor>& in) { return run_conv_relu(c, in, true); },
                         conv_relu_inputs(c, kFloat64, gpu()));
      EXPECT_TRUE(r) << r.message;
    }
  }
}

// Enough images for the bias gradient to be split over several blocks and finished by the last.
TEST(CudaConv2dRelu, BiasGradientOverManyBlocks) {
  MINIDL_REQUIRE_CUDA();
  ConvReluCase c{"many images", {96, 2, 10, 10}, {3, 2, 3, 3}, 1, 0, true, 2};
  manual_seed(13);
  const std::vector<Tensor> base = conv_relu_inputs(c, kFloat64, Device::cpu());
  for (int repeat = 0; repeat < 2; ++repeat) {  // the block counters reset themselves for the next launch
    std::vector<Tensor> cpu_in, gpu_in;
    for (const Tensor& t : base) {
      cpu_in.push_back(t.detach().clone().requires_grad_());
      gpu_in.push_back(t.detach().to(gpu()).requires_grad_());
    }
    const Tensor up = randn(run_conv_relu(c, cpu_in, false).shape(), kFloat64);
    std::vector<Tensor> a = forward_backward(c, gpu_in, true, up);
    std::vector<Tensor> b = forward_backward(c, cpu_in, true, up);
    EXPECT_TRUE(all_close(a[3], b[3], 1e-10, 1e-10)) << "bias gradient, pool " << c.pool;
    c.pool = 0;  // then conv2d_relu's backward
  }
}

// The epilogue kernels on channels-last tensors (cuDNN's layout for 16-bit convolutions) against
// the same kernels on NCHW: the same values, and the bias gradient summed in another order. 32
// channels and more take the packed kernels, 5 the scalar and NCHW-copy paths; planes of 9 x 7 and
// 27 x 25 leave a row and a column outside every window; 96 images sum the bias gradient over
// several blocks, 27 x 25 images pool in several blocks of rows each, and 1,100 images leave the
// channels-last backward 1,100 rows of bias sums, added in two rounds. In float32, 6 x 4 and the
// MNIST CNN's 24 x 24 take the NCHW pool backward's kernel of two 2 x 2 windows a thread.
TEST(CudaConv2dRelu, ChannelsLastEpiloguesMatchNchw) {
  MINIDL_REQUIRE_CUDA();
  Kernels& kernels = kernels_for(gpu());
  const auto cl = [](const Tensor& t) { return t.contiguous(MemoryFormat::ChannelsLast); };
  const auto like = [](const Tensor& t, MemoryFormat f) { return Tensor::empty(t.shape(), t.dtype(), t.device(), f); };
  for (DType dt : {kBFloat16, kHalf, kFloat32}) {
    for (const auto& [shape, k] : {std::pair{Shape{3, 32, 9, 7}, 2}, std::pair{Shape{2, 5, 6, 6}, 2},
                                   std::pair{Shape{96, 64, 6, 4}, 2}, std::pair{Shape{2, 64, 27, 25}, 2},
                                   std::pair{Shape{2, 16, 10, 11}, 3}, std::pair{Shape{1100, 32, 2, 2}, 2},
                                   std::pair{Shape{20, 64, 24, 24}, 2}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape) + " pool " + std::to_string(k));
      manual_seed(17);
      const Tensor x = randn(shape).to(dt).to(gpu()), b = randn({shape[1]}).to(dt).to(gpu());
      // conv_bias_act, in place as the ops run it.
      Tensor y = x.clone(), y_cl = cl(x);
      kernels.conv_bias_act(y, &b, true, y);
      kernels.conv_bias_act(y_cl, &b, true, y_cl);
      ASSERT_TRUE(y_cl.is_contiguous(MemoryFormat::ChannelsLast));
      EXPECT_TRUE(all_equal(y_cl.contiguous(), y)) << "conv_bias_act";
      // conv_bias_relu_backward.
      const Tensor g = randn(shape).to(dt).to(gpu());
      Tensor pre = like(y, MemoryFormat::Contiguous), pre_cl = like(y, MemoryFormat::ChannelsLast);
      Tensor gb = Tensor::empty({shape[1]}, dt, gpu()), gb_cl = Tensor::empty({shape[1]}, dt, gpu());
      kernels.conv_bias_relu_backward(g, y, pre, &gb);
      kernels.conv_bias_relu_backward(cl(g), y_cl, pre_cl, &gb_cl);
      EXPECT_TRUE(all_equal(pre_cl.contiguous(), pre)) << "conv_bias_relu_backward";
      const double t = dt == kFloat32 ? 1e-5 : 2e-2;
      EXPECT_TRUE(all_close(gb_cl, gb, t, t)) << "conv_bias_relu_backward, the bias gradient";
      // bias_relu_max_pool2d and its backward: the pooled tensors are NCHW in both.
      const Shape pooled{shape[0], shape[1], shape[2] / k, shape[3] / k};
      Tensor out = Tensor::empty(pooled, dt, gpu()), out_cl = Tensor::empty(pooled, dt, gpu());
      kernels.bias_relu_max_pool2d(x, &b, k, out);
      kernels.bias_relu_max_pool2d(cl(x), &b, k, out_cl);
      EXPECT_TRUE(all_equal(out_cl, out)) << "bias_relu_max_pool2d";
      const Tensor gp = randn(pooled).to(dt).to(gpu());
      Tensor gpre = like(x, MemoryFormat::Contiguous), gpre_cl = like(x, MemoryFormat::ChannelsLast);
      gpre_cl.fill_(7.0);  // every element must be written, those outside the windows too
      kernels.bias_relu_max_pool2d_backward(gp, x, &b, out, k, gpre, &gb);
      kernels.bias_relu_max_pool2d_backward(gp, cl(x), &b, out, k, gpre_cl, &gb_cl);
      EXPECT_TRUE(all_equal(gpre_cl.contiguous(), gpre)) << "bias_relu_max_pool2d_backward";
      EXPECT_TRUE(all_close(gb_cl, gb, t, t)) << "bias_relu_max_pool2d_backward, the bias gradient";
    }
  }
}

// A 16-bit convolution on cuDNN runs channels-last: its output is, and the fused ops' values and
// gradients match float32 (their layouts aside) through the MNIST CNN's two convolutions. The first
// layer runs on cuDNN when its input wants a gradient, else on the direct kernels
// (ops/cuda/conv2d_direct.cu). Small whole numbers and a sparse second filter keep every value of
// the forward exact in 16 bits: rounded inputs would move the pool's maxima and the ReLU's mask, and
// route gradients elsewhere than float32 does, whatever the layout.
TEST(CudaConv2dRelu, SixteenBitCudnnRunsChannelsLast) {
  MINIDL_REQUIRE_CUDA();
  ConvBackendScope scope(ConvBackend::Cudnn);
  manual_seed(23);
  const auto whole = [](int64_t low, int64_t high, const Shape& shape) { return randint(low, high, shape).to(kFloat32); };
  const Tensor x = whole(-1, 3, {8, 1, 12, 12}), w1 = whole(-1, 2, {32, 1, 3, 3}), b1 = whole(-1, 2, {32});
  const Tensor w2 = whole(-1, 2, {16, 32, 3, 3}) * (rand({16, 32, 3, 3}) < 0.1).to(kFloat32), b2 = whole(-2, 3, {16});
  const Tensor up = whole(-1, 2, {8, 16, 4, 4}).to(gpu());
  for (const bool input_grad : {true, false}) {
    const auto block = [&](DType dt, std::vector<Tensor>& leaves) {
      leaves.clear();
      for (const Tensor& t : {x, w1, b1, w2, b2}) leaves.push_back(t.to(dt).to(gpu()).requires_grad_());
      if (!input_grad) leaves[0] = leaves[0].detach();
      const Tensor h = conv2d_relu(leaves[0], leaves[1], leaves[2]);
      if (is_reduced_floating(dt)) {
        EXPECT_TRUE(h.is_contiguous(MemoryFormat::ChannelsLast) && !h.is_contiguous());
      }
      const Tensor out = conv2d_relu_max_pool2d(h, leaves[3], leaves[4], 1, 0, 1, 2);
      EXPECT_TRUE(out.is_contiguous());
      (out.to(kFloat32) * up).sum().backward();
      return out;
    };
    std::vector<Tensor> ref_leaves, leaves;
    const Tensor ref = block(kFloat32, ref_leaves);
    for (DType dt : {kBFloat16, kHalf}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (input_grad ? ", the input wants a gradient" : ", a first layer"));
      const Tensor out = block(dt, leaves);
      EXPECT_TRUE(all_close(out.to(kFloat32), ref, 0, 0)) << "output";
      // The weight gradients sum hundreds of products: rounded once to 16 bits.
      const double t = dt == kBFloat16 ? 1e-2 : 2e-3;
      for (size_t i = input_grad ? 0 : 1; i < leaves.size(); ++i)
        EXPECT_TRUE(all_close(leaves[i].grad().to(kFloat32), ref_leaves[i].grad(), t, t)) << "gradient of leaf " << i;
    }
  }
}

// The direct first-layer kernels with strides, padding, dilation and windows of 3 x 3 and 3 x 2,
// against float64 on the CPU; 8 to 64 output channels (one pack to eight). The MNIST shape at a
// batch whose pixels outnumber one wave of threads, so that threads take several pixels each. In
// strict float32 the output is NCHW (the layout of the next layer's convolutions), under TF32 and in
// 16 bits channels-last. In NCHW, up to 2^17 output pixels take the backward whose threads walk
// the images, and the batch of 200 the pack kernel's. (A 5 x 5 window or 24 channels take cuDNN's
// path, which rounds the convolution before adding the bias: on random inputs a pre-activation
// near zero can change sign against float32's, so that path is tested on whole numbers, in
// SixteenBitCudnnRunsChannelsLast above.)
TEST(CudaConv2dRelu, DirectFirstLayerMatchesFloat64) {
  MINIDL_REQUIRE_CUDA();
  struct Case {
    Shape w;
    Size2 stride, padding, dilation;
    Shape x = {3, 1, 11, 10};
    bool whole = false;  // whole-number inputs: no pre-activation near zero (see below)
  };
  const Case cases[] = {{{16, 1, 3, 3}, 2, 2, 1},
                        {{8, 1, 3, 3}, 1, 1, 2},
                        {{32, 1, 3, 2}, {1, 2}, {0, 1}, 1},
                        {{64, 1, 2, 2}, 1, 0, 1},
                        {{32, 1, 3, 3}, 1, 0, 1, {48, 1, 28, 28}},
                        {{16, 1, 3, 3}, 1, 1, 1, {200, 1, 28, 28}, true}};
  const bool tf32_before = allow_tf32_cudnn();
  for (const Case& c : cases) {
    for (int variant = 0; variant < 4; ++variant) {
      const DType dt = variant < 2 ? kFloat32 : variant == 2 ? kBFloat16 : kHalf;
      const bool tf32 = variant == 1;  // products stay strict float32; the layout follows cuDNN's
      set_allow_tf32_cudnn(tf32);
      SCOPED_TRACE(std::string(dtype_name(dt)) + (tf32 ? " (TF32)" : "") + " weight " + shape_str(c.w) + " input " +
                   shape_str(c.x));
      manual_seed(29);
      // Values of the dtype, so that both runs start from the same inputs.
      // Whole numbers in quarters, the bias an eighth off them: every pre-activation is exact in each
      // dtype and at least an eighth from zero. (With 2.5M random ones, a few fall within float32's
      // rounding of zero, and the ReLU then passes a gradient the float64 reference stops.)
      const auto whole = [](int64_t low, int64_t high, const Shape& shape) {
        return randint(low, high, shape).to(kFloat32);
      };
      const Tensor x = (c.whole ? whole(-2, 3, c.x) : randn(c.x)).to(dt);
      const Tensor w = (c.whole ? whole(-3, 4, c.w) * 0.25 : randn(c.w) * 0.3).to(dt);
      const Tensor b = (c.whole ? whole(-2, 2, {c.w[0]}) * 0.25 + 0.125 : randn({c.w[0]}) * 0.1).to(dt);
      const auto leaf = [](const Tensor& t, DType as, Device on) { return t.to(as).to(on).requires_grad_(); };
      Tensor w64 = leaf(w, kFloat64, Device::cpu()), b64 = leaf(b, kFloat64, Device::cpu());
      const Tensor ref = conv2d_relu(x.to(kFloat64), w64, b64, c.stride, c.padding, c.dilation);
      Tensor wg = leaf(w, dt, gpu()), bg = leaf(b, dt, gpu());
      const Tensor out = conv2d_relu(x.to(gpu()), wg, bg, c.stride, c.padding, c.dilation);
      if (dt == kFloat32 && !tf32) {
        EXPECT_TRUE(out.is_contiguous() && !out.is_contiguous(MemoryFormat::ChannelsLast)) << "NCHW";
      } else {
        EXPECT_TRUE(out.is_contiguous(MemoryFormat::ChannelsLast) && !out.is_contiguous()) << "channels-last";
      }
      const Tensor up = randn(ref.shape(), kFloat64);
      (ref * up).sum().backward();
      (out.to(kFloat64) * up.to(gpu())).sum().backward();
      const double t = dt == kFloat32 ? 1e-5 : dt == kBFloat16 ? 1e-2 : 2e-3;
      EXPECT_TRUE(all_close(out.to(kFloat64).cpu(), ref, t, t)) << "output";
      const auto expect_grads = [&](const Tensor& wl, const Tensor& bl, const char* what) {
        for (auto [got, want] : {std::pair{wl, w64}, std::pair{bl, b64}}) {
          const double scale = want.grad().abs().max().item<double>();
          EXPECT_TRUE(all_close(got.grad().to(kFloat64).cpu(), want.grad(), (dt == kFloat32 ? 1e-4 : 2 * t) * scale, 0))
              << what;
        }
      };
      expect_grads(wg, bg, "gradient");
      if (dt != kFloat32) {
        // Under autocast the float32 masters are recorded, and the kernel hands their gradients back
        // in float32.
        Tensor wm = leaf(w, kFloat32, gpu()), bm = leaf(b, kFloat32, gpu());
        {
          AutocastGuard autocast(Device::cuda(), dt);
          const Tensor mixed = conv2d_relu(x.to(kFloat32).to(gpu()), wm, bm, c.stride, c.padding, c.dilation);
          EXPECT_EQ(mixed.dtype(), dt);
          (mixed.to(kFloat64) * up.to(gpu())).sum().backward();
        }
        expect_grads(wm, bm, "the masters' gradient");
        EXPECT_EQ(wm.grad().dtype(), kFloat32);
        EXPECT_EQ(bm.grad().dtype(), kFloat32);
      }
    }
  }
  set_allow_tf32_cudnn(tf32_before);
}

}  // namespace minidl::cuda_conv2d_relu_test
