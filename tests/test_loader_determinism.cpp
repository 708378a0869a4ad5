// Reproducible data loading with random augmentation: Dataset::get draws its noise on the loader's
// worker thread while the training thread draws dropout masks, and a seeded CPU run must still be
// bit-reproducible. The worker draws from its own generator, seeded each epoch from a number the
// training thread draws when the epoch starts, so neither thread's stream depends on the other's.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "data/data.h"
#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_file_util.h"

namespace minidl::loader_determinism_test {

namespace {

constexpr int64_t kFeatures = 6, kClasses = 3;

// Three classes around distinct centers; every get() adds fresh noise, `noise_draws` randn calls of
// it, as an augmentation would.
class NoisyBlobs : public data::Dataset {
 public:
  explicit NoisyBlobs(int64_t noise_draws = 1) : noise_draws_(noise_draws) {}
  int64_t size() const override { return 48; }
  data::Example<> get(int64_t index) const override {
    const int64_t label = index % kClasses;
    Tensor x = full({kFeatures}, static_cast<double>(label));
    for (int64_t k = 0; k < noise_draws_; ++k) x = x + randn({kFeatures}) * 0.3;
    return {x, full({}, static_cast<double>(label), kInt64)};
  }

 private:
  int64_t noise_draws_;
};

// Bit patterns, so that a difference in the last place shows.
std::vector<uint32_t> bits(const std::vector<float>& values) {
  std::vector<uint32_t> out(values.size());
  std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
  return out;
}

struct TrainingRun {
  std::vector<uint32_t> losses;
  testing::Snapshot weights;
};

// Three epochs of SGD with dropout on augmented examples, shuffled by a seed the loader takes from
// the global generator: everything follows from manual_seed(seed).
TrainingRun train(uint64_t seed) {
  manual_seed(seed);
  nn::Sequential model(nn::Linear(kFeatures, 32), nn::ReLU(), nn::Dropout(0.3), nn::Linear(32, kClasses));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  data::DataLoader loader(NoisyBlobs(), data::DataLoaderOptions(8).shuffle(true));
  std::vector<float> losses;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (data::Batch& batch : loader) {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy(model->forward(batch.data), batch.target);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<float>());
    }
  }
  return {bits(losses), testing::snapshot(*model)};
}

TEST(LoaderDeterminism, AugmentationAndDropoutTrainBitIdenticallyRunAfterRun) {
  const TrainingRun first = train(17);
  ASSERT_EQ(first.losses.size(), 18u);
  for (int run = 1; run < 4; ++run) {
    SCOPED_TRACE("run " + std::to_string(run) + " against the first");
    const TrainingRun again = train(17);
    EXPECT_EQ(again.losses, first.losses);
    EXPECT_EQ(again.weights, first.weights);
  }
  // The control: another seed trains differently, so the comparison can fail.
  EXPECT_NE(train(18).losses, first.losses);
}

// What the training thread draws during two epochs (a dropout mask per batch) and after them.
std::vector<float> training_thread_draws(int64_t noise_draws) {
  manual_seed(21);
  data::DataLoader loader(NoisyBlobs(noise_draws), data::DataLoaderOptions(8).shuffle(true));
  std::vector<float> draws;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for ([[maybe_unused]] data::Batch& batch : loader) {
      std::vector<float> mask = dropout(ones({32}), 0.5).to_vector<float>();
      draws.insert(draws.end(), mask.begin(), mask.end());
    }
  }
  std::vector<float> after = rand({4}).to_vector<float>();
  draws.insert(draws.end(), after.begin(), after.end());
  return draws;
}

TEST(LoaderDeterminism, WhatGetDrawsLeavesTheTrainingThreadsStreamAlone) {
  const std::vector<float> one = training_thread_draws(1);
  EXPECT_EQ(bits(training_thread_draws(100)), bits(one));
  EXPECT_EQ(bits(training_thread_draws(0)), bits(one));
}

// Records, for each get() in call order, its noise and what the worker said about itself.
class RecordingNoise : public data::Dataset {
 public:
  struct Call {
    std::vector<float> noise;
    std::optional<data::WorkerInfo> worker;
    uint64_t initial_seed = 0;
  };
  int64_t size() const override { return 10; }
  data::Example<> get(int64_t index) const override {
    Tensor noise = randn({3});
    calls.push_back({noise.to_vector<float>(), data::worker_info(), initial_seed()});
    return {noise, full({}, static_cast<double>(index), kInt64)};
  }
  // Written by the worker only, read once the epoch's worker has been joined.
  mutable std::vector<Call> calls;
};

std::vector<float> noise_of(const std::vector<RecordingNoise::Call>& calls) {
  std::vector<float> out;
  for (const auto& c : calls) out.insert(out.end(), c.noise.begin(), c.noise.end());
  return out;
}

TEST(LoaderDeterminism, TheWorkerDrawsFromTheEpochsBaseSeedPlusItsId) {
  auto dataset = std::make_shared<RecordingNoise>();
  manual_seed(5);
  Generator training_thread(5);  // the training thread's stream, followed by hand
  // A seed of its own, so the loader takes nothing from the global generator when it is made.
  data::DataLoader loader(dataset, data::DataLoaderOptions(4).seed(1));
  std::vector<std::vector<float>> epochs;
  for (int epoch = 0; epoch < 2; ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    dataset->calls.clear();
    const uint64_t base_seed = training_thread.engine()();
    for ([[maybe_unused]] data::Batch& batch : loader) {
    }
    ASSERT_EQ(dataset->calls.size(), 10u);
    for (const auto& call : dataset->calls) {
      ASSERT_TRUE(call.worker.has_value());
      EXPECT_EQ(call.worker->id, 0);
      EXPECT_EQ(call.worker->num_workers, 1);
      EXPECT_EQ(call.worker->seed, base_seed + 0);
      EXPECT_EQ(call.initial_seed, base_seed + 0);
    }
    // The same draws, made here from a generator seeded with base_seed + worker id.
    Generator worker(base_seed + 0);
    std::vector<float> expected;
    {
      GeneratorGuard guard(worker);
      for (int i = 0; i < 10; ++i) {
        std::vector<float> v = randn({3}).to_vector<float>();
        expected.insert(expected.end(), v.begin(), v.end());
      }
    }
    epochs.push_back(noise_of(dataset->calls));
    EXPECT_EQ(bits(epochs.back()), bits(expected));
  }
  EXPECT_NE(epochs[0], epochs[1]) << "both epochs got the same augmentation";

  // The training thread's stream moved by the two base seeds and nothing else.
  std::vector<float> expected_next;
  {
    GeneratorGuard guard(training_thread);
    expected_next = rand({4}).to_vector<float>();
  }
  EXPECT_EQ(bits(rand({4}).to_vector<float>()), bits(expected_next));
  EXPECT_FALSE(data::worker_info().has_value()) << "the training thread is no worker";
}

TEST(GeneratorGuard, SendsThisThreadsDrawsToItsGeneratorAndRestores) {
  manual_seed(3);
  const std::vector<float> reference = rand({5}).to_vector<float>();

  manual_seed(3);
  Generator mine(99);
  {
    GeneratorGuard guard(mine);
    EXPECT_EQ(&default_generator(), &mine);
    EXPECT_EQ(initial_seed(), 99u);
    randn({7});
    dropout(ones({64}), 0.5);
    {
      Generator inner(7);
      GeneratorGuard nested(inner);
      EXPECT_EQ(initial_seed(), 7u);
    }
    EXPECT_EQ(initial_seed(), 99u);
    // Another thread keeps the global generator.
    Generator* seen = nullptr;
    std::thread([&] { seen = &default_generator(); }).join();
    EXPECT_NE(seen, &mine);
  }
  EXPECT_EQ(initial_seed(), 3u);
  EXPECT_EQ(bits(rand({5}).to_vector<float>()), bits(reference)) << "the guarded draws reached the global stream";

  // Draws under a guard follow the guarded generator's seed alone.
  auto guarded_draws = [] {
    Generator gen(42);
    GeneratorGuard guard(gen);
    std::vector<float> v = randn({6}).to_vector<float>();
    std::vector<float> mask = dropout(ones({16}), 0.5).to_vector<float>();
    v.insert(v.end(), mask.begin(), mask.end());
    return v;
  };
  const std::vector<float> first = guarded_draws();
  rand({3});
  EXPECT_EQ(bits(guarded_draws()), bits(first));
}

}  // namespace

}  // namespace minidl::loader_determinism_test
