// The tape: recording, accumulation, release, retain_graph, memory over many steps, and errors.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "minidl.h"

namespace minidl::autograd_test {

namespace {
Tensor leaf(std::vector<double> v) { return Tensor::from_vector<double>(v).requires_grad_(); }
}  // namespace

TEST(Autograd, SimpleChainRule) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = (x * x * x).sum();  // dy/dx = 3x^2
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 12, 27}));
  EXPECT_EQ(autograd::tape_size(), 0u);
}

TEST(Autograd, SharedSubexpressionAccumulates) {
  Tensor x = leaf({2});
  Tensor a = x * x;           // used twice below
  Tensor y = (a + a * x).sum();  // x^2 + x^3 -> 2x + 3x^2 = 16
  y.backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 16.0);
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2});
  size_t before = autograd::tape_size();
  {
    NoGradGuard no_grad;
    Tensor y = exp(x) * x;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(grad_mode_enabled());
  }
  EXPECT_TRUE(grad_mode_enabled());
  EXPECT_EQ(autograd::tape_size(), before);
  Tensor z = exp(x);
  EXPECT_TRUE(z.requires_grad());
  EXPECT_EQ(autograd::tape_size(), before + 1);
  autograd::clear_tape();
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1, -2});
  (x * x).sum().backward();
  (x * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, -8}));
  x.set_grad(Tensor());
  (x * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, -4}));
}

TEST(Autograd, SecondBackwardThroughReleasedTapeIsAClearError) {
  Tensor x = leaf({1, 2});
  Tensor y = (x * x).sum();
  y.backward();
  try {
    y.backward();
    FAIL() << "a second backward through a released graph must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({3});
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_GT(autograd::tape_size(), 0u);
  y.backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 12.0);
  EXPECT_EQ(autograd::tape_size(), 0u);
}

// A backward without retain_graph frees an op's saved tensors once its gradient is taken, before
// the ops below it run (as PyTorch does); with retain_graph they stay for the next backward.
TEST(Autograd, SavedTensorsAreFreedAsTheBackwardPassesThem) {
  for (bool retain : {false, true}) {
    Tensor x = leaf({1, 2, 3});
    std::weak_ptr<Storage> saved;
    bool freed_before_the_op_below = false;
    Tensor y;
    {
      Tensor a = x * 2.0;                 // its gradient reaches x through the op below
      Tensor b = exp(a);                  // exp and the product below save b: once out of scope, only they hold it
      saved = b.impl().storage;
      a.register_hook([&](const Tensor&) {  // runs after exp's and mul's backward, before x * 2's
        freed_before_the_op_below = saved.expired();
        return Tensor();
      });
      y = (b * b.detach()).sum();
    }
    y.backward(Tensor(), retain);
    EXPECT_EQ(freed_before_the_op_below, !retain) << "retain_graph " << retain;
    if (retain) {
      EXPECT_FALSE(saved.expired());
      y.backward();                       // the saved tensors were kept for it
      EXPECT_TRUE(saved.expired());
    }
    // d/dx of sum(e^{2x} e^{2x}), the second factor a constant: 2 e^{4x}, once or twice
    const std::vector<double> g = x.grad().to_vector<double>();
    for (int i = 0; i < 3; ++i) {
      const double expected = (retain ? 4.0 : 2.0) * std::exp(4.0 * (i + 1));
      EXPECT_NEAR(g[i], expected, 1e-12 * expected);
    }
  }
}

TEST(Autograd, NonScalarNeedsAGradient) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * x;
  try {
    y.backward();
    FAIL() << "backward on a non-scalar without a gradient must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[3]"), std::string::npos) << e.what();
  }
  y.backward(Tensor::from_vector<double>({1, 0, 2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 0, 12}));
  EXPECT_THROW(leaf({1}).detach().backward(), Error);  // nothing requires grad
  Tensor z = x * x;
  EXPECT_THROW(z.backward(Tensor::from_vector<double>({1, 2})), Error);  // wrong gradient shape
  autograd::clear_tape();
}

TEST(Autograd, UnitSeedIsTheImpliedSeedOnly) {
  // An op that reports whether its output's gradient is the unit seed, and passes it on.
  auto probe = [](const Tensor& x, std::vector<bool>& seen) {
    Tensor out = sum(x.detach());
    autograd::record("probe", out, {x}, [&seen, shape = x.shape()](const Tensor& g, const std::vector<bool>&) {
      seen.push_back(autograd::is_unit_seed(g));
      return std::vector<Tensor>{mul(ones(shape, kFloat64), g)};
    });
    return out;
  };
  Tensor x = randn({3}, kFloat64).requires_grad_();
  std::vector<bool> seen;
  probe(x, seen).backward();
  probe(x, seen).backward(full({}, 1.0, kFloat64));          // ones, but passed in: unknown to the engine
  mul(probe(x, seen), scalar_like(2, x)).backward();          // an op in between made a new gradient
  add(probe(x, seen), scalar_like(2, x)).backward();          // add passes the seed itself through
  probe(x, seen).backward();                                  // the next implied seed, recognized too
  EXPECT_EQ(seen, (std::vector<bool>{true, false, false, true, true}));
  EXPECT_FALSE(autograd::is_unit_seed(full({}, 1.0, kFloat64)));  // outside any backward
}

TEST(Autograd, DetachStopsGradients) {
  Tensor x = leaf({2});
  Tensor y = (x * x.detach()).sum();  // only the first factor carries gradient
  y.backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 2.0);
}

TEST(Autograd, GradientIsNotSharedBetweenLeaves) {
  Tensor a = leaf({1}), b = leaf({1});
  (a + b).sum().backward();
  // add hands one gradient tensor to both inputs; each leaf must own its copy.
  a.grad().data<double>()[0] = 5;
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), 1.0);
}

TEST(Autograd, MemoryDoesNotGrowOverManySteps) {
  manual_seed(0);
  Tensor w = randn({16, 16}, kFloat64).requires_grad_();
  Tensor x = randn({8, 16}, kFloat64);
  auto step = [&] {
    Tensor h = relu(x.unsqueeze(1) * w.unsqueeze(0));  // [8, 16, 16]
    Tensor loss = (h * h).mean() + mean(sum(sigmoid(h), {1}));
    loss.backward();
    w.set_grad(Tensor());
  };
  for (int i = 0; i < 10; ++i) step();
  size_t baseline = memory_stats(Device::cpu()).bytes_in_use;
  for (int i = 0; i < 1000; ++i) step();
  EXPECT_EQ(autograd::tape_size(), 0u);
  EXPECT_EQ(memory_stats(Device::cpu()).bytes_in_use, baseline);
}

}  // namespace minidl::autograd_test
