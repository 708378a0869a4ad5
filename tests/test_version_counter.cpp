// Version counters: every in-place write counts on the memory it changes, and a backward that would
// read a saved tensor changed since its forward refuses, as PyTorch does, instead of returning a
// gradient that matches neither the old values nor the new ones.
#include <gtest/gtest.h>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_util.h"

namespace minidl::version_counter_test {

using minidl::testing::expect_error;

namespace {

const char* kModified = "modified by an inplace operation";

TEST(VersionCounter, EveryInPlaceWriteCounts) {
  Tensor x = zeros({3});
  EXPECT_EQ(x._version(), 0u);
  x += 1;
  EXPECT_EQ(x._version(), 1u);
  mul_(x, full({3}, 2.0));
  zero_(x);
  fill_(x, 4.0);
  copy_(x, ones({3}));
  EXPECT_EQ(x._version(), 5u);
  // Views and detached aliases share the count: they share the memory.
  Tensor view = x.slice(0, 1, 3);
  Tensor alias = x.detach();
  view += 1;
  alias *= 2;
  EXPECT_EQ(x._version(), 7u);
  EXPECT_EQ(view._version(), 7u);
  // An out-of-place op leaves it alone.
  Tensor y = x + 1;
  EXPECT_EQ(x._version(), 7u);
  EXPECT_EQ(y._version(), 0u);
}

TEST(VersionCounter, ChangingASavedInputBeforeBackwardIsAnError) {
  // y = w * a; a += 10; y.sum().backward()  ->  PyTorch raises; without the check w.grad would be 13.
  Tensor w = full({1}, 2.0).requires_grad_();
  Tensor a = full({1}, 3.0);
  Tensor y = w * a;
  a += 10;
  expect_error([&] { y.sum().backward(); }, {kModified, "'mul'", "is at version 1; expected version 0"});
  EXPECT_FALSE(w.grad().defined());
}

TEST(VersionCounter, ChangingASavedOutputIsAnError) {
  // sigmoid saves its output: changing it under NoGradGuard or through detach() is caught.
  Tensor x = randn({4}).requires_grad_();
  Tensor y = sigmoid(x);
  {
    NoGradGuard no_grad;
    y *= 2;
  }
  expect_error([&] { y.sum().backward(); }, {kModified, "'sigmoid'"});

  Tensor z = exp(x);
  Tensor alias = z.detach();
  alias.zero_();
  expect_error([&] { z.sum().backward(); }, {kModified, "'exp'"});

  // A view of the saved tensor changes it as much.
  Tensor u = tanh(x);
  Tensor part = u.detach().slice(0, 0, 2);
  part += 1;
  expect_error([&] { u.sum().backward(); }, {kModified, "'tanh'"});
}

TEST(VersionCounter, OptimizerStepBetweenTwoBackwardsOfOneGraphIsAnError) {
  // The GAN / actor-critic mistake: (l1 + l2).backward(retain_graph); opt.step(); l2.backward().
  // The second layer saves its weight for the first layer's gradient: the step changes it.
  manual_seed(0);
  nn::Sequential net(nn::Linear(3, 4), nn::Tanh(), nn::Linear(4, 2));
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
  Tensor x1 = randn({4, 3}), x2 = randn({4, 3});
  Tensor l1 = pow(net->forward(x1), 2).sum();
  Tensor l2 = pow(net->forward(x2), 2).sum();
  (l1 + l2).backward(Tensor(), /*retain_graph=*/true);
  opt.step();
  expect_error([&] { l2.backward(); }, {kModified, "expected version"});
}

TEST(VersionCounter, UnchangedSavedTensorsBackwardAsBefore) {
  // Writes to tensors no backward reads are fine: add saves nothing, and a fresh forward after an
  // optimizer step saves the new version.
  Tensor w = full({2}, 1.0).requires_grad_();
  Tensor a = full({2}, 3.0);
  Tensor y = w + a;
  a += 1;  // add's backward does not read a
  y.sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 1}));

  manual_seed(1);
  nn::Linear layer(3, 1);
  optim::SGD opt(layer->parameters(), optim::SGDOptions(0.1));
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss = pow(layer->forward(randn({5, 3})), 2).mean();
    loss.backward();
    opt.step();
  }
  EXPECT_GT(layer->weight._version(), 0u);
}

TEST(AutogradRecord, ACustomBackwardWithAWrongShapeIsRefused) {
  Tensor x = randn({3}).requires_grad_();
  Tensor out = x.detach() * 2;
  autograd::record("bad_double", out, {x}, [](const Tensor&, const std::vector<bool>&) {
    return std::vector<Tensor>{ones({2, 3})};  // the input has shape [3]
  });
  expect_error([&] { out.sum().backward(); }, {"'bad_double'", "shape [2, 3]", "input 0", "[3]"});
  EXPECT_FALSE(x.grad().defined());
}

TEST(AutogradRecord, ALeafCannotBecomeAnOutput) {
  Tensor w = randn({3}).requires_grad_();
  Tensor x = randn({3}).requires_grad_();
  expect_error([&] { autograd::record("f", w, {x}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; }); },
               {"f: the output passed to record()", "leaf that requires grad"});
  EXPECT_TRUE(w.is_leaf());
  Tensor y = x * 2;
  expect_error([&] { autograd::record("g", y, {x}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; }); },
               {"g: the output passed to record()", "already the output of another op"});
}

TEST(Reductions, SumOverAnEmptyDimListReducesEverything) {
  // torch.sum(x, dim=[]) reduces all dims, as does mean
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(sum(x, {}).dim(), 0);
  EXPECT_FLOAT_EQ(sum(x, {}).item<float>(), 10);
  EXPECT_EQ(sum(x, {}, /*keepdim=*/true).shape(), (Shape{1, 1}));
  EXPECT_FLOAT_EQ(mean(x, {}).item<float>(), 2.5f);
  // A 0-d tensor sums to a copy of itself, with one entry of history: the sum's.
  Tensor s = full({}, 2.0).requires_grad_();
  (sum(s) * 3).backward();
  EXPECT_FLOAT_EQ(s.grad().item<float>(), 3);
}

}  // namespace

}  // namespace minidl::version_counter_test
