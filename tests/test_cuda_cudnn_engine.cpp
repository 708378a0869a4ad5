// The weight gradient through cuDNN's graph API (ops/cuda/cudnn_engine.h): every engine the
// heuristics list, on channels-last bfloat16, float16 and float32 data (TF32 engines among them),
// against float32's gradient.
#include "ops/conv2d_core.h"
#include "test_cuda_util.h"

#ifdef MINIDL_WITH_CUDNN
#include "ops/cuda/cudnn_engine.h"
#include "ops/cuda/cudnn_plan.h"
#endif

namespace minidl::cuda_cudnn_engine_test {

using namespace minidl::testing;

namespace {

#ifdef MINIDL_WITH_CUDNN
// Small whole numbers: the inputs are exact in 16 bits and in TF32. In 16 bits each gradient is one
// float32 sum rounded once, so every engine must land within half a unit of the dtype of float32's.
// The float32 engines include transforms (Winograd, FFT) whose sums are not exact even on whole
// numbers: theirs must land within TF32's half unit of the sum of the terms' magnitudes.
TEST(CudaCudnnEngine, WeightGradientMatchesFloat32) {
  MINIDL_REQUIRE_CUDNN();
  struct Case {
    Shape x, w;
    Size2 stride, padding, dilation;
  };
  const Case cases[] = {{{6, 16, 10, 9}, {8, 16, 3, 3}, 1, 1, 1}, {{4, 8, 11, 12}, {16, 8, 3, 2}, 2, {0, 1}, {2, 1}}};
  for (const Case& c : cases) {
    manual_seed(41);
    const Tensor x = randint(-2, 3, c.x).to(kFloat32), w = randint(-2, 3, c.w).to(kFloat32).requires_grad_();
    const Tensor out = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation);
    const Tensor dy = randint(-2, 3, out.shape()).to(kFloat32);
    (out * dy).sum().backward();
    const Tensor want = w.grad();
    const Tensor w_abs = w.detach().abs().requires_grad_();
    (conv2d(x.abs(), w_abs, Tensor(), c.stride, c.padding, c.dilation) * dy.abs()).sum().backward();
    const Tensor magnitude = w_abs.grad();
    const ConvGeometry g = conv2d_check("conv2d", x, w, Tensor(), c.stride, c.padding, c.dilation);
    for (DType dt : {kBFloat16, kHalf, kFloat32}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " weight " + shape_str(c.w));
      const Tensor xd = x.to(dt).to(gpu()).contiguous(MemoryFormat::ChannelsLast);
      const Tensor dyd = dy.to(dt).to(gpu()).contiguous(MemoryFormat::ChannelsLast);
      cudnnHandle_t handle = cudnn::cudnn_handle(0);
      const auto engines = cudnn::WeightGradEngine::candidates(handle, dt, c.x[0], c.w[0], g, size_t{64} << 20, 8);
      ASSERT_FALSE(engines.empty()) << "cuDNN's heuristics listed no usable engine";
      for (const auto& engine : engines) {
        SCOPED_TRACE("engine " + std::to_string(engine->engine()));
        Tensor dw = Tensor::empty(c.w, dt, gpu(), MemoryFormat::ChannelsLast);
        const Tensor workspace = Tensor::empty({static_cast<int64_t>(engine->workspace() / 4 + 1)}, kFloat32, gpu());
        engine->run(handle, xd.raw_data(), dyd.raw_data(), dw.raw_data(), workspace.raw_data());
        const double half_unit = dt == kBFloat16 ? 1.0 / 256 : 1.0 / 2048;  // relative; TF32 as float16
        const Tensor got = dw.to(kFloat32).to(Device::cpu());
        if (dt == kFloat32) {
          const Tensor error = (got - want).abs(), bound = magnitude * half_unit;
          EXPECT_TRUE(error.le(bound).all().item<bool>())
              << "weight gradient: largest error " << error.max().item<float>() << ", bound "
              << bound.min().item<float>() << " or more";
        } else {
          EXPECT_TRUE(all_close(got, want, 0, half_unit)) << "weight gradient";
        }
      }
    }
  }
}
#endif

}  // namespace

}  // namespace minidl::cuda_cudnn_engine_test
