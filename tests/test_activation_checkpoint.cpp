// autograd::checkpoint: the same values and gradients as without it (dropout's mask replayed,
// autocast as at the forward, parameters used inside and outside), one tape entry instead of the
// block's, and the uses PyTorch's reentrant checkpoint refuses, refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "minidl.h"
#include "test_util.h"

namespace minidl::activation_checkpoint_test {

using minidl::testing::expect_error;

namespace {

struct Block {
  nn::Linear fc1{6, 12}, fc2{12, 6};
  double p = 0;
  Block() {
    fc1->to(kFloat64);
    fc2->to(kFloat64);
  }
  Tensor operator()(const Tensor& x) const { return fc2->forward(dropout(gelu(fc1->forward(x)), p, p > 0)); }
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> ps = fc1->parameters();
    for (const Tensor& t : fc2->parameters()) ps.push_back(t);
    return ps;
  }
  void zero_grad() const {
    for (Tensor p : parameters()) p.set_grad(Tensor());
  }
};

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

// Within tol of each other, relative to the larger magnitude past 1: on CUDA the recomputation's
// products may sum in another order than the first forward's, a float32 rounding of the gradient.
void expect_same(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  const std::vector<double> x = values(a), y = values(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x[i], y[i], tol * std::max({1.0, std::fabs(x[i]), std::fabs(y[i])})) << what << " [" << i << "]";
}

// Two blocks in a row and a loss; `use` says whether the first goes through checkpoint. Returns the
// input's gradient; the blocks' parameters hold theirs.
Tensor run(const Block& a, const Block& b, const Tensor& data, bool use, uint64_t seed) {
  manual_seed(seed);
  Tensor x = data.detach().requires_grad_();
  Tensor h = use ? autograd::checkpoint([&a](const Tensor& t) { return a(t); }, x) : a(x);
  sum(mul(b(h), b(h))).backward();
  return x.grad();
}

}  // namespace

TEST(ActivationCheckpoint, SameGradientsAsWithout) {
  manual_seed(1);
  Block a, b;
  const Tensor data = randn({4, 6}, kFloat64);
  const Tensor gx = run(a, b, data, false, 7);
  std::vector<Tensor> want;
  for (const Tensor& p : a.parameters()) want.push_back(p.grad().clone());
  a.zero_grad();
  b.zero_grad();
  const Tensor gx_checkpointed = run(a, b, data, true, 7);
  expect_same(gx_checkpointed, gx, 1e-12, "input");
  for (size_t i = 0; i < want.size(); ++i) expect_same(a.parameters()[i].grad(), want[i], 1e-12, "parameter");
}

TEST(ActivationCheckpoint, DropoutReplaysItsMaskAndLeavesTheGeneratorAsWithout) {
  manual_seed(2);
  Block a, b;
  a.p = 0.5;
  const Tensor data = randn({8, 6}, kFloat64);
  const Tensor gx = run(a, b, data, false, 11);
  const Tensor next = rand({4}, kFloat64);  // the draws after the step
  const Tensor w_grad = a.fc1->weight.grad().clone();
  a.zero_grad();
  b.zero_grad();
  const Tensor gx_checkpointed = run(a, b, data, true, 11);
  expect_same(gx_checkpointed, gx, 1e-12, "input");
  expect_same(a.fc1->weight.grad(), w_grad, 1e-12, "fc1.weight");
  expect_same(rand({4}, kFloat64), next, 0, "the generator after the backward");
  // Without preserve_rng_state the recomputation draws a new mask: the gradient differs.
  a.zero_grad();
  manual_seed(11);
  Tensor x = data.detach().requires_grad_();
  sum(mul(b(autograd::checkpoint([&a](const Tensor& t) { return a(t); }, x, false)), 1.0)).backward();
  manual_seed(11);
  Tensor y = data.detach().requires_grad_();
  sum(mul(b(a(y)), 1.0)).backward();
  EXPECT_GT(max(abs(sub(x.grad(), y.grad()))).item<double>(), 1e-6);
}

TEST(ActivationCheckpoint, OneTapeEntryForTheBlock) {
  manual_seed(3);
  Block a;
  const Tensor x = randn({4, 6}, kFloat64).requires_grad_();
  const size_t before = autograd::tape_size();
  Tensor direct = a(x);
  const size_t direct_entries = autograd::tape_size() - before;
  Tensor kept = autograd::checkpoint([&a](const Tensor& t) { return a(t); }, x);
  EXPECT_EQ(autograd::tape_size() - before - direct_entries, 1u);
  EXPECT_GE(direct_entries, 3u);
  expect_same(kept, direct, 0, "the forward's value");
}

TEST(ActivationCheckpoint, AutocastAndSharedParameters) {
  manual_seed(4);
  nn::Linear fc(8, 8);
  const Tensor data = randn({4, 8});
  auto f = [&fc](const Tensor& t) { return fc->forward(relu(fc->forward(t))); };  // fc used twice inside
  auto loss_of = [&](bool use) {
    Tensor x = data.detach().requires_grad_();
    Tensor y;
    {
      AutocastGuard autocast(Device::cpu(), kBFloat16);
      Tensor h = use ? autograd::checkpoint(f, x) : f(x);
      y = fc->forward(h);  // and once outside
    }
    EXPECT_EQ(y.dtype(), kBFloat16);
    sum(y.to(kFloat32)).backward();
    return x.grad();
  };
  const Tensor gx = loss_of(false), gw = fc->weight.grad().clone();
  fc->weight.set_grad(Tensor());
  fc->bias.set_grad(Tensor());
  const Tensor gx_checkpointed = loss_of(true);
  expect_same(gx_checkpointed, gx, 0, "input, bfloat16 products as at the forward");
  expect_same(fc->weight.grad(), gw, 0, "weight used inside and outside");
}

TEST(ActivationCheckpoint, RefusesWhatItCannotDo) {
  Block a;
  const Tensor data = randn({2, 6}, kFloat64);
  expect_error([&] { autograd::checkpoint([&a](const Tensor& t) { return a(t); }, data); },
               {"checkpoint", "requires grad"});
  const Tensor x = data.detach().requires_grad_();
  const Tensor y = sum(autograd::checkpoint([&a](const Tensor& t) { return a(t); }, x));
  expect_error([&] { autograd::grad({y}, {x}); }, {"checkpoint", "autograd::grad()", "backward()"});
  const Tensor z = sum(autograd::checkpoint([&a](const Tensor& t) { return a(t); }, x));
  expect_error([&] { autograd::grad({z}, {x}, {}, true, /*create_graph=*/true); }, {"CheckpointFunction"});
  // An input changed in place before the backward would be read changed by the recomputation.
  Tensor base = data.clone().requires_grad_();
  Tensor input = mul(base, 1.0);
  const Tensor w = sum(autograd::checkpoint([&a](const Tensor& t) { return a(t); }, input));
  {
    NoGradGuard writing;
    input.add_(1.0);
  }
  expect_error([&] { w.backward(); }, {"CheckpointFunction", "modified by an inplace operation"});
  // No grad mode: fn runs as it is, nothing recorded.
  NoGradGuard no_grad;
  EXPECT_FALSE(autograd::checkpoint([&a](const Tensor& t) { return a(t); }, x).requires_grad());
}

// On CUDA the dropout mask comes from the generator's Philox offset, which the recomputation sets back.
TEST(CudaActivationCheckpoint, DropoutBlockAsWithout) {
  if (!cuda::is_available()) GTEST_SKIP() << "no usable CUDA device: " << cuda::unavailable_reason();
  manual_seed(5);
  nn::Linear fc1(64, 256), fc2(256, 64);
  fc1->to(Device::cuda());
  fc2->to(Device::cuda());
  auto block = [&](const Tensor& t) { return fc2->forward(dropout(gelu(fc1->forward(t)), 0.3, true)); };
  const Tensor data = randn({32, 64}, kFloat32, Device::cuda());
  auto grads = [&](bool use) {
    manual_seed(9);
    fc1->weight.set_grad(Tensor());
    Tensor x = data.detach().requires_grad_();
    sum(use ? autograd::checkpoint(block, x) : block(x)).backward();
    return std::make_pair(x.grad().to(Device::cpu()), fc1->weight.grad().to(Device::cpu()));
  };
  const auto [gx, gw] = grads(false);
  const auto [cx, cw] = grads(true);
  expect_same(cx, gx, 1e-6, "input");
  expect_same(cw, gw, 1e-6, "fc1.weight");
}

}  // namespace minidl::activation_checkpoint_test
