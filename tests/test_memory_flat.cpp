// Memory stays flat over a long run: 20 epochs of training (a small CNN and an MLP, SGD with
// momentum, dropout, batches gathered with index_select, an evaluation per epoch) leave the CPU
// allocator's bytes in use and bytes held (its cache of large blocks included), the autograd tape,
// and the process's resident set (small blocks come from malloc) where they were after the second
// epoch. The same on CUDA for the device allocator (the resident set there also holds the driver's
// own memory, so only the allocator and the tape are compared).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_cuda_util.h"

namespace minidl::memory_flat_test {

namespace {

double resident_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  for (double kb; status >> key;)
    if (key == "VmRSS:" && status >> kb) return kb / 1024;
  return 0;
}

struct Reading {
  MemoryStats allocator;
  size_t tape;
  double rss_mb;
};

// Trains `model` for `epochs` epochs of a few batches on fixed random data; one reading per epoch.
std::vector<Reading> train(nn::Module& model, const Shape& sample_shape, int epochs, Device device = Device::cpu()) {
  manual_seed(5);
  const int64_t samples = 96, batch = 16;
  Shape data_shape = sample_shape;
  data_shape.insert(data_shape.begin(), samples);
  std::mt19937_64 rng(7);
  std::vector<int64_t> labels(static_cast<size_t>(samples)), positions(static_cast<size_t>(samples));
  for (auto& l : labels) l = static_cast<int64_t>(rng() % 10);
  std::iota(positions.begin(), positions.end(), int64_t{0});
  model.to(device);
  Tensor images = randn(data_shape).to(device), targets = Tensor::from_vector(labels).to(device);
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(0.01).momentum(0.9));
  std::vector<Reading> readings;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    model.train();
    std::shuffle(positions.begin(), positions.end(), rng);
    Tensor order = Tensor::from_vector(positions).to(device);
    for (int64_t begin = 0; begin < samples; begin += batch) {
      Tensor index = narrow(order, 0, begin, batch);
      optimizer.zero_grad();
      Tensor loss = cross_entropy(model.forward(index_select(images, 0, index)), index_select(targets, 0, index));
      loss.backward();
      optimizer.step();
    }
    {
      NoGradGuard no_grad;
      model.eval();
      (void)argmax(model.forward(images), 1).sum().item<int64_t>();
    }
    readings.push_back({memory_stats(device), autograd::tape_size(), resident_mb()});
  }
  return readings;
}

void expect_flat(const std::vector<Reading>& r, bool check_resident = true) {
  const Reading& second = r[1];
  for (size_t e = 2; e < r.size(); ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e + 1));
    EXPECT_EQ(r[e].allocator.bytes_in_use, second.allocator.bytes_in_use);
    EXPECT_EQ(r[e].allocator.bytes_held, second.allocator.bytes_held);
    EXPECT_EQ(r[e].tape, 0u);
    // The resident set may move by a few pages (the C library's own arenas, thread stacks).
    if (check_resident) {
      EXPECT_LT(r[e].rss_mb - second.rss_mb, 4.0);
    }
  }
}

}  // namespace

TEST(MemoryFlat, CnnOverTwentyEpochs) {
  nn::Sequential model(nn::Conv2d(1, 8, 3), nn::ReLU(), nn::MaxPool2d(2), nn::Dropout(0.25), nn::Flatten(),
                       nn::Linear(8 * 13 * 13, 32), nn::ReLU(), nn::Dropout(0.5), nn::Linear(32, 10));
  expect_flat(train(*model, {1, 28, 28}, 20));
}

TEST(MemoryFlat, MlpOverTwentyEpochs) {
  nn::Sequential model(nn::Flatten(), nn::Linear(784, 64), nn::ReLU(), nn::Linear(64, 10));
  expect_flat(train(*model, {1, 28, 28}, 20));
}

TEST(CudaMemoryFlat, CnnOverTwentyEpochs) {
  MINIDL_REQUIRE_CUDA();
  nn::Sequential model(nn::Conv2d(1, 8, 3), nn::ReLU(), nn::MaxPool2d(2), nn::Dropout(0.25), nn::Flatten(),
                       nn::Linear(8 * 13 * 13, 32), nn::ReLU(), nn::Dropout(0.5), nn::Linear(32, 10));
  expect_flat(train(*model, {1, 28, 28}, 20, Device::cuda()), false);
}

TEST(CudaMemoryFlat, MlpOverTwentyEpochs) {
  MINIDL_REQUIRE_CUDA();
  nn::Sequential model(nn::Flatten(), nn::Linear(784, 64), nn::ReLU(), nn::Linear(64, 10));
  expect_flat(train(*model, {1, 28, 28}, 20, Device::cuda()), false);
}

}  // namespace minidl::memory_flat_test
