// Modules: forward against the functional ops, registration and naming, state_dict, device/dtype
// moves, train/eval, initialization bounds.
#include <gtest/gtest.h>

#include <cmath>

#include "minidl.h"
#include "nn/nn.h"

namespace minidl::nn_test {

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (double v : (a - b).to(kFloat64).to_vector<double>()) worst = std::max(worst, std::abs(v));
  return worst;
}

struct Net : nn::Module {
  Net() : conv(nn::Conv2dOptions(1, 2, 3).padding(1)), fc(2 * 4 * 4, 3) {
    register_module("conv", conv);
    register_module("fc", fc);
    register_buffer("steps", zeros({1}));
  }
  Tensor forward(const Tensor& x) override {
    return fc(flatten(nn::functional::max_pool2d(relu(conv(x)), 2), 1));
  }
  nn::Conv2d conv;
  nn::Linear fc;
};

}  // namespace

TEST(Modules, LinearMatchesFunctional) {
  manual_seed(1);
  nn::Linear fc(5, 3);
  Tensor x = randn({4, 5});
  EXPECT_LT(max_abs_diff(fc(x), matmul(x, fc->weight.t()) + fc->bias), 1e-5);
  EXPECT_EQ(fc(randn({2, 6, 5})).shape(), (Shape{2, 6, 3}));
  nn::Linear no_bias(nn::LinearOptions(5, 3).bias(false));
  EXPECT_FALSE(no_bias->bias.defined());
  EXPECT_EQ(no_bias->parameters().size(), 1u);
  EXPECT_THROW(fc(randn({4, 6})), Error);
}

TEST(Modules, Conv2dAndPoolMatchFunctional) {
  manual_seed(2);
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, {3, 2}).stride(2).padding(1));
  Tensor x = randn({2, 2, 7, 6});
  EXPECT_LT(max_abs_diff(conv(x), conv2d(x, conv->weight, conv->bias, 2, 1)), 1e-5);
  nn::MaxPool2d pool(nn::MaxPool2dOptions(3).stride(2));
  EXPECT_EQ(max_abs_diff(pool(x), max_pool2d(x, 3, Size2(2))), 0.0);
  EXPECT_EQ(nn::MaxPool2d(2)(x).shape(), (Shape{2, 2, 3, 3}));
}

TEST(Modules, DefaultInitializationBounds) {
  manual_seed(3);
  nn::Linear fc(400, 50);
  double bound = 1.0 / std::sqrt(400.0);
  auto w = fc->weight.to_vector<float>();
  auto b = fc->bias.to_vector<float>();
  double max_w = 0;
  for (float v : w) max_w = std::max(max_w, std::abs(double(v)));
  for (float v : b) EXPECT_LE(std::abs(v), bound);
  EXPECT_LE(max_w, bound);
  EXPECT_GT(max_w, 0.95 * bound);  // uniform over the whole range, not a narrower one
  nn::Conv2d conv(nn::Conv2dOptions(4, 8, 3));
  double cbound = 1.0 / std::sqrt(4.0 * 9);
  for (float v : conv->weight.to_vector<float>()) EXPECT_LE(std::abs(v), cbound);
}

TEST(Modules, SeededInitIsReproducible) {
  manual_seed(5);
  Net a;
  manual_seed(5);
  Net b;
  EXPECT_EQ(a.fc->weight.to_vector<float>(), b.fc->weight.to_vector<float>());
}

TEST(Modules, NamedParametersAndChildren) {
  Net net;
  std::vector<std::string> names;
  for (auto& [name, t] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "fc.weight", "fc.bias"}));
  EXPECT_EQ(net.parameters().size(), 4u);
  EXPECT_EQ(net.children().size(), 2u);
  EXPECT_EQ(net.named_buffers().size(), 1u);
  for (Tensor& p : net.parameters()) EXPECT_TRUE(p.requires_grad());
}

TEST(Modules, SequentialChainsAndNames) {
  manual_seed(4);
  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Dropout(0.5), nn::Linear(8, 2));
  EXPECT_EQ(seq->size(), 4u);
  EXPECT_EQ(seq->named_parameters()[0].first, "0.weight");
  EXPECT_EQ(seq->named_parameters()[2].first, "3.weight");
  seq->eval();
  Tensor x = randn({3, 4});
  auto* l0 = dynamic_cast<nn::LinearImpl*>((*seq)[0].get());
  auto* l3 = dynamic_cast<nn::LinearImpl*>((*seq)[3].get());
  Tensor expected = linear(relu(linear(x, l0->weight, l0->bias)), l3->weight, l3->bias);
  EXPECT_LT(max_abs_diff(seq(x), expected), 1e-6);
  seq->push_back(nn::Flatten());
  EXPECT_EQ(seq->size(), 5u);
}

TEST(Modules, TrainEvalReachesChildren) {
  nn::Sequential seq(nn::Linear(4, 4), nn::Dropout(0.9));
  seq->eval();
  EXPECT_FALSE((*seq)[1]->is_training());
  Tensor x = ones({2, 4});
  EXPECT_LT(max_abs_diff(seq(x), seq(x)), 1e-7);  // no dropout in eval
  seq->train();
  EXPECT_TRUE((*seq)[1]->is_training());
}

TEST(Modules, StateDictRoundTrip) {
  manual_seed(6);
  Net a;
  manual_seed(7);
  Net b;
  Tensor x = randn({2, 1, 8, 8});
  EXPECT_GT(max_abs_diff(a.forward(x), b.forward(x)), 1e-4);
  nn::StateDict state = a.state_dict();
  EXPECT_EQ(state.size(), 5u);  // 4 parameters and 1 buffer
  b.load_state_dict(state);
  EXPECT_LT(max_abs_diff(a.forward(x), b.forward(x)), 1e-7);
  // Loading copies: changing a afterwards leaves b alone.
  a.fc->weight.data<float>()[0] += 1;
  EXPECT_NE(a.fc->weight.to_vector<float>()[0], b.fc->weight.to_vector<float>()[0]);
}

TEST(Modules, LoadStateDictErrorsNameTheKey) {
  Net net;
  nn::StateDict state = net.state_dict();
  state.erase("fc.bias");
  state["extra"] = zeros({1});
  try {
    net.load_state_dict(state);
    FAIL() << "missing and unexpected keys must throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("fc.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("extra"), std::string::npos) << msg;
  }
  nn::StateDict wrong = net.state_dict();
  wrong["fc.weight"] = zeros({2, 2});
  EXPECT_THROW(net.load_state_dict(wrong), Error);
}

TEST(Modules, ToDtypeKeepsHandlesValid) {
  Net net;
  Tensor handle = net.fc->weight;  // a handle taken before the move, like an optimizer's
  net.to(kFloat64);
  EXPECT_EQ(handle.dtype(), kFloat64);
  EXPECT_EQ(net.fc->weight.dtype(), kFloat64);
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_EQ(net.forward(randn({1, 1, 8, 8}, kFloat64)).dtype(), kFloat64);
}

TEST(Modules, GradientsReachEveryParameter) {
  manual_seed(8);
  Net net;
  Tensor loss = cross_entropy(net.forward(randn({3, 1, 8, 8})), Tensor::from_vector<int64_t>({0, 2, 1}));
  loss.backward();
  for (auto& [name, p] : net.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  net.zero_grad();
  for (auto& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Modules, CrossEntropyLossModule) {
  nn::CrossEntropyLoss criterion;
  Tensor logits = randn({4, 3});
  Tensor target = Tensor::from_vector<int64_t>({0, 1, 2, 1});
  EXPECT_NEAR(criterion(logits, target).item<float>(), cross_entropy(logits, target).item<float>(), 1e-6);
}

}  // namespace minidl::nn_test
