// cuDNN's RNN against the composed path (the same ops the CPU runs) on the same weights and inputs:
// outputs, h_n, c_n and every gradient, for LSTM, GRU and both RNNs, multi-layer, bidirectional and
// batch_first; the CUDA result against the CPU's; float64 gradcheck on CUDA.
#include <gtest/gtest.h>

#include "nn/nn.h"
#include "ops/rnn.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::cuda_rnn_test {

namespace {

using testing::all_close;
using testing::gpu;

using RnnBackendScope = testing::SettingScope<RnnBackend, rnn_backend, set_rnn_backend>;

enum class Kind { Tanh, Relu, Lstm, Gru };

struct Config {
  Kind kind;
  int64_t L, N, I, H, layers;
  bool bidirectional, batch_first, bias;
};

std::shared_ptr<nn::detail::RNNImplBase> make(const Config& c) {
  switch (c.kind) {
    case Kind::Lstm:
      return nn::LSTM(nn::LSTMOptions(c.I, c.H)
                          .num_layers(c.layers)
                          .bidirectional(c.bidirectional)
                          .batch_first(c.batch_first)
                          .bias(c.bias))
          .ptr();
    case Kind::Gru:
      return nn::GRU(nn::GRUOptions(c.I, c.H)
                         .num_layers(c.layers)
                         .bidirectional(c.bidirectional)
                         .batch_first(c.batch_first)
                         .bias(c.bias))
          .ptr();
    default: {
      nn::RNNOptions o(c.I, c.H);
      o.num_layers(c.layers).bidirectional(c.bidirectional).batch_first(c.batch_first).bias(c.bias);
      if (c.kind == Kind::Relu) o.nonlinearity(kReLU);
      return nn::RNN(o).ptr();
    }
  }
}

// Outputs (output, h_n, c_n) then gradients (x, h_0, c_0, each parameter) of one run, for the loss
// sum(out * gy) + sum(h_n * gh) + sum(c_n * gc) with fixed random weights gy, gh, gc.
struct Run {
  std::vector<Tensor> results;
};

Run run(const Config& c, nn::detail::RNNImplBase& m, const Tensor& x0, const Tensor& h00, const Tensor& c00,
        const std::vector<Tensor>& weights) {
  m.zero_grad();
  Tensor x = x0.detach().requires_grad_(), h0 = h00.detach().requires_grad_(), c0 = c00.detach().requires_grad_();
  Tensor out, h, cell;
  if (c.kind == Kind::Lstm) {
    auto [o, state] = static_cast<nn::LSTMImpl&>(m).forward(x, std::make_tuple(h0, c0));
    out = o;
    std::tie(h, cell) = state;
  } else if (c.kind == Kind::Gru) {
    std::tie(out, h) = static_cast<nn::GRUImpl&>(m).forward(x, h0);
  } else {
    std::tie(out, h) = static_cast<nn::RNNImpl&>(m).forward(x, h0);
  }
  Tensor loss = sum(out * weights[0]) + sum(h * weights[1]);
  if (cell.defined()) loss = loss + sum(cell * weights[2]);
  loss.backward();
  Run r;
  r.results = {out, h, x.grad(), h0.grad()};
  if (cell.defined()) r.results.insert(r.results.end(), {cell, c0.grad()});
  for (const Tensor& p : m.parameters()) r.results.push_back(p.grad());
  return r;
}

void compare(const Config& c, DType dtype, double atol, double rtol) {
  auto m = make(c);
  m->to(gpu());
  m->to(dtype);
  const int64_t D = c.bidirectional ? 2 : 1;
  const Shape x_shape = c.batch_first ? Shape{c.N, c.L, c.I} : Shape{c.L, c.N, c.I};
  const Shape y_shape = c.batch_first ? Shape{c.N, c.L, D * c.H} : Shape{c.L, c.N, D * c.H};
  const Shape h_shape{c.layers * D, c.N, c.H};
  Tensor x = randn(x_shape, dtype, gpu()), h0 = randn(h_shape, dtype, gpu()), c0 = randn(h_shape, dtype, gpu());
  const std::vector<Tensor> weights{randn(y_shape, dtype, gpu()), randn(h_shape, dtype, gpu()),
                                    randn(h_shape, dtype, gpu())};
  Run cudnn_run, composed_run;
  {
    RnnBackendScope scope(RnnBackend::Cudnn);
    cudnn_run = run(c, *m, x, h0, c0, weights);
  }
  {
    RnnBackendScope scope(RnnBackend::Composed);
    composed_run = run(c, *m, x, h0, c0, weights);
  }
  ASSERT_EQ(cudnn_run.results.size(), composed_run.results.size());
  const auto names = m->named_parameters();
  for (size_t i = 0; i < cudnn_run.results.size(); ++i) {
    const size_t fixed = c.kind == Kind::Lstm ? 6 : 4;
    const std::string what = i < fixed ? std::vector<std::string>{"output", "h_n", "x.grad", "h_0.grad", "c_n",
                                                                   "c_0.grad"}[i]
                                       : names[i - fixed].first + ".grad";
    ASSERT_TRUE(cudnn_run.results[i].defined()) << what;
    EXPECT_TRUE(all_close(cudnn_run.results[i], composed_run.results[i], atol, rtol)) << what;
  }
}

const std::vector<Config> kConfigs{
    {Kind::Lstm, 5, 3, 4, 6, 2, true, false, true}, {Kind::Lstm, 4, 2, 3, 5, 1, false, true, false},
    {Kind::Gru, 5, 3, 4, 6, 2, true, true, true},   {Kind::Gru, 3, 4, 2, 3, 3, false, false, true},
    {Kind::Tanh, 5, 3, 4, 6, 2, true, false, true}, {Kind::Relu, 5, 3, 4, 6, 2, true, true, true},
};

TEST(CudaRnn, CudnnMatchesComposedFloat32) {
  MINIDL_REQUIRE_CUDNN();
  MINIDL_FRESH_SEED();
  for (const Config& c : kConfigs) {
    SCOPED_TRACE("config kind " + std::to_string(static_cast<int>(c.kind)) + " layers " + std::to_string(c.layers));
    compare(c, kFloat32, 1e-4, 1e-3);
  }
}

TEST(CudaRnn, CudnnMatchesComposedFloat64) {
  MINIDL_REQUIRE_CUDNN();
  MINIDL_FRESH_SEED();
  for (const Config& c : kConfigs) {
    SCOPED_TRACE("config kind " + std::to_string(static_cast<int>(c.kind)) + " layers " + std::to_string(c.layers));
    compare(c, kFloat64, 1e-10, 1e-8);
  }
}

TEST(CudaRnn, CudaMatchesCpuAndInference) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  nn::LSTM cpu(nn::LSTMOptions(4, 5).num_layers(2).bidirectional(true).batch_first(true));
  nn::LSTM cuda(nn::LSTMOptions(4, 5).num_layers(2).bidirectional(true).batch_first(true));
  cuda->load_state_dict(cpu->state_dict());
  cuda->to(gpu());
  Tensor x = randn({3, 6, 4});
  NoGradGuard no_grad;  // cuDNN's inference mode
  auto [out_cpu, state_cpu] = cpu(x);
  auto [out_gpu, state_gpu] = cuda(x.to(gpu()));
  EXPECT_TRUE(all_close(out_gpu, out_cpu, 1e-4, 1e-3));
  EXPECT_TRUE(all_close(std::get<0>(state_gpu), std::get<0>(state_cpu), 1e-4, 1e-3));
  EXPECT_TRUE(all_close(std::get<1>(state_gpu), std::get<1>(state_cpu), 1e-4, 1e-3));
  nn::GRU gcpu(nn::GRUOptions(4, 5)), ggpu(nn::GRUOptions(4, 5));
  ggpu->load_state_dict(gcpu->state_dict());
  ggpu->to(gpu());
  Tensor unbatched = randn({6, 4});
  EXPECT_TRUE(all_close(std::get<0>(ggpu(unbatched.to(gpu()))), std::get<0>(gcpu(unbatched)), 1e-4, 1e-3));
}

TEST(CudaRnn, GradcheckFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // Auto: cuDNN where it runs float64, the composed ops otherwise; then the composed ops on CUDA.
  for (const RnnBackend backend : {RnnBackend::Auto, RnnBackend::Composed}) {
    RnnBackendScope scope(backend);
    nn::LSTM m(nn::LSTMOptions(2, 2).num_layers(2).bidirectional(true));
    m->to(gpu());
    m->to(kFloat64);
    std::vector<Tensor> in{randn({3, 2, 2}, kFloat64, gpu()), randn({4, 2, 2}, kFloat64, gpu()),
                           randn({4, 2, 2}, kFloat64, gpu())};
    for (const Tensor& p : m->parameters()) in.push_back(p.detach().clone());
    for (Tensor& t : in) t.requires_grad_();
    auto r = gradcheck(
        [](const std::vector<Tensor>& v) {
          const std::vector<Tensor> params(v.begin() + 3, v.end());
          auto [out, h, c] = lstm(v[0], {v[1], v[2]}, params, true, 2, 0.0, true, true, false);
          return cat({out.flatten(), h.flatten(), c.flatten()});
        },
        in);
    EXPECT_TRUE(r) << r.message;
    // batch_first: input [N = 3, L = 2, I = 2], so h_0 is [layers, N, H] = [1, 3, 3].
    std::vector<Tensor> gin{randn({3, 2, 2}, kFloat64, gpu()), randn({1, 3, 3}, kFloat64, gpu()),
                            randn({9, 2}, kFloat64, gpu()), randn({9, 3}, kFloat64, gpu()), randn({9}, kFloat64, gpu()),
                            randn({9}, kFloat64, gpu())};
    for (Tensor& t : gin) t.requires_grad_();
    r = gradcheck(
        [](const std::vector<Tensor>& v) {
          auto [out, h] = gru(v[0], v[1], {v[2], v[3], v[4], v[5]}, true, 1, 0.0, true, false, true);
          return cat({out.flatten(), h.flatten()});
        },
        gin);
    EXPECT_TRUE(r) << r.message;
  }
}

TEST(CudaRnn, SecondBackwardWithRetainedGraphAgrees) {
  MINIDL_REQUIRE_CUDNN();
  MINIDL_FRESH_SEED();
  RnnBackendScope scope(RnnBackend::Cudnn);
  nn::GRU m(nn::GRUOptions(3, 4).num_layers(2));
  m->to(gpu());
  Tensor x = randn({5, 2, 3}, kFloat32, gpu()).requires_grad_();
  Tensor loss = sum(std::get<0>(m(x)));
  loss.backward(Tensor(), true);
  Tensor first = x.grad().clone();
  Tensor w_first = m->parameters()[0].grad().clone();
  m->zero_grad();
  x.set_grad(Tensor());
  loss.backward();
  // The same gradients again (the reserve the first backward wrote into was a copy), up to the
  // order of cuDNN's weight-gradient sums.
  EXPECT_TRUE(all_close(x.grad(), first, 1e-6, 1e-5));
  EXPECT_TRUE(all_close(m->parameters()[0].grad(), w_first, 1e-6, 1e-5));
}

TEST(CudaRnn, DropoutBetweenLayersInTraining) {
  MINIDL_REQUIRE_CUDNN();
  nn::LSTM m(nn::LSTMOptions(3, 4).num_layers(2).dropout(0.3));
  m->to(gpu());
  Tensor x = randn({5, 2, 3}, kFloat32, gpu());
  {
    RnnBackendScope scope(RnnBackend::Auto);  // composes the training pass
    EXPECT_EQ(std::get<0>(m(x)).shape(), Shape({5, 2, 4}));
  }
  RnnBackendScope scope(RnnBackend::Cudnn);
  testing::expect_error([&] { m(x); }, {"lstm", "dropout"});
  m->eval();
  EXPECT_EQ(std::get<0>(m(x)).shape(), Shape({5, 2, 4}));
}

}  // namespace

}  // namespace minidl::cuda_rnn_test
