// Determinism: on the CPU the same seed gives bit-identical losses and weights whatever the thread
// count, because every kernel splits its work by the sizes alone (set_num_threads only decides who
// runs each piece). On CUDA, set_deterministic(true) makes two runs of the same steps bit-identical.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "minidl.h"
#include "nn/nn.h"
#include "ops/backend_setting.h"
#include "optim/optim.h"
#include "test_cuda_util.h"
#include "test_file_util.h"

namespace minidl::determinism_test {

namespace {

// Sizes chosen off every power of two and SIMD width, so that products split into uneven blocks and
// reach the edge paths of the GEMM.
nn::Sequential mlp() {
  return nn::Sequential(nn::Linear(100, 200), nn::ReLU(), nn::Dropout(0.2), nn::Linear(200, 70), nn::Tanh(),
                        nn::Linear(70, 10));
}

nn::Sequential cnn() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1)), nn::BatchNorm2d(16), nn::ReLU(),
                        nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 24, 3)), nn::ReLU(), nn::Flatten(),
                        nn::Linear(24 * 7 * 7, 10));
}

// Integers in [0, n) in a fixed scattered order: class targets, and indices with many repeats.
Tensor scattered(int64_t count, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = (i * 7919 + i / 3) % n;
  return Tensor::from_vector(v);
}

struct Run {
  std::vector<float> losses;
  testing::Snapshot weights;
};

// `steps` SGD steps (momentum, weight decay) on fixed random data, everything seeded by `seed`.
Run train(const std::function<nn::Sequential()>& make, const Shape& input, int steps, Device device, uint64_t seed) {
  manual_seed(seed);
  nn::Sequential model = make();
  model->to(device);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4));
  Tensor x = randn(input).to(device);
  Tensor target = scattered(input[0], 10).to(device);
  Run run;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model->forward(x), target);
    loss.backward();
    opt.step();
    run.losses.push_back(loss.item<float>());
  }
  run.weights = testing::snapshot(*model);
  return run;
}

// Bit patterns, so that a difference in the last place shows (and -0 differs from 0).
std::vector<uint32_t> bits(const std::vector<float>& values) {
  std::vector<uint32_t> out(values.size());
  std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
  return out;
}

class ThreadCount : public ::testing::Test {
 protected:
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = get_num_threads();
};

void expect_same_bits(const Run& run, const Run& reference) {
  EXPECT_EQ(bits(run.losses), bits(reference.losses));
  EXPECT_EQ(run.weights, reference.weights);
}

void expect_same_bits(const testing::Snapshot& run, const testing::Snapshot& reference) {
  EXPECT_EQ(run, reference);
}

// Runs run_once on 1 thread, then on 2, 3 and 4, each result the same bits as the first.
template <class RunOnce>
void expect_same_for_every_thread_count(const RunOnce& run_once) {
  set_num_threads(1);
  const auto reference = run_once();
  for (int threads : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(threads) + " threads against 1");
    set_num_threads(threads);
    expect_same_bits(run_once(), reference);
  }
}

TEST_F(ThreadCount, AnMlpTrainsBitIdenticallyOnOneToFourThreads) {
  expect_same_for_every_thread_count([] { return train(mlp, {50, 100}, 30, Device::cpu(), 7); });
}

TEST_F(ThreadCount, ACnnTrainsBitIdenticallyOnOneToFourThreads) {
  expect_same_for_every_thread_count([] { return train(cnn, {3, 3, 18, 18}, 20, Device::cpu(), 7); });
}

// A small GPT's step: the embedding and its backward (repeated token ids), pre-norm layer norms,
// causal attention, GELU, dropout, a sequence's cross-entropy, clipping by the global norm and AdamW.
// Sizes off powers of two, the activations past the CPU kernels' parallel grain (kParallelGrain,
// 32,768 elements), so that their kernels split the work across the threads.
struct TinyGpt : nn::Module {
  static constexpr int64_t kVocab = 53, kWidth = 72, kContext = 45;
  TinyGpt()
      : tokens(register_module("tokens", nn::Embedding(kVocab, kWidth))),
        block(register_module("block", nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(kWidth, 4)
                                                                       .dim_feedforward(4 * kWidth)
                                                                       .dropout(0.1)
                                                                       .activation("gelu")
                                                                       .batch_first(true)
                                                                       .norm_first(true)))),
        head(register_module("head", nn::Linear(kWidth, kVocab))) {}
  Tensor forward(const Tensor& ids) override {
    const Tensor mask = nn::generate_square_subsequent_mask(ids.size(1));
    return head->forward(block->forward(tokens->forward(ids), mask, {}, /*is_causal=*/true));
  }
  nn::Embedding tokens;
  nn::TransformerEncoderLayer block;
  nn::Linear head;
};

Run train_gpt(int steps) {
  manual_seed(3);
  auto model = std::make_shared<TinyGpt>();
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(3e-3));
  const int64_t batch = 14, context = TinyGpt::kContext;
  Tensor ids = scattered(batch * (context + 1), TinyGpt::kVocab).reshape({batch, context + 1});
  Tensor inputs = ids.slice(1, 0, context).contiguous(), targets = ids.slice(1, 1, context + 1).contiguous();
  Run run;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor logits = model->forward(inputs);
    Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, TinyGpt::kVocab}), targets.reshape({-1}));
    loss.backward();
    nn::utils::clip_grad_norm_(model->parameters(), 0.5);
    opt.step();
    run.losses.push_back(loss.item<float>());
  }
  run.weights = testing::snapshot(*model);
  return run;
}

TEST_F(ThreadCount, ASmallGptTrainsBitIdenticallyOnOneToFourThreads) {
  expect_same_for_every_thread_count([] { return train_gpt(6); });
}

// Kernels the three models do not reach, on sizes off powers of two and mostly past the parallel
// grain: the output and the input's gradient (of a random weighting of the output) must be the same
// bits on 1 to 4 threads.
struct KernelCase {
  const char* name;
  Shape input;
  std::function<Tensor(const Tensor&)> op;
};

testing::Snapshot output_and_gradient(const KernelCase& c) {
  manual_seed(5);
  Tensor x = randn(c.input).requires_grad_();
  Tensor y = c.op(x);
  mul(y, randn(y.shape())).sum().backward();
  return testing::snapshot(std::map<std::string, Tensor>{{"output", y.detach()}, {"gradient", x.grad()}});
}

TEST_F(ThreadCount, EachKernelGivesTheSameBitsOnOneToFourThreads) {
  manual_seed(9);
  const Tensor filter = randn({16, 8, 3, 3}), right = randn({7, 33, 51});
  const Tensor index = randint(37, {61, 700});
  nn::LSTM lstm(nn::LSTMOptions(20, 33));
  const std::vector<KernelCase> cases = {
      {"conv_transpose2d", {5, 16, 21, 21}, [&](const Tensor& x) { return conv_transpose2d(x, filter, {}, 2, 1); }},
      {"group_norm", {6, 24, 17, 17}, [](const Tensor& x) { return group_norm(x, 6); }},
      {"avg_pool2d", {6, 24, 17, 17}, [](const Tensor& x) { return avg_pool2d(x, 3, 2, 1); }},
      {"max_pool2d, overlapping", {6, 24, 17, 17}, [](const Tensor& x) { return max_pool2d(x, 3, 2, 1); }},
      {"upsample_nearest2d", {4, 8, 33, 33}, [](const Tensor& x) { return upsample_nearest2d(x, {50, 70}); }},
      {"LSTM", {45, 40, 20}, [&](const Tensor& x) { return std::get<0>(lstm->forward(x)); }},
      {"cumsum", {37, 1100}, [](const Tensor& x) { return cumsum(x, 1); }},
      {"log_softmax", {61, 700}, [](const Tensor& x) { return log_softmax(x, 1); }},
      {"sort", {61, 700}, [](const Tensor& x) { return std::get<0>(sort(x, 1)); }},
      {"topk", {61, 700}, [](const Tensor& x) { return std::get<0>(topk(x, 50, 1)); }},
      {"gather", {61, 700}, [&](const Tensor& x) { return gather(x, 1, index.slice(1, 0, 300)); }},
      {"scatter_add", {61, 700}, [&](const Tensor& x) { return scatter_add(zeros({61, 37}), 1, index, x); }},
      {"var over two dims", {37, 29, 41}, [](const Tensor& x) { return var(x, {0, 2}); }},
      {"bmm", {7, 45, 33}, [&](const Tensor& x) { return bmm(x, right); }},
  };
  for (const KernelCase& c : cases) {
    SCOPED_TRACE(c.name);
    expect_same_for_every_thread_count([&] { return output_and_gradient(c); });
  }
}

TEST(DeterministicMode, OffByDefaultAndSwitchable) {
  EXPECT_FALSE(is_deterministic());
  set_deterministic(true);
  EXPECT_TRUE(is_deterministic());
  set_deterministic(false);
  EXPECT_FALSE(is_deterministic());
}

// ---- CUDA: two runs of the same steps, bit for bit, with set_deterministic(true) ----

class CudaDeterministic : public ::testing::Test {
 protected:
  void SetUp() override { set_deterministic(true); }
  void TearDown() override {
    set_deterministic(false);
    set_conv_backend(saved_backend_);
  }
  ConvBackend saved_backend_ = conv_backend();
};

void expect_two_runs_identical(const std::function<nn::Sequential()>& make, const Shape& input, int steps) {
  const Run first = train(make, input, steps, Device::cuda(), 11);
  const Run second = train(make, input, steps, Device::cuda(), 11);
  EXPECT_EQ(bits(second.losses), bits(first.losses));
  EXPECT_EQ(second.weights, first.weights);
}

TEST_F(CudaDeterministic, AnMlpTrainsBitIdenticallyTwice) {
  MINIDL_REQUIRE_CUDA();
  expect_two_runs_identical(mlp, {64, 100}, 20);
}

TEST_F(CudaDeterministic, ACnnTrainsBitIdenticallyTwiceOnEveryConvBackend) {
  MINIDL_REQUIRE_CUDA();
  for (ConvBackend backend : {ConvBackend::Auto, ConvBackend::Im2col, ConvBackend::Cudnn}) {
    SCOPED_TRACE(conv_backend_name(backend));
    set_conv_backend(backend);
    expect_two_runs_identical(cnn, {32, 3, 18, 18}, 10);
  }
}

// The backward of index_select adds every picked row back at its index; with repeated indices that
// is where atomics made the sums order-dependent. Many repeats of a few rows make a difference in
// the last bits all but certain without the deterministic path.
TEST_F(CudaDeterministic, IndexSelectBackwardWithRepeatedIndicesIsBitIdentical) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(5);
  Tensor table = randn({7, 33}).to(Device::cuda());
  table.requires_grad_();
  Tensor index = scattered(20000, 7).to(Device::cuda());
  Tensor weights = randn({20000, 33}).to(Device::cuda());
  std::vector<float> first;
  for (int run = 0; run < 4; ++run) {
    table.set_grad(Tensor());
    mul(index_select(table, 0, index), weights).sum().backward();
    std::vector<float> grad = table.grad().to_vector<float>();
    if (run == 0) first = grad;
    else EXPECT_EQ(bits(grad), bits(first)) << "run " << run;
  }
  // And the sums are right: the same as the CPU's (which adds in index order too).
  Tensor cpu_table = table.detach().to(Device::cpu());
  cpu_table.requires_grad_();
  mul(index_select(cpu_table, 0, index.to(Device::cpu())), weights.to(Device::cpu())).sum().backward();
  EXPECT_TRUE(testing::all_close(table.grad(), cpu_table.grad(), 1e-4, 1e-4));
}

TEST_F(CudaDeterministic, RepeatedIndicesAddUpExactly) {
  MINIDL_REQUIRE_CUDA();
  Tensor src = ones({3, 4}, kFloat32, Device::cuda());
  src.requires_grad_();
  Tensor index = Tensor::from_vector<int64_t>({0, 2, 2}).to(Device::cuda());
  Tensor picked = index_select(src, 0, index);
  picked.sum().backward();
  EXPECT_EQ(src.grad().to(Device::cpu()).to_vector<float>(),
            (std::vector<float>{1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2}));
}

}  // namespace

}  // namespace minidl::determinism_test
