// The tape with several graphs alive at once: each backward walks and releases only its own graph,
// a walk through a freed entry is an error naming the op, and dropped graphs free their memory.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "minidl.h"
#include "test_util.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace minidl::autograd_graphs_test {

using minidl::testing::error_of;

namespace {

nn::Sequential make_model(uint64_t seed) {
  manual_seed(seed);
  nn::Sequential model(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 3));
  model->to(kFloat64);
  return model;
}

struct Batch {
  Tensor x, y;
};

Batch make_batch(uint64_t seed) {
  manual_seed(seed);
  Tensor x = randn({5, 6}, kFloat64);
  std::vector<int64_t> labels;
  for (double u : rand({5}, kFloat64).to_vector<double>()) labels.push_back(static_cast<int64_t>(u * 3));
  return {x, Tensor::from_vector<int64_t>(labels)};
}

Tensor loss_of(nn::Sequential& model, const Batch& b) { return nn::functional::cross_entropy(model(b.x), b.y); }

std::vector<std::vector<double>> grads_of(nn::Sequential& model) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : model->parameters()) {
    EXPECT_TRUE(p.grad().defined()) << "a parameter got no gradient";
    out.push_back(p.grad().defined() ? p.grad().to_vector<double>() : std::vector<double>{});
  }
  return out;
}

std::vector<std::vector<double>> params_of(nn::Sequential& model) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : model->parameters()) out.push_back(p.to_vector<double>());
  return out;
}

// Gradients of each model backwarded alone, one graph on the tape at a time.
std::vector<std::vector<double>> alone(uint64_t model_seed, uint64_t batch_seed) {
  nn::Sequential m = make_model(model_seed);
  loss_of(m, make_batch(batch_seed)).backward();
  return grads_of(m);
}

size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

}  // namespace

TEST(AutogradGraphs, TwoModelsBackwardInEitherOrder) {
  const auto ref_a = alone(1, 11), ref_b = alone(2, 12);
  for (bool a_first : {true, false}) {
    nn::Sequential a = make_model(1), b = make_model(2);
    Tensor loss_a = loss_of(a, make_batch(11));
    Tensor loss_b = loss_of(b, make_batch(12));
    if (a_first) {
      loss_a.backward();
      loss_b.backward();
    } else {
      loss_b.backward();
      loss_a.backward();
    }
    EXPECT_EQ(grads_of(a), ref_a) << (a_first ? "a then b" : "b then a");
    EXPECT_EQ(grads_of(b), ref_b) << (a_first ? "a then b" : "b then a");
  }
  EXPECT_EQ(autograd::tape_size(), 0u);
}

TEST(AutogradGraphs, SharedSubgraphNeedsRetainGraph) {
  manual_seed(3);
  Tensor w = randn({4, 4}, kFloat64).requires_grad_();
  Tensor x = randn({3, 4}, kFloat64);
  auto losses = [&] {
    Tensor h = tanh(matmul(x, w));
    return std::pair{(h * h).sum(), exp(h).mean()};
  };
  // Without retain_graph: the second backward meets the shared entries the first one freed.
  {
    auto [l1, l2] = losses();
    l1.backward();
    std::string msg = error_of([&] { l2.backward(); });
    EXPECT_NE(msg.find("'tanh'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("already freed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("retain_graph=true"), std::string::npos) << msg;
  }
  // With it: exactly the gradient of l1 + l2.
  w.set_grad(Tensor());
  {
    auto [l1, l2] = losses();
    (l1 + l2).backward();
  }
  std::vector<double> together = w.grad().to_vector<double>();
  w.set_grad(Tensor());
  {
    auto [l1, l2] = losses();
    l1.backward(Tensor(), /*retain_graph=*/true);
    l2.backward();
  }
  std::vector<double> apart = w.grad().to_vector<double>();
  ASSERT_EQ(apart.size(), together.size());
  for (size_t i = 0; i < apart.size(); ++i) EXPECT_NEAR(apart[i], together[i], 1e-12) << i;
  EXPECT_EQ(autograd::tape_size(), 0u);
}

TEST(AutogradGraphs, FreedEntryIsNamedAndNothingIsAccumulated) {
  Tensor w = Tensor::from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor v = Tensor::from_vector<double>({4, 5, 6}).requires_grad_();
  Tensor h = sigmoid(w);
  Tensor first = h.sum();
  Tensor second = (h * v).sum();
  first.backward();
  std::vector<double> w_grad = w.grad().to_vector<double>();
  std::string msg = error_of([&] { second.backward(); });
  EXPECT_NE(msg.find("'sigmoid'"), std::string::npos) << msg;
  // The walk is checked before any gradient is computed: v got nothing, w kept its first gradient.
  EXPECT_FALSE(v.grad().defined());
  EXPECT_EQ(w.grad().to_vector<double>(), w_grad);
  // The root itself freed: the message names its op.
  msg = error_of([&] { first.backward(); });
  EXPECT_NE(msg.find("'sum'"), std::string::npos) << msg;
}

TEST(AutogradGraphs, DroppedForwardsKeepTapeAndMemoryFlat) {
  manual_seed(4);
  nn::Linear fc(256, 128);
  Tensor x = randn({16, 256});
  auto forward = [&] { return relu(fc(x)).sum(); };  // saves a [16, 128] output per call
  for (int i = 0; i < 100; ++i) forward();
  const size_t bytes = memory_stats(Device::cpu()).bytes_in_use, rss = resident_bytes();
  size_t peak_bytes = bytes;
  for (int i = 0; i < 10000; ++i) {
    Tensor out = forward();  // dropped without backward
    peak_bytes = std::max(peak_bytes, memory_stats(Device::cpu()).bytes_in_use);
  }
  EXPECT_EQ(autograd::tape_size(), 0u);
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, bytes);
  EXPECT_LE(peak_bytes, bytes + 64 * 1024) << "a dropped forward was kept past the next one";
  // Leaking, the 10,000 saved outputs alone would take 80 MB.
  EXPECT_LT(resident_bytes(), rss + 8 * 1024 * 1024);
}

TEST(AutogradGraphs, DeadGraphUnderALiveOneIsSwept) {
  // A dropped forward recorded before a graph that stays alive sits under it on the tape; the
  // amortized sweep frees it without any call from the user.
  manual_seed(5);
  Tensor w = randn({64, 64}).requires_grad_();
  Tensor x = randn({32, 64});
  const size_t bytes = memory_stats(Device::cpu()).bytes_in_use;
  size_t peak_bytes = 0;
  Tensor live;
  for (int i = 0; i < 5000; ++i) {
    Tensor dropped = relu(matmul(x, w));
    live = relu(matmul(x, w)).sum();  // recorded after `dropped`: the dead entries are not at the tail
    peak_bytes = std::max(peak_bytes, memory_stats(Device::cpu()).bytes_in_use);
  }
  // Each kept [32, 64] output is 8 KB: 5,000 would be 40 MB; the sweep bounds it to a few hundred.
  EXPECT_LT(peak_bytes, bytes + 8 * 1024 * 1024);
  EXPECT_EQ(autograd::tape_size(), 3u);  // live's matmul, relu and sum
  live.backward();
  EXPECT_EQ(autograd::tape_size(), 0u);
  live = Tensor();
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use - bytes, w.grad().nbytes());
}

TEST(AutogradGraphs, EveryOpFreesItsDroppedGraph) {
  // An op whose backward kept its own output alive would never die; run each op and drop it.
  manual_seed(6);
  Tensor x = randn({2, 3, 6, 6}, kFloat64).requires_grad_();
  Tensor w = randn({4, 3, 3, 3}, kFloat64).requires_grad_();
  Tensor m = randn({6, 6}, kFloat64).requires_grad_();
  Tensor target = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0});
  const size_t bytes = memory_stats(Device::cpu()).bytes_in_use;
  std::vector<std::function<Tensor()>> ops = {
      [&] { return conv2d(x, w, Tensor(), {1, 1}, {1, 1}); },
      [&] { return max_pool2d(x, {2, 2}); },
      [&] { return dropout(x, 0.5, true); },
      [&] { return matmul(x.view({36, 6}), m); },
      [&] { return linear(x.view({36, 6}), m); },
      [&] { return log_softmax(x, 1) + softmax(x, 1); },
      [&] { return cross_entropy(x.reshape({12, 18}), target); },
      [&] { return nll_loss(log_softmax(x.reshape({12, 18}), 1), target); },
      [&] { return exp(x) / sqrt(x * x + 1) - log(x * x + 1) + tanh(x) * sigmoid(x) + relu(-x); },
      [&] { return pow(x * x + 1, x).permute({0, 2, 3, 1}).contiguous().to(kFloat32); },
      [&] { return max(x.transpose(1, 3), 2).values + expand(mean(x, {0}), {2, 3, 6, 6}).sum(); },
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i]();
    EXPECT_EQ(autograd::tape_size(), 0u) << "op #" << i;
    EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, bytes) << "op #" << i;
  }
}

TEST(AutogradGraphs, InterleavedTrainingMatchesTrainingAlone) {
  auto train = [](bool interleaved) {
    nn::Sequential a = make_model(1), b = make_model(2);
    optim::SGD opt_a(a->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD opt_b(b->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    for (uint64_t step = 0; step < 6; ++step) {
      Batch ba = make_batch(100 + step), bb = make_batch(200 + step);
      opt_a.zero_grad();
      opt_b.zero_grad();
      if (interleaved) {  // both forwards alive, backwards in alternating order
        Tensor la = loss_of(a, ba), lb = loss_of(b, bb);
        if (step % 2) {
          la.backward();
          lb.backward();
        } else {
          lb.backward();
          la.backward();
        }
      } else {
        loss_of(a, ba).backward();
        loss_of(b, bb).backward();
      }
      opt_a.step();
      opt_b.step();
    }
    return std::pair{params_of(a), params_of(b)};
  };
  auto [alone_a, alone_b] = train(false);
  auto [mixed_a, mixed_b] = train(true);
  EXPECT_EQ(mixed_a, alone_a);
  EXPECT_EQ(mixed_b, alone_b);
  nn::Sequential untrained = make_model(1);
  EXPECT_NE(alone_a, params_of(untrained));  // training moved the parameters
}

TEST(AutogradGraphs, RetainedGraphAccumulatesLikePyTorch) {
  Tensor x = Tensor::from_vector<double>({1, 2}).requires_grad_();
  Tensor y = (x * x * x).sum();
  y.backward(Tensor(), true);
  y.backward(Tensor(), true);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 24}));  // 3x^2, twice
  EXPECT_EQ(autograd::tape_size(), 3u);  // mul, mul, sum: still walkable
  y.backward();
  EXPECT_EQ(autograd::tape_size(), 0u);
}

TEST(AutogradGraphs, TapeIsPerThread) {
  Tensor x = Tensor::from_vector<double>({3}).requires_grad_();
  Tensor y = (x * x).sum();
  // Another thread records and backwards its own graph while this one is alive here.
  std::vector<double> other_grad;
  std::thread([&] {
    Tensor z = Tensor::from_vector<double>({2}).requires_grad_();
    (z * z * z).sum().backward();
    other_grad = z.grad().to_vector<double>();
  }).join();
  EXPECT_EQ(other_grad, std::vector<double>{12});
  // A graph recorded here cannot be walked from another thread: a clear error, not a silent skip.
  std::string msg;
  std::thread([&] { msg = error_of([&] { y.backward(); }); }).join();
  EXPECT_NE(msg.find("another thread"), std::string::npos) << msg;
  y.backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 6.0);
}

TEST(AutogradGraphs, ClearedGraphIsAnErrorNotASkip) {
  Tensor x = Tensor::from_vector<double>({1}).requires_grad_();
  Tensor h = exp(x);
  autograd::clear_tape();
  Tensor y = (h * x).sum();  // recorded after the clear, on top of a cleared entry
  std::string msg = error_of([&] { y.backward(); });
  EXPECT_NE(msg.find("clear_tape"), std::string::npos) << msg;
  EXPECT_FALSE(x.grad().defined());
  autograd::clear_tape();
}

TEST(AutogradGraphs, InferenceModeRecordsNothingAndItsTensorsStayOutOfGraphs) {
  Tensor w = Tensor::from_vector<double>({1, 2}).requires_grad_();
  Tensor x = Tensor::from_vector<double>({3, 4});
  const size_t before = autograd::tape_size();
  Tensor y;
  {
    InferenceMode guard;
    EXPECT_TRUE(inference_mode_enabled());
    EXPECT_FALSE(grad_mode_enabled());
    y = exp(w * x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_inference());
    EXPECT_TRUE(y.detach().is_inference());
  }
  EXPECT_FALSE(inference_mode_enabled());
  EXPECT_TRUE(grad_mode_enabled());
  EXPECT_EQ(autograd::tape_size(), before);
  EXPECT_FALSE(x.is_inference());
  // Outside: a recorded op refuses it, naming the op; a read or an unrecorded op is fine.
  std::string msg = error_of([&] { (w * y).sum(); });
  EXPECT_NE(msg.find("mul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("clone()"), std::string::npos) << msg;
  EXPECT_NEAR(y.to_vector<double>()[0], std::exp(3.0), 1e-9);
  EXPECT_FALSE((x * y).requires_grad());
  EXPECT_THROW(Tensor(y).requires_grad_(), Error);
  // clone() outside InferenceMode gives a normal tensor that trains.
  Tensor normal = y.clone();
  EXPECT_FALSE(normal.is_inference());
  (w * normal).sum().backward();
  EXPECT_NEAR(w.grad().to_vector<double>()[1], std::exp(8.0), 1e-6);
}

}  // namespace minidl::autograd_graphs_test
