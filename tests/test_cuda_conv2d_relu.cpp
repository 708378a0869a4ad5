// conv2d_relu and conv2d_relu_max_pool2d on CUDA, by im2col and by cuDNN: float64 gradchecks on the
// GPU, and values and gradients equal to the CPU's and to the unfused composition's on the GPU.
#include "conv2d_relu_cases.h"
#include "ops/backend_setting.h"
#include "test_cuda_util.h"

using namespace minidl;
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
