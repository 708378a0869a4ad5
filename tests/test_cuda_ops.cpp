// The public op API on CUDA: a float64 gradient check on the GPU for every differentiable op, a whole
// CNN step against the CPU, device moves, device-mismatch errors, errors found by kernels, and the
// cuDNN path against im2col. GPU tests skip, saying why, where no CUDA device is usable.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <regex>
#include <string>

#include "core/cuda_graph.h"
#include "ops/backend_setting.h"
#include "ops/kernels.h"
#include "float64_util.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::cuda_ops_test {

using namespace minidl::testing;

namespace {

// A float64 leaf on the GPU that wants a gradient.
Tensor positive_leaf(const Shape& shape) { return uniform(shape, 0.5, 2.0, kFloat64).to(gpu()).requires_grad_(); }

Tensor randint_gpu(const Shape& shape, int64_t n) {
  std::vector<double> u = rand(shape, kFloat64).to_vector<double>();
  std::vector<int64_t> v(u.size());
  for (size_t i = 0; i < u.size(); ++i) v[i] = std::min<int64_t>(n - 1, static_cast<int64_t>(u[i] * n));
  return Tensor::from_vector(v, shape).to(gpu());
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

}  // namespace

TEST(CudaOps, GradcheckElementwise) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("add (broadcast)", [](auto& in) { return add(in[0], in[1]); }, {leaf({3, 4}, gpu()), leaf({4}, gpu())});
  expect_gradcheck("sub (broadcast)", [](auto& in) { return sub(in[0], in[1]); }, {leaf({2, 1, 3}, gpu()), leaf({4, 1}, gpu())});
  expect_gradcheck("mul", [](auto& in) { return mul(in[0], in[1]); }, {leaf({3, 4}, gpu()), leaf({3, 1}, gpu())});
  expect_gradcheck("div", [](auto& in) { return div(in[0], in[1]); }, {leaf({3, 4}, gpu()), positive_leaf({4})});
  expect_gradcheck("pow", [](auto& in) { return pow(in[0], in[1]); }, {positive_leaf({3, 4}), leaf({3, 4}, gpu())});
  expect_gradcheck("pow scalar", [](auto& in) { return pow(in[0], 3.0); }, {leaf({5}, gpu())});
  expect_gradcheck("neg", [](auto& in) { return neg(in[0]); }, {leaf({6}, gpu())});
  expect_gradcheck("exp", [](auto& in) { return exp(in[0]); }, {leaf({2, 3}, gpu())});
  expect_gradcheck("log", [](auto& in) { return log(in[0]); }, {positive_leaf({2, 3})});
  expect_gradcheck("sqrt", [](auto& in) { return sqrt(in[0]); }, {positive_leaf({2, 3})});
  expect_gradcheck("relu", [](auto& in) { return relu(in[0]); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("sigmoid", [](auto& in) { return sigmoid(in[0]); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("tanh", [](auto& in) { return tanh(in[0]); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("scalar mix", [](auto& in) { return (in[0] * 2.0 + 1.0) / 3.0 - in[0]; }, {leaf({3}, gpu())});
}

TEST(CudaOps, GradcheckReductionsAndViews) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("sum", [](auto& in) { return sum(in[0]); }, {leaf({3, 4}, gpu())});
  expect_gradcheck("sum dims", [](auto& in) { return sum(in[0], {0, 2}); }, {leaf({3, 4, 2}, gpu())});
  expect_gradcheck("sum keepdim", [](auto& in) { return sum(in[0], {1}, true); }, {leaf({3, 4, 2}, gpu())});
  expect_gradcheck("mean", [](auto& in) { return mean(in[0], {-1}); }, {leaf({3, 5}, gpu())});
  expect_gradcheck("mean all", [](auto& in) { return in[0].mean(); }, {leaf({2, 5}, gpu())});
  expect_gradcheck("max", [](auto& in) { return max(in[0], 1).values; }, {leaf({4, 6}, gpu())});
  expect_gradcheck("max dim 0", [](auto& in) { return max(in[0], 0, true).values; }, {leaf({5, 3}, gpu())});
  expect_gradcheck("views",
                   [](auto& in) {
                     Tensor x = in[0].transpose(0, 2).reshape({4, 6}).unsqueeze(0).squeeze(0);
                     Tensor y = x.permute({1, 0}).flatten().view({3, 8});
                     return mul(y, expand(in[1], {3, 8}));
                   },
                   {leaf({2, 3, 4}, gpu()), leaf({1, 8}, gpu())});
}

TEST(CudaOps, GradcheckMatmulAndLinear) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("matmul", [](auto& in) { return matmul(in[0], in[1]); }, {leaf({3, 4}, gpu()), leaf({4, 5}, gpu())});
  expect_gradcheck("matmul transposed views", [](auto& in) { return matmul(in[0].t(), in[1].t()); },
                   {leaf({4, 3}, gpu()), leaf({5, 4}, gpu())});
  expect_gradcheck("matmul batched", [](auto& in) { return matmul(in[0], in[1]); }, {leaf({2, 3, 4}, gpu()), leaf({2, 4, 2}, gpu())});
  expect_gradcheck("matmul shared", [](auto& in) { return matmul(in[0], in[1]); }, {leaf({2, 3, 4}, gpu()), leaf({4, 2}, gpu())});
  expect_gradcheck("linear", [](auto& in) { return linear(in[0], in[1], in[2]); }, {leaf({3, 5}, gpu()), leaf({4, 5}, gpu()), leaf({4}, gpu())});
  expect_gradcheck("linear no bias", [](auto& in) { return linear(in[0], in[1]); }, {leaf({2, 5}, gpu()), leaf({3, 5}, gpu())});
}

TEST(CudaOps, GradcheckSoftmaxAndLosses) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("softmax", [](auto& in) { return softmax(in[0], 1); }, {leaf({3, 5}, gpu())});
  expect_gradcheck("softmax dim 0", [](auto& in) { return softmax(in[0], 0); }, {leaf({4, 3}, gpu())});
  expect_gradcheck("log_softmax", [](auto& in) { return log_softmax(in[0], 1); }, {leaf({3, 5}, gpu())});
  expect_gradcheck("log_softmax middle dim", [](auto& in) { return log_softmax(in[0], 1); }, {leaf({2, 3, 4}, gpu())});
  Tensor target = randint_gpu({4}, 5);
  expect_gradcheck("nll_loss", [&](auto& in) { return nll_loss(log_softmax(in[0], 1), target); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("nll_loss direct", [&](auto& in) { return nll_loss(in[0], target); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("cross_entropy", [&](auto& in) { return cross_entropy(in[0], target); }, {leaf({4, 5}, gpu())});
  expect_gradcheck("mse_loss", [](auto& in) { return mse_loss(in[0], in[1]); }, {leaf({3, 4}, gpu()), leaf({3, 4}, gpu())});
  expect_gradcheck("narrow", [](auto& in) { return narrow(in[0], 1, 1, 2) * 2.0; }, {leaf({2, 4, 3}, gpu())});
  expect_gradcheck("min, var, abs", [](auto& in) { return min(in[0], 1).values + var(in[0], {1}) + abs(in[0]).sum(); },
                   {leaf({3, 4}, gpu())});
  expect_gradcheck("cat", [](auto& in) { return cat({in[0], exp(in[1])}, -1); }, {leaf({2, 3}, gpu()), leaf({2, 2}, gpu())});
  expect_gradcheck("stack and chunk", [](auto& in) {
    auto c = chunk(stack({in[0], in[0] * in[0]}, 0), 2, 0);
    return c[0] * c[1];
  }, {leaf({2, 3}, gpu())});
  expect_gradcheck("mse_loss sum", [](auto& in) { return mse_loss(in[0], in[1], Reduction::Sum); },
                   {leaf({2, 3}, gpu()), leaf({2, 3}, gpu())});
  expect_gradcheck("cross_entropy scaled", [&](auto& in) { return cross_entropy(in[0], target) * 3.0; }, {leaf({4, 5}, gpu())});
}

TEST(CudaOps, GradcheckConvolutionAndPooling) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  expect_gradcheck("conv2d", [](auto& in) { return conv2d(in[0], in[1], in[2]); },
                   {leaf({2, 2, 5, 4}, gpu()), leaf({3, 2, 3, 2}, gpu()), leaf({3}, gpu())});
  expect_gradcheck("conv2d stride 2 padding 1", [](auto& in) { return conv2d(in[0], in[1], in[2], 2, 1); },
                   {leaf({1, 2, 5, 5}, gpu()), leaf({2, 2, 3, 3}, gpu()), leaf({2}, gpu())});
  expect_gradcheck("conv2d dilation 2, stride (2, 1), padding (1, 2)",
                   [](auto& in) { return conv2d(in[0], in[1], Tensor(), {2, 1}, {1, 2}, 2); },
                   {leaf({2, 1, 6, 5}, gpu()), leaf({2, 1, 2, 3}, gpu())});
  expect_gradcheck("im2col", [](auto& in) { return im2col(in[0], {2, 3}, {1, 2}, 1, 1); }, {leaf({1, 2, 4, 5}, gpu())});
  expect_gradcheck("col2im", [](auto& in) { return col2im(in[0], {4, 5}, {2, 3}, {1, 2}, 1, 1); },
                   {leaf({1, 12, 5 * 3}, gpu())});
  expect_gradcheck("max_pool2d", [](auto& in) { return max_pool2d(in[0], 2); }, {leaf({2, 2, 4, 6}, gpu())});
  expect_gradcheck("max_pool2d overlapping, padded", [](auto& in) { return max_pool2d(in[0], 3, 2, 1); },
                   {leaf({1, 2, 5, 6}, gpu())});
}

TEST(CudaOps, GradcheckDropoutAndDeviceMoves) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // The same seed before every evaluation gives the same mask: a fixed, differentiable function.
  expect_gradcheck("dropout (fixed mask)",
                   [](auto& in) {
                     manual_seed(1234);
                     return dropout(in[0], 0.4, true);
                   },
                   {leaf({6, 7}, gpu())});
  // to(device) itself: cpu -> cuda and back, inside the function.
  Tensor host = randn({3, 4}, kFloat64).requires_grad_();
  expect_gradcheck("to(cuda)", [](auto& in) { return mul(in[0].to(gpu()), in[0].to(gpu())); }, {host});
  expect_gradcheck("to(cpu)", [](auto& in) { return exp(in[0]).to(Device::cpu()); }, {leaf({2, 3}, gpu())});
}

// A whole CNN step in float32 through the public ops, on both devices from the same weights.
TEST(CudaOps, CnnStepMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor x = randn({8, 1, 28, 28});
  std::vector<int64_t> labels;
  for (int i = 0; i < 8; ++i) labels.push_back(i % 10);
  Tensor target = Tensor::from_vector(labels);
  std::vector<Tensor> params = {randn({8, 1, 3, 3}) * 0.3, randn({8}) * 0.1, randn({16, 8, 3, 3}) * 0.1,
                                randn({16}) * 0.1, randn({10, 16 * 12 * 12}) * 0.02, randn({10}) * 0.1};
  auto step = [&](Device d) {
    std::vector<Tensor> p;
    for (const Tensor& t : params) p.push_back(t.detach().to(d).requires_grad_());
    Tensor h = relu(conv2d(x.to(d), p[0], p[1]));
    h = relu(conv2d(h, p[2], p[3]));
    h = max_pool2d(h, 2).flatten(1);
    Tensor loss = cross_entropy(linear(h, p[4], p[5]), target.to(d));
    loss.backward();
    std::vector<Tensor> out = {loss};
    for (const Tensor& t : p) out.push_back(t.grad());
    return out;
  };
  std::vector<Tensor> cpu = step(Device::cpu()), cuda = step(gpu());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(all_close(cuda[i], cpu[i], 1e-3, 1e-3)) << "output " << i;
}

TEST(CudaOps, DeviceMovesRoundTrip) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor f = randn({5, 7});
  Tensor d = randn({3, 3}, kFloat64);
  Tensor i = Tensor::from_vector<int64_t>({1, -2, 3, 1LL << 40});
  for (const Tensor& t : {f, d, i}) {
    Tensor g = t.to(gpu());
    EXPECT_EQ(g.device(), gpu());
    EXPECT_EQ(g.dtype(), t.dtype());
    EXPECT_TRUE(all_equal(g.to(Device::cpu()), t));
  }
  // Non-contiguous sources, and dtype changes on the device.
  EXPECT_TRUE(all_equal(f.t().to(gpu()), f.t().contiguous()));
  EXPECT_TRUE(all_equal(f.to(gpu()).t().to(Device::cpu()), f.t().contiguous()));
  EXPECT_TRUE(all_close(f.to(gpu()).to(kFloat64), f.to(kFloat64), 0, 0));
  // Between GPUs, where there are several.
  if (cuda::device_count() > 1) {
    Tensor g1 = f.to(gpu()).to(Device::cuda(1));
    EXPECT_EQ(g1.device(), Device::cuda(1));
    EXPECT_TRUE(all_equal(g1.to(Device::cpu()), f));
    EXPECT_TRUE(all_close((g1 * 2.0).to(Device::cuda(0)), f * 2.0, 0, 0));
  }
}

TEST(CudaOps, PinnedTransferIsOrderedBeforeLaterWork) {
  MINIDL_REQUIRE_CUDA();
  const int64_t n = 1 << 16;
  for (int i = 0; i < 12; ++i) {
    Tensor host = full({n}, static_cast<double>(i), kFloat32);
    Tensor dev = cuda::to_device_pinned(host, gpu());
    host = full({n}, -1.0);  // the host buffer may change at once
    EXPECT_EQ(dev.device(), gpu());
    EXPECT_EQ(dev.sum().item<float>(), static_cast<float>(i * n)) << "batch " << i;
  }
  EXPECT_TRUE(all_equal(cuda::to_device_pinned(Tensor::from_vector<int64_t>({4, 5, 6}), gpu()), Tensor::from_vector<int64_t>({4, 5, 6})));
  EXPECT_THROW(cuda::to_device_pinned(ones({2}).to(gpu()), gpu()), Error);
}

TEST(CudaOps, DeviceMismatchNamesBothDevices) {
  MINIDL_REQUIRE_CUDA();
  Tensor a = ones({2, 2}), b = ones({2, 2}, kFloat32, gpu());
  for (auto [name, f] : std::initializer_list<std::pair<const char*, std::function<Tensor()>>>{
           {"add", [&] { return add(a, b); }},
           {"matmul", [&] { return matmul(b, a); }},
           {"linear", [&] { return linear(a, b); }},
           {"conv2d", [&] { return conv2d(ones({1, 1, 3, 3}), ones({1, 1, 2, 2}, kFloat32, gpu())); }},
           {"cross_entropy", [&] { return cross_entropy(b, Tensor::from_vector<int64_t>({0, 1})); }}}) {
    try {
      f();
      ADD_FAILURE() << name << ": no error for tensors on cpu and cuda:0";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
      EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
    }
  }
}

TEST(CudaOps, KernelFoundErrorsSurfaceAtTheNextSync) {
  MINIDL_REQUIRE_CUDA();
  Tensor logits = randn({4, 10}, kFloat32, gpu());
  Tensor bad = Tensor::from_vector<int64_t>({1, 2, 10, 3}).to(gpu());
  Tensor loss = cross_entropy(logits, bad);  // queued; no host sync
  try {
    loss.item<float>();
    ADD_FAILURE() << "a target out of range went unreported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cross_entropy on cuda:0: target 10 of sample 2 is out of range"),
              std::string::npos)
        << e.what();
  }
  // The flag was cleared: the device works on.
  EXPECT_NO_THROW(cross_entropy(logits, Tensor::from_vector<int64_t>({1, 2, 9, 3}).to(gpu())).item<float>());
  Tensor rows = randn({5, 3}, kFloat32, gpu());
  Tensor picked = index_select(rows, Tensor::from_vector<int64_t>({0, 7}).to(gpu()));
  try {
    picked.to_vector<float>();
    ADD_FAILURE() << "an index out of range went unreported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index_select on cuda:0: index 7 at position 1 is out of range "
                                         "(expected 0 <= index < 5)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(index_select(rows, Tensor::from_vector<int64_t>({4, 0}).to(gpu())).to_vector<float>());
}

TEST(CudaOps, DeviceQueries) {
  MINIDL_REQUIRE_CUDA();
  ASSERT_GE(cuda::device_count(), 1);
  cuda::DeviceProperties p = cuda::device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.major, 5);
  EXPECT_GT(p.total_memory, size_t{1} << 30);
  EXPECT_GT(p.multiprocessor_count, 0);
  cuda::set_device(0);
  EXPECT_EQ(cuda::current_device(), 0);
  cuda::synchronize();
  try {
    cuda::set_device(cuda::device_count());
    ADD_FAILURE() << "set_device past the last device did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:" + std::to_string(cuda::device_count())), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::empty({2}, kFloat32, Device::cuda(cuda::device_count())), Error);
}

// Runs everywhere: where CUDA is unusable, asking for it fails with the reason and what to do.
TEST(CudaOps, UnavailableCudaFailsWithTheReason) {
  if (cuda::is_available()) GTEST_SKIP() << "CUDA is usable here; this test covers machines without it";
  const std::string reason = cuda::unavailable_reason();
  EXPECT_FALSE(reason.empty());
  EXPECT_NE(reason.find("--device cpu"), std::string::npos) << reason;
  EXPECT_EQ(cuda::device_count(), 0);
  try {
    ones({2}, kFloat32, Device::cuda());
    ADD_FAILURE() << "a CUDA tensor was made without a usable device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(CudaOps, ConvBackendSetting) {
  const ConvBackend before = conv_backend();
  EXPECT_EQ(parse_conv_backend("cudnn"), ConvBackend::Cudnn);
  EXPECT_EQ(parse_conv_backend("im2col"), ConvBackend::Im2col);
  EXPECT_THROW(parse_conv_backend("winograd"), Error);
  set_conv_backend(ConvBackend::Cudnn);
  EXPECT_EQ(conv_backend(), ConvBackend::Cudnn);
  EXPECT_STREQ(conv_backend_name(conv_backend()), "cudnn");
  set_conv_backend(before);
  // A limit set applies op by op and in a graph alike; the defaults differ (unless the environment
  // sets one).
  set_conv_workspace_limit(size_t{64} << 20);
  EXPECT_EQ(conv_workspace_limit(false), size_t{64} << 20);
  EXPECT_EQ(conv_workspace_limit(true), size_t{64} << 20);
  set_conv_workspace_limit(SIZE_MAX);
  EXPECT_EQ(conv_workspace_limit(false), SIZE_MAX);
  EXPECT_EQ(conv_workspace_limit(true), SIZE_MAX);
  reset_conv_workspace_limit();
  if (!std::getenv("MINIDL_CONV_WORKSPACE_MB")) {
    EXPECT_EQ(conv_workspace_limit(false), size_t{32} << 20);
    EXPECT_EQ(conv_workspace_limit(true), SIZE_MAX);
  }
  // The CPU has no cuDNN path: its kernels decline.
  Tensor x = ones({1, 1, 3, 3}), w = ones({1, 1, 2, 2}), out = Tensor::empty({1, 1, 2, 2});
  ConvGeometry g{1, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 2, 2};
  EXPECT_FALSE(kernels_for(Device::cpu()).conv2d_cudnn(x, w, nullptr, g, out));
}

// The attention switch parses its three names and refuses others, naming them; on the CPU, which has
// no library attention, every setting runs the CPU kernel and gives the same result.
TEST(CudaOps, AttentionBackendSetting) {
  const AttentionBackend before = attention_backend();
  EXPECT_EQ(parse_attention_backend("auto"), AttentionBackend::Auto);
  EXPECT_EQ(parse_attention_backend("minidl"), AttentionBackend::Minidl);
  EXPECT_EQ(parse_attention_backend("cudnn"), AttentionBackend::Cudnn);
  expect_error([] { parse_attention_backend("flash"); }, {"auto", "minidl", "cudnn", "flash"});
  manual_seed(3);
  const Tensor q = randn({2, 3, 9, 16}), k = randn({2, 3, 11, 16}), v = randn({2, 3, 11, 16});
  set_attention_backend(AttentionBackend::Minidl);
  EXPECT_EQ(attention_backend(), AttentionBackend::Minidl);
  const Tensor minidl_out = scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  set_attention_backend(AttentionBackend::Cudnn);
  EXPECT_FALSE(kernels_for(Device::cpu()).library_attention_supports(q, k, v, 0.0));
  EXPECT_TRUE(all_equal(scaled_dot_product_attention(q, k, v, {}, 0.0, true), minidl_out));
  set_attention_backend(before);
}

// Auto with a workspace limit of 0: cuDNN's algorithms without workspace (im2col's columns are over
// the limit too), the same results, and the log line says what was picked. Without the limit, the
// MNIST CNN's second convolution at a batch no other test measures must pick a path with workspace
// (on an H200 cuDNN's took 31/34/60 MB at batch 64; in strict float32 our Winograd weight gradient's
// slices about 10 MB at batch 96), or the limit would have changed nothing here.
TEST(CudaOps, ConvWorkspaceLimitBoundsAutosChoice) {
  MINIDL_REQUIRE_CUDNN();
  MINIDL_FRESH_SEED();
  Tensor x = randn({64, 24, 22, 22}), w = randn({40, 24, 3, 3}), b = randn({40});
  ConvBackendScope backend(ConvBackend::Im2col);
  Tensor xr = x.to(gpu()).requires_grad_(), wr = w.to(gpu()).requires_grad_();
  Tensor ref = conv2d(xr, wr, b.to(gpu()));
  Tensor g = randn(ref.shape()).to(gpu());
  ref.backward(g);

  set_conv_backend(ConvBackend::Auto);
  set_conv_workspace_limit(0);
  ::testing::internal::CaptureStderr();
  Tensor xa = x.to(gpu()).requires_grad_(), wa = w.to(gpu()).requires_grad_();
  Tensor y = conv2d(xa, wa, b.to(gpu()));
  y.backward(g);
  cuda::synchronize();
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_conv_workspace_limit(SIZE_MAX);
  ::testing::internal::CaptureStderr();
  conv2d(randn({96, 32, 26, 26}).to(gpu()).requires_grad_(), randn({64, 32, 3, 3}).to(gpu()).requires_grad_(),
         randn({64}).to(gpu()))
      .sum()
      .backward();
  cuda::synchronize();
  const std::string unlimited = ::testing::internal::GetCapturedStderr();
  reset_conv_workspace_limit();
  EXPECT_NE(unlimited.find("[96, 32, 26, 26] * [64, 32, 3, 3]: cuDNN ("), std::string::npos) << unlimited;
  EXPECT_EQ(unlimited.find("with 0/0/0 MB of workspace"), std::string::npos) << unlimited;
  EXPECT_NE(log.find("[64, 24, 22, 22] * [40, 24, 3, 3]: cuDNN ("), std::string::npos) << log;
  EXPECT_NE(log.find("with 0/0/0 MB of workspace"), std::string::npos) << log;
  EXPECT_TRUE(all_close(y, ref, 1e-3, 1e-3));
  EXPECT_TRUE(all_close(xa.grad(), xr.grad(), 1e-3, 1e-3));
  EXPECT_TRUE(all_close(wa.grad(), wr.grad(), 1e-3, 1e-3));
}

// By default a convolution run op by op keeps each pass within 32 MB of workspace, while one
// captured into a CUDA graph takes the fastest algorithms of any workspace: the MNIST CNN's second
// convolution (here at a batch larger than any other test's, so that none lends it its choice) has
// faster ones with more (on an H200 about 31/51/60 MB at batch 64), so the measurement logs a line
// for each mode. The graph, replayed, gives
// what the convolution gave op by op.
TEST(CudaOps, ConvWorkspaceLimitsOpByOpAndInAGraph) {
  MINIDL_REQUIRE_CUDNN();
  if (std::getenv("MINIDL_CONV_WORKSPACE_MB")) GTEST_SKIP() << "MINIDL_CONV_WORKSPACE_MB sets one limit for both";
  MINIDL_FRESH_SEED();
  reset_conv_workspace_limit();
  ConvBackendScope backend(ConvBackend::Auto);
  const Tensor x = randn({120, 32, 26, 26}).to(gpu()), w = randn({64, 32, 3, 3}).to(gpu()), b = randn({64}).to(gpu());
  const Tensor g = randn({120, 64, 24, 24}).to(gpu());
  ::testing::internal::CaptureStderr();
  Tensor xe = x.clone().requires_grad_(), we = w.clone().requires_grad_();
  Tensor ye = conv2d(xe, we, b);
  ye.backward(g);
  cuda::synchronize();
  const std::string log = ::testing::internal::GetCapturedStderr();

  const std::regex op_by_op(R"(\[120, 32, 26, 26\] \* \[64, 32, 3, 3\] op by op: cuDNN \(cuDNN algorithms \d+/\d+/\d+ )"
                            R"([0-9.]+ ms with (\d+)/(\d+)/(\d+) MB of workspace)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, op_by_op)) << log;
  for (int pass = 1; pass <= 3; ++pass) EXPECT_LE(std::stoi(m[pass].str()), 32) << log;
  EXPECT_NE(log.find("[120, 32, 26, 26] * [64, 32, 3, 3] in a CUDA graph: "), std::string::npos) << log;

  cuda::Graph graph;
  Tensor xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_();
  graph.capture_begin();
  Tensor yg = conv2d(xg, wg, b);
  yg.backward(g);
  graph.capture_end();
  graph.replay();
  cuda::synchronize();
  EXPECT_TRUE(all_close(yg, ye, 1e-3, 1e-3));
  EXPECT_TRUE(all_close(xg.grad(), xe.grad(), 1e-3, 1e-3));
  EXPECT_TRUE(all_close(wg.grad(), we.grad(), 1e-3, 1e-3));
}

// Auto times the backward as the op runs it: without the input's gradient where the input needs
// none (a network's first layer), and keeps that verdict apart from the one with it.
TEST(CudaOps, ConvAutoTimesTheGradientsTheOpComputes) {
  MINIDL_REQUIRE_CUDNN();
  MINIDL_FRESH_SEED();
  Tensor x = randn({32, 3, 20, 20}), w = randn({16, 3, 3, 3}), g = randn({32, 16, 18, 18});
  ConvBackendScope backend(ConvBackend::Im2col);
  Tensor wr = w.to(gpu()).requires_grad_();
  conv2d(x.to(gpu()), wr).backward(g.to(gpu()));

  set_conv_backend(ConvBackend::Auto);
  ::testing::internal::CaptureStderr();
  Tensor wa = w.to(gpu()).requires_grad_();
  conv2d(x.to(gpu()), wa).backward(g.to(gpu()));
  cuda::synchronize();
  const std::string first_layer = ::testing::internal::GetCapturedStderr();
  ::testing::internal::CaptureStderr();
  Tensor xb = x.to(gpu()).requires_grad_(), wb = w.to(gpu()).requires_grad_();
  conv2d(xb, wb).backward(g.to(gpu()));
  cuda::synchronize();
  const std::string inner_layer = ::testing::internal::GetCapturedStderr();
  const std::string shape = "[32, 3, 20, 20] * [16, 3, 3, 3]: ";
  EXPECT_NE(first_layer.find(shape), std::string::npos) << first_layer;
  EXPECT_NE(first_layer.find("forward and the weight's gradient"), std::string::npos) << first_layer;
  EXPECT_NE(inner_layer.find(shape), std::string::npos) << inner_layer;
  EXPECT_NE(inner_layer.find("forward and backward"), std::string::npos) << inner_layer;
  EXPECT_TRUE(all_close(wa.grad(), wr.grad(), 1e-3, 1e-3));
  EXPECT_TRUE(all_close(wb.grad(), wr.grad(), 1e-3, 1e-3));
  EXPECT_TRUE(xb.grad().defined());
}

// cuDNN against im2col + GEMM (and the CPU), forward and backward, float32 and float64.
TEST(CudaOps, CudnnMatchesIm2col) {
  MINIDL_REQUIRE_CUDNN();
  MINIDL_FRESH_SEED();
  ConvBackendScope backend(ConvBackend::Im2col);
  Kernels& k = kernels_for(gpu());
  struct Case {
    Shape x, w;
    Size2 stride, padding, dilation;
  };
  const Case cases[] = {{{4, 1, 28, 28}, {8, 1, 3, 3}, 1, 0, 1},
                        {{2, 3, 9, 7}, {4, 3, 3, 2}, {2, 1}, {1, 0}, 1},
                        {{2, 2, 9, 9}, {3, 2, 3, 3}, 1, 2, 2}};
  for (DType dt : {kFloat32, kFloat64}) {
    const double t = dt == kFloat32 ? 1e-3 : 1e-9;
    for (const Case& c : cases) {
      Tensor x = randn(c.x, dt), w = randn(c.w, dt), b = randn({c.w[0]}, dt);
      // Reference: the op through im2col, with gradients.
      set_conv_backend(ConvBackend::Im2col);
      Tensor xr = x.to(gpu()).requires_grad_(), wr = w.to(gpu()).requires_grad_(), br = b.to(gpu()).requires_grad_();
      Tensor ref = conv2d(xr, wr, br, c.stride, c.padding, c.dilation);
      Tensor g = randn(ref.shape(), dt).to(gpu());
      ref.backward(g);
      // cuDNN kernels directly.
      ConvGeometry geo{};
      geo.channels = c.x[1], geo.height = c.x[2], geo.width = c.x[3], geo.kernel_h = c.w[2], geo.kernel_w = c.w[3];
      geo.stride_h = c.stride.h, geo.stride_w = c.stride.w, geo.pad_h = c.padding.h, geo.pad_w = c.padding.w;
      geo.dilation_h = c.dilation.h, geo.dilation_w = c.dilation.w, geo.out_h = ref.size(2), geo.out_w = ref.size(3);
      Tensor xg = x.to(gpu()), wg = w.to(gpu()), bg = b.to(gpu());
      Tensor out = Tensor::empty(ref.shape(), dt, gpu());
      ASSERT_TRUE(k.conv2d_cudnn(xg, wg, &bg, geo, out));
      EXPECT_TRUE(all_close(out, ref, t, t)) << "forward " << shape_str(c.x);
      Tensor gx = Tensor::empty(x.shape(), dt, gpu()), gw = Tensor::empty(w.shape(), dt, gpu()),
             gb = Tensor::empty(b.shape(), dt, gpu());
      ASSERT_TRUE(k.conv2d_backward_cudnn(g, xg, wg, geo, &gx, &gw, &gb));
      EXPECT_TRUE(all_close(gx, xr.grad(), t, t)) << "grad x " << shape_str(c.x);
      EXPECT_TRUE(all_close(gw, wr.grad(), t, t)) << "grad w " << shape_str(c.x);
      EXPECT_TRUE(all_close(gb, br.grad(), t, t)) << "grad b " << shape_str(c.x);
      // And the op with the setting switched (takes the cuDNN path once the op has its branch).
      set_conv_backend(ConvBackend::Cudnn);
      Tensor xc = x.to(gpu()).requires_grad_(), wc = w.to(gpu()).requires_grad_(), bc = b.to(gpu()).requires_grad_();
      Tensor y = conv2d(xc, wc, bc, c.stride, c.padding, c.dilation);
      y.backward(g);
      EXPECT_TRUE(all_close(y, ref, t, t));
      EXPECT_TRUE(all_close(xc.grad(), xr.grad(), t, t));
      EXPECT_TRUE(all_close(wc.grad(), wr.grad(), t, t));
      EXPECT_TRUE(all_close(bc.grad(), br.grad(), t, t));
    }
    // Pooling: MNIST's 2x2, and overlapping padded windows.
    for (auto [kernel, stride, padding] : {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}}) {
      Tensor x = randn({3, 4, 12, 11}, dt);
      set_conv_backend(ConvBackend::Im2col);
      Tensor xr = x.to(gpu()).requires_grad_();
      Tensor ref = max_pool2d(xr, kernel, stride, padding);
      Tensor g = randn(ref.shape(), dt).to(gpu());
      ref.backward(g);
      ConvGeometry geo{4, 12, 11, kernel, kernel, stride, stride, padding, padding, 1, 1, ref.size(2), ref.size(3)};
      Tensor xg = x.to(gpu());
      Tensor out = Tensor::empty(ref.shape(), dt, gpu());
      ASSERT_TRUE(k.max_pool2d_cudnn(xg, geo, out));
      EXPECT_TRUE(all_close(out, ref, 0, 0)) << "pool forward k" << kernel;
      Tensor gi = Tensor::empty(x.shape(), dt, gpu());
      ASSERT_TRUE(k.max_pool2d_backward_cudnn(g, xg, out, geo, gi));
      EXPECT_TRUE(all_close(gi, xr.grad(), t, t)) << "pool backward k" << kernel;
      set_conv_backend(ConvBackend::Cudnn);
      Tensor xc = x.to(gpu()).requires_grad_();
      Tensor y = max_pool2d(xc, kernel, stride, padding);
      y.backward(g);
      EXPECT_TRUE(all_close(y, ref, 0, 0));
      EXPECT_TRUE(all_close(xc.grad(), xr.grad(), t, t));
    }
  }
}

}  // namespace minidl::cuda_ops_test
