// cuda::GraphedStep's step semantics, which hold on every device: on the CPU every step runs eagerly
// and must equal the hand-written loop, with and without gradient accumulation. The graphed path
// is compared with this one in tests/test_cuda_graph.cpp.
#include <gtest/gtest.h>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace minidl::graphed_step_test {

namespace {

nn::Sequential model() {
  manual_seed(11);
  nn::Sequential m(nn::Linear(5, 6), nn::ReLU(), nn::Linear(6, 3));
  m->to(kFloat64);
  return m;
}

std::vector<std::pair<Tensor, Tensor>> batches(int n) {
  manual_seed(12);
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int i = 0; i < n; ++i)
    out.push_back({randn({4, 5}, kFloat64), Tensor::from_vector<int64_t>({i % 3, 0, 2, 1})});
  return out;
}

std::vector<std::vector<double>> values(nn::Sequential& m) {
  std::vector<std::vector<double>> v;
  for (const Tensor& p : m->parameters()) v.push_back(p.to_vector<double>());
  return v;
}

Tensor criterion(const Tensor& out, const Tensor& y) { return cross_entropy(out, y); }

}  // namespace

TEST(GraphedStep, OnTheCpuEqualsTheHandWrittenLoop) {
  for (int k : {1, 2, 3}) {
    SCOPED_TRACE("accumulation_steps " + std::to_string(k));
    auto data = batches(6);
    nn::Sequential by_hand = model(), stepped = model();
    optim::SGD opt_hand(by_hand->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD opt_step(stepped->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    for (size_t i = 0; i < data.size(); ++i) {
      if (i % k == 0) opt_hand.zero_grad();
      criterion(by_hand(data[i].first), data[i].second).backward();
      if (i % k == static_cast<size_t>(k - 1)) opt_hand.step();
    }
    cuda::GraphedStep step(stepped, opt_step, criterion, cuda::GraphedStepOptions().accumulation_steps(k));
    for (auto& [x, y] : data) step(x, y);
    EXPECT_EQ(values(stepped), values(by_hand));
    EXPECT_FALSE(step.graphed());
    EXPECT_EQ(step.eager_steps(), 6);
  }
}

TEST(GraphedStep, AccumulatedGradientIsTheSumOverMicroBatches) {
  auto data = batches(2);
  nn::Sequential m = model();
  optim::SGD opt(m->parameters(), optim::SGDOptions(0.0));  // lr 0: the step leaves the gradients to look at
  cuda::GraphedStep step(m, opt, criterion, cuda::GraphedStepOptions().accumulation_steps(2));
  step(data[0].first, data[0].second);
  step(data[1].first, data[1].second);
  std::vector<double> accumulated = m->parameters()[0].grad().to_vector<double>();
  nn::Sequential ref = model();
  (criterion(ref(data[0].first), data[0].second) + criterion(ref(data[1].first), data[1].second)).backward();
  std::vector<double> expected = ref->parameters()[0].grad().to_vector<double>();
  ASSERT_EQ(accumulated.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(accumulated[i], expected[i], 1e-12);
  EXPECT_THROW(cuda::GraphedStepOptions().accumulation_steps(0), Error);
}

}  // namespace minidl::graphed_step_test
