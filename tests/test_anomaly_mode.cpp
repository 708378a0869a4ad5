// Anomaly mode: the first NaN or infinity of a forward or a backward is an error naming the op, its
// shapes and the pass; off, nothing is checked and nothing changes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "apps/common/mnist_app.h"
#include "apps/common/models.h"
#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::anomaly_mode_test {

namespace {

using testing::error_of;
using testing::expect_error;

Tensor leaf(const std::vector<float>& values, Shape shape, Device device = Device::cpu()) {
  Tensor t = Tensor::from_vector(values, std::move(shape), device);
  t.requires_grad_();
  return t;
}

TEST(AnomalyMode, OffByDefaultAndTheGuardRestores) {
  EXPECT_FALSE(is_anomaly_enabled());
  {
    DetectAnomalyGuard on;
    EXPECT_TRUE(is_anomaly_enabled());
    {
      DetectAnomalyGuard off(false);
      EXPECT_FALSE(is_anomaly_enabled());
    }
    EXPECT_TRUE(is_anomaly_enabled());
  }
  EXPECT_FALSE(is_anomaly_enabled());
}

TEST(AnomalyMode, ANaNMadeByAForwardNamesTheOpAndItsShapes) {
  DetectAnomalyGuard anomaly;
  Tensor x = leaf({1, -1, 2, 3, 4, 5}, {2, 3});
  expect_error([&] { log(x); }, {"anomaly detected in the forward of 'log'", "output [2, 3] float32",
                                 "1 NaN of 6 values (the first at [0, 1])", "its inputs were all finite",
                                 "input 0 [2, 3] float32 (finite)", "set_detect_anomaly(false)"});
  // 0 * inf: both inputs finite or not, the product is NaN.
  Tensor zero = leaf({0, 1}, {2, 1});
  Tensor inf = Tensor::from_vector<float>({std::numeric_limits<float>::infinity(), 2}, {1, 2});
  expect_error([&] { mul(zero, inf); },
               {"forward of 'mul'", "output [2, 2] float32", "1 NaN and 1 +inf of 4 values (the first at [0, 0])",
                "its input 1 was already non-finite", "input 1 [1, 2] float32 (holds 1 +inf of 2 values"});
}

TEST(AnomalyMode, ANaNMadeOnlyByABackwardNamesTheBackwardAndWhereItWasRecorded) {
  DetectAnomalyGuard anomaly;
  Tensor x = leaf({0, 1, 4}, {3});
  Tensor loss = sqrt(x).sum();  // finite: sqrt(0) = 0; its gradient 1 / (2 sqrt(0)) is not
  EXPECT_FLOAT_EQ(loss.item<float>(), 3.0f);
  expect_error([&] { loss.backward(); },
               {"anomaly detected in the backward of 'sqrt'", "gradient it computed for its input 0, [3] float32",
                "1 +inf of 3 values (the first at [0])", "the gradient it received, [3] float32, was finite",
                "recorded in the forward as sqrt([3] float32) -> [3] float32"});
  EXPECT_FALSE(x.grad().defined()) << "the bad gradient must not reach the leaf";
}

TEST(AnomalyMode, ABackwardOfAnOpRecordedBeforeItWasOnSaysSo) {
  Tensor x = leaf({0, 1}, {2});
  Tensor loss = sqrt(x).sum();
  DetectAnomalyGuard anomaly;
  expect_error([&] { loss.backward(); },
               {"backward of 'sqrt'", "its shapes are unknown: anomaly mode was off when it ran"});
}

TEST(AnomalyMode, OffNothingIsCheckedAndTheValuesGoThrough) {
  Tensor x = leaf({-1, 0, 4}, {3});
  Tensor y;
  EXPECT_EQ(error_of([&] { y = log(x); }), "(no error)");
  EXPECT_TRUE(std::isnan(y.to_vector<float>()[0]));
  Tensor z = leaf({0, 1, 4}, {3});
  EXPECT_EQ(error_of([&] { sqrt(z).sum().backward(); }), "(no error)");
  EXPECT_TRUE(std::isinf(z.grad().to_vector<float>()[0]));
}

TEST(AnomalyMode, ABadGradientGivenToBackwardIsNamed) {
  DetectAnomalyGuard anomaly;
  Tensor x = leaf({1, 2}, {2});
  Tensor y = mul(x, x);
  Tensor seed = Tensor::from_vector<float>({1, std::nanf("")}, {2});
  expect_error([&] { y.backward(seed); }, {"the gradient passed to it, [2] float32, holds 1 NaN of 2 values"});
}

// A clean training run is not disturbed: no false alarm, and the same numbers as with the mode off.
std::vector<float> train_steps(bool anomaly) {
  DetectAnomalyGuard guard(anomaly);
  manual_seed(3);
  nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(1, 4, 3)), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                       nn::Linear(4 * 3 * 3, 5));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Tensor x = randn({8, 1, 8, 8});
  Tensor target = Tensor::from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2});
  std::vector<float> losses;
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model->forward(x), target);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  return losses;
}

TEST(AnomalyMode, ACleanTrainingStepRaisesNothingAndChangesNothing) {
  std::vector<float> checked;
  EXPECT_EQ(error_of([&] { checked = train_steps(true); }), "(no error)");
  EXPECT_EQ(checked, train_steps(false));
}

// --detect-anomaly in the apps: a run whose learning rate blows up stops at the op whose output
// overflowed first, rather than at the next loss check; the mode is off again after the run.
TEST(AnomalyMode, TheAppFlagStopsADivergingRunAtTheFirstOpThatOverflowed) {
  mnist_app::Flags f;
  f.epochs = 1, f.limit = 640, f.batch_size = 64, f.log_interval = 5, f.device = "cpu", f.lr = 10;
  f.detect_anomaly = true;
  try {
    mnist_app::load(f, false);
  } catch (const Error& e) {
    GTEST_SKIP() << "MNIST not found; fetch it with scripts/get_data.sh (" << e.what() << ")";
  }
  manual_seed(1);
  const std::string message = error_of([&] { mnist_app::run(std::make_shared<mnist_app::Mlp>(), f); });
  EXPECT_NE(message.find("anomaly detected in the "), std::string::npos) << message;
  EXPECT_EQ(message.find("training diverged"), std::string::npos) << message;
  EXPECT_FALSE(is_anomaly_enabled());
}

TEST(CudaAnomalyMode, AForwardNaNOnTheGpuIsFound) {
  MINIDL_REQUIRE_CUDA();
  DetectAnomalyGuard anomaly;
  Tensor x = leaf({1, -1, 2}, {3}, Device::cuda());
  expect_error([&] { log(x); }, {"forward of 'log'", "output [3] float32 on cuda:0", "1 NaN of 3 values"});
  Tensor z = leaf({0, 1, 4}, {3}, Device::cuda());
  Tensor loss = sqrt(z).sum();
  expect_error([&] { loss.backward(); }, {"backward of 'sqrt'", "1 +inf of 3 values"});
  Tensor ok = leaf({1, 2, 3}, {3}, Device::cuda());
  EXPECT_EQ(error_of([&] { log(ok).sum().backward(); }), "(no error)");
}

}  // namespace

}  // namespace minidl::anomaly_mode_test
