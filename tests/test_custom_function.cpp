// Custom autograd Functions: forward/backward pairs, the context's saved tensors and data, outputs
// marked non-differentiable, and twice-differentiable backwards.
#include <gtest/gtest.h>

#include "higher_order_util.h"
#include "minidl.h"
#include "ops/gradcheck.h"
#include "test_util.h"

namespace minidl::custom_function_test {

namespace {

using autograd::AutogradContext;
using autograd::Function;
using autograd::tensor_list;
using testing::expect_error;

// The two Functions of pytorch/examples' autograd program, written from their description.
struct LinearFunction : Function<LinearFunction> {
  static Tensor forward(AutogradContext* ctx, Tensor input, Tensor weight, Tensor bias = Tensor()) {
    ctx->save_for_backward({input, weight, bias});
    Tensor output = matmul(input, weight.t());
    if (bias.defined()) output = output + expand(unsqueeze(bias, 0), output.shape());
    return output;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    Tensor g = grad_outputs[0];
    Tensor grad_bias = saved[2].defined() ? sum(g, {0}) : Tensor();
    return {matmul(g, saved[1]), matmul(g.t(), saved[0]), grad_bias};
  }
};

struct MulConstant : Function<MulConstant> {
  static Tensor forward(AutogradContext* ctx, Tensor tensor, double constant) {
    ctx->saved_data["constant"] = constant;
    return tensor * constant;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    return {grad_outputs[0] * ctx->saved_data["constant"].toDouble(), Tensor()};
  }
};

// Two outputs: the square (differentiable) and the sign pattern (marked non-differentiable).
struct SquareAndSign : Function<SquareAndSign> {
  static tensor_list forward(AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    Tensor sign = gt(x, 0).to(kFloat64);
    ctx->mark_non_differentiable({sign});
    return {x * x, sign};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    // Materialized: the sign's gradient arrives as zeros.
    EXPECT_TRUE(grad_outputs[1].defined());
    EXPECT_EQ(sum(abs(grad_outputs[1])).item<double>(), 0.0);
    return {grad_outputs[0] * 2 * ctx->get_saved_variables()[0]};
  }
};

// A backward that reads the saved output: exp.
struct Exp : Function<Exp> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    Tensor y = exp(x);
    ctx->save_for_backward({y});
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    return {grad_outputs[0] * ctx->get_saved_variables()[0]};
  }
};

struct Cube : Function<Cube> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    Tensor x = ctx->get_saved_variables()[0];
    return {grad_outputs[0] * 3 * x * x};
  }
};

TEST(CustomFunction, LinearFunctionGradcheck) {
  Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  Tensor w = randn({4, 3}, kFloat64).requires_grad_();
  Tensor b = randn({4}, kFloat64).requires_grad_();
  auto r = gradcheck([](auto& in) { return LinearFunction::apply(in[0], in[1], in[2]); }, {x, w, b});
  EXPECT_TRUE(r) << r.message;
  auto r2 = gradcheck([](auto& in) { return LinearFunction::apply(in[0], in[1]); }, {x, w});
  EXPECT_TRUE(r2) << r2.message;
  x.set_grad(Tensor());  // gradcheck leaves its last row's gradient there
  Tensor y = LinearFunction::apply(x, w);
  EXPECT_EQ(y.grad_fn()->name(), "LinearFunctionBackward");
  y.sum().backward();
  // d sum(x w^T) / dx = column sums of w, in every row.
  EXPECT_TRUE(allclose(x.grad(), expand(unsqueeze(sum(w, {0}), 0), {2, 3}).detach()));
}

TEST(CustomFunction, MulConstant) {
  Tensor x = randn({2}, kFloat64).requires_grad_();
  Tensor y = MulConstant::apply(x, 5.5);
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5.5, 5.5}));
  auto r = gradcheck([](auto& in) { return MulConstant::apply(in[0], -2.0); }, {randn({3}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(CustomFunction, NonDifferentiableOutput) {
  Tensor x = randn({5}, kFloat64).requires_grad_();
  tensor_list out = SquareAndSign::apply(x);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  auto r = gradcheck([](auto& in) { return SquareAndSign::apply(in[0])[0]; }, {x});
  EXPECT_TRUE(r) << r.message;
}

TEST(CustomFunction, SavedOutputAndSecondDerivatives) {
  Tensor x = randn({4}, kFloat64).requires_grad_();
  auto r = gradcheck([](auto& in) { return Exp::apply(in[0]); }, {x});
  EXPECT_TRUE(r) << r.message;
  auto r2 = testing::gradgradcheck([](auto& in) { return Exp::apply(in[0]); }, {x});
  EXPECT_TRUE(r2) << r2.message;
  auto r3 = testing::gradgradcheck([](auto& in) { return Cube::apply(in[0]); }, {x});
  EXPECT_TRUE(r3) << r3.message;
  // The entry does not keep its own output alive: the graph goes with its last tensor.
  { Tensor y = Exp::apply(x); }
  EXPECT_EQ(autograd::tape_size(), 0u);
}

TEST(CustomFunction, SavedDataKinds) {
  AutogradContext ctx;
  ctx.saved_data["d"] = 0.5;
  ctx.saved_data["i"] = 3;
  ctx.saved_data["b"] = true;
  ctx.saved_data["s"] = "name";
  ctx.saved_data["t"] = ones({2});
  EXPECT_EQ(ctx.saved_data["d"].toDouble(), 0.5);
  EXPECT_EQ(ctx.saved_data["i"].toInt(), 3);
  EXPECT_TRUE(ctx.saved_data["b"].toBool());
  EXPECT_EQ(ctx.saved_data["s"].toStringRef(), "name");
  EXPECT_EQ(ctx.saved_data["t"].toTensor().numel(), 2);
  expect_error([&] { ctx.saved_data["i"].toDouble(); }, {"expected Double but got Int"});
  expect_error([&] { ctx.saved_data["d"].toTensor(); }, {"expected Tensor but got Double"});
}

struct NeedsProbe : Function<NeedsProbe> {
  static inline std::vector<bool> seen;
  static Tensor forward(AutogradContext*, Tensor a, Tensor b) { return a * b; }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    seen = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return {g[0], g[0]};
  }
};

struct WrongCount : Function<WrongCount> {
  static Tensor forward(AutogradContext*, Tensor a) { return a * 2; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0], g[0]}; }
};

struct Identity : Function<Identity> {
  static Tensor forward(AutogradContext*, Tensor a) { return a; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 2}; }
};

TEST(CustomFunction, ContextAndErrors) {
  Tensor a = randn({3}, kFloat64).requires_grad_(), b = randn({3}, kFloat64);
  NeedsProbe::apply(a, b).sum().backward();
  EXPECT_EQ(NeedsProbe::seen, (std::vector<bool>{true, false}));
  EXPECT_FALSE(b.grad().defined());
  expect_error([&] { WrongCount::apply(a).sum().backward(); },
               {"WrongCountBackward", "incorrect number of gradients (expected 1, got 2)"});
  // An input returned as it is: the output is a new tensor, the input stays a leaf.
  a.set_grad(Tensor());
  Tensor y = Identity::apply(a);
  EXPECT_TRUE(a.is_leaf());
  EXPECT_FALSE(y.is_leaf());
  y.sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>(3, 2.0)));
  // Nothing requires grad: nothing is recorded.
  EXPECT_FALSE(MulConstant::apply(b, 2.0).requires_grad());
}

TEST(CustomFunction, SavedTensorsAreVersionChecked) {
  Tensor x = randn({3}, kFloat64).requires_grad_();
  Tensor h = x * 1;  // a non-leaf we may change in place outside grad mode
  Tensor y = Cube::apply(h);
  {
    NoGradGuard no_grad;
    add_(h, ones({3}, kFloat64));
  }
  expect_error([&] { y.sum().backward(); }, {"modified by an inplace operation", "CubeBackward"});
}

}  // namespace

}  // namespace minidl::custom_function_test
