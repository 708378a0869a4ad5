// linear_gelu_linear, a transformer's MLP as one op whose backward makes the GELU's output again
// instead of saving it: values and gradients against linear(gelu(linear(x, w1, b1)), w2, b2) in
// float64 (the same kernels, so within rounding) and float32, float64 gradient checks for every
// input with and without each bias and both approximations, each input's gradient alone (the
// products the backward skips), bfloat16 under autocast against float32, the errors, and the
// modules that run it (Linear::forward_gelu_linear, TransformerEncoderLayer without dropout).
// The CUDA tests (suite CudaLinearGeluLinear) skip without a GPU; on one they compare float32 and
// bfloat16-autocast values and gradients with the CPU composition, and gradcheck in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "minidl.h"
#include "core/allocator.h"
#include "nn/nn.h"
#include "ops/autocast_policy.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::linear_gelu_linear_test {

using namespace minidl::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Fn fused(const std::string& approximate, bool keep_gelu_output = false) {
  return [approximate, keep_gelu_output](const std::vector<Tensor>& t) {
    return linear_gelu_linear(t[0], t[1], t[2], t[3], t[4], approximate, keep_gelu_output);
  };
}

Fn composed(const std::string& approximate) {
  return [approximate](const std::vector<Tensor>& t) {
    return linear(gelu(linear(t[0], t[1], t[2]), approximate), t[3], t[4]);
  };
}

// x [..., in], w1 [hidden, in], b1 [hidden] (or undefined), w2 [out, hidden], b2 [out] (or
// undefined), unit normal, of `dtype` on the CPU, not requiring grad.
std::vector<Tensor> draw_layers(const Shape& x_shape, int64_t hidden, int64_t out, bool bias1, bool bias2,
                                DType dtype = kFloat64) {
  const int64_t in = x_shape.back();
  return {randn(x_shape, dtype), randn({hidden, in}, dtype), bias1 ? randn({hidden}, dtype) : Tensor(),
          randn({out, hidden}, dtype), bias2 ? randn({out}, dtype) : Tensor()};
}

// The output of f on fresh leaves copied from `inputs` (those `wanted` requiring grad) and their
// gradients from sum(output * seed) (undefined where not wanted).
struct Result {
  Tensor out;
  std::vector<Tensor> grads;
};
Result run(const Fn& f, const std::vector<Tensor>& inputs, const std::vector<bool>& wanted, const Tensor& seed) {
  std::vector<Tensor> leaves;
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      leaves.emplace_back();
      continue;
    }
    leaves.push_back(inputs[i].detach().clone());
    if (wanted[i]) leaves.back().requires_grad_(), any = true;
  }
  Result r{f(leaves), {}};
  if (any) (r.out * seed.to(r.out.device())).sum().backward();
  for (size_t i = 0; i < leaves.size(); ++i)
    r.grads.push_back(leaves[i].defined() && wanted[i] ? leaves[i].grad() : Tensor());
  return r;
}

const std::vector<bool> kAll(5, true);
const char* const kNames[] = {"x", "w1", "b1", "w2", "b2"};

// Outputs and every gradient of a and b, elementwise within atol + rtol * |b|.
void expect_results_close(const Result& a, const Result& b, double atol, double rtol) {
  EXPECT_TRUE(all_close(a.out, b.out, atol, rtol)) << "output";
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_EQ(a.grads[i].defined(), b.grads[i].defined()) << "gradient of " << kNames[i];
    if (!a.grads[i].defined()) continue;
    EXPECT_TRUE(all_close(a.grads[i], b.grads[i], atol, rtol)) << "gradient of " << kNames[i];
  }
}

double rms(const Tensor& t) {
  const std::vector<double> v = t.detach().to(Device::cpu()).to(kFloat64).to_vector<double>();
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0 : std::sqrt(s / static_cast<double>(v.size()));
}

// A 16-bit (or autocast) result against the float32 one: each element within
// tol * (|reference| + rms(reference)), as tests/test_reduced_precision_matmul_conv.cpp bounds them.
::testing::AssertionResult close_to_scale(const Tensor& got, const Tensor& ref, double tol) {
  return all_close(got.detach().to(Device::cpu()).to(kFloat32), ref.detach().to(Device::cpu()).to(kFloat32),
                   tol * rms(ref), tol);
}

}  // namespace

// The same kernels as the composition in the same order: equal within float64 rounding, for a 2-D
// and a 3-D input, each bias present or not, both approximations.
TEST(LinearGeluLinear, EqualsCompositionInFloat64) {
  manual_seed(41);
  for (const char* approximate : {"none", "tanh"}) {
    for (const Shape& x_shape : {Shape{3, 5}, Shape{2, 3, 5}}) {
      for (int biases = 0; biases < 4; ++biases) {
        SCOPED_TRACE(std::string(approximate) + " x " + shape_str(x_shape) + " biases " + std::to_string(biases));
        const std::vector<Tensor> in = draw_layers(x_shape, 7, 4, biases & 1, biases & 2);
        Shape out_shape = x_shape;
        out_shape.back() = 4;
        const Tensor seed = randn(out_shape, kFloat64);
        const Result f = run(fused(approximate), in, kAll, seed), c = run(composed(approximate), in, kAll, seed);
        EXPECT_EQ(f.out.shape(), out_shape);
        expect_results_close(f, c, 1e-12, 1e-12);
      }
    }
  }
}

TEST(LinearGeluLinear, GradcheckEveryInput) {
  manual_seed(42);
  for (const char* approximate : {"none", "tanh"}) {
    for (const Shape& x_shape : {Shape{3, 5}, Shape{2, 3, 5}}) {
      for (int biases = 0; biases < 4; ++biases) {
        SCOPED_TRACE(std::string(approximate) + " x " + shape_str(x_shape) + " biases " + std::to_string(biases));
        std::vector<Tensor> in = draw_layers(x_shape, 7, 4, biases & 1, biases & 2);
        for (Tensor& t : in)
          if (t.defined()) t.requires_grad_();
        GradcheckResult r = gradcheck(fused(approximate), in, {1e-6, 1e-8, 1e-6});
        EXPECT_TRUE(r) << r.message;
      }
    }
  }
}

// One input alone wanting a gradient, and all but one: the backward skips the products no one
// needs (the GELU's output is not made again for a frozen w2; x is not kept for a frozen w1).
TEST(LinearGeluLinear, GradientsOfSomeInputsOnly) {
  manual_seed(43);
  const std::vector<Tensor> in = draw_layers({2, 3, 5}, 7, 4, true, true);
  const Tensor seed = randn({2, 3, 4}, kFloat64);
  for (const char* approximate : {"none", "tanh"}) {
    for (size_t i = 0; i < in.size(); ++i) {
      for (bool alone : {true, false}) {
        SCOPED_TRACE(std::string(approximate) + (alone ? " only " : " all but ") + kNames[i]);
        std::vector<bool> wanted(in.size(), !alone);
        wanted[i] = alone;
        expect_results_close(run(fused(approximate), in, wanted, seed), run(composed(approximate), in, wanted, seed),
                             1e-12, 1e-12);
      }
    }
  }
  // No input wants a gradient: nothing is recorded.
  EXPECT_FALSE(linear_gelu_linear(in[0], in[1], in[2], in[3], in[4]).requires_grad());
}

TEST(LinearGeluLinear, Float32MatchesComposition) {
  manual_seed(44);
  const std::vector<Tensor> in = draw_layers({4, 6, 16}, 24, 8, true, true, kFloat32);
  const Tensor seed = randn({4, 6, 8});
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    expect_results_close(run(fused(approximate), in, kAll, seed), run(composed(approximate), in, kAll, seed), 1e-5,
                         1e-5);
  }
}

// Under a CPU autocast region the op runs in bfloat16 (its inputs cast, the output bfloat16) and the
// float32 leaves get float32 gradients, all close to the float32 op's.
TEST(LinearGeluLinear, BFloat16UnderAutocastOnTheCpu) {
  manual_seed(45);
  std::vector<Tensor> in = draw_layers({6, 16}, 24, 8, true, true, kFloat32);
  for (Tensor& t : in) t = t.to(kBFloat16).to(kFloat32);  // the cast to bfloat16 is then exact
  const Tensor seed = randn({6, 8}).to(kBFloat16).to(kFloat32);
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    const Result reference = run(composed(approximate), in, kAll, seed);
    Result low;
    {
      AutocastGuard guard(Device::cpu(), kBFloat16);
      EXPECT_EQ(fused(approximate)(in).dtype(), kBFloat16);
      EXPECT_EQ(autocast::last_dispatch().op, "linear_gelu_linear");
      EXPECT_EQ(autocast::last_dispatch().dtype, kBFloat16);
      low = run(fused(approximate), in, kAll, seed);
    }
    EXPECT_EQ(low.out.dtype(), kBFloat16);
    EXPECT_TRUE(close_to_scale(low.out, reference.out, 1e-2)) << "output";
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(low.grads[i].dtype(), kFloat32) << kNames[i];
      EXPECT_TRUE(close_to_scale(low.grads[i], reference.grads[i], 2e-2)) << "gradient of " << kNames[i];
    }
  }
}

TEST(LinearGeluLinear, BadInputsAreErrors) {
  const Tensor x = randn({2, 5}), w1 = randn({4, 5}), b1 = randn({4}), w2 = randn({3, 4}), b2 = randn({3});
  EXPECT_NO_THROW(linear_gelu_linear(x, w1, b1, w2, b2));
  expect_error([&] { linear_gelu_linear(randn({2, 3}), w1, b1, w2); }, {"linear", "[2, 3]", "[4, 5]"});
  expect_error([&] { linear_gelu_linear(x, w1, randn({5}), w2); }, {"bias", "[4]"});
  expect_error([&] { linear_gelu_linear(x, w1, b1, randn({3, 5})); },
               {"linear_gelu_linear", "second weight of shape [out, 4]", "[3, 5]"});
  expect_error([&] { linear_gelu_linear(x, w1, b1, w2, randn({4})); }, {"linear_gelu_linear", "second bias", "[3]"});
  expect_error([&] { linear_gelu_linear(x, w1, b1, randn({3, 4}, kFloat64)); },
               {"linear_gelu_linear", "second weight of dtype"});
  expect_error([&] { linear_gelu_linear(x, w1, b1, w2, b2, "erf"); }, {"approximate", "\"erf\""});
}

// The tape keeps the GELU's input only: while the output lives, the op holds it and one
// [rows, hidden] tensor (x and the weights are the caller's); the composition holds two.
TEST(LinearGeluLinear, KeepsOneHiddenTensorForTheBackward) {
  manual_seed(49);
  const int64_t rows = 32, in = 8, hidden = 512, out = 8;
  std::vector<Tensor> t = draw_layers({rows, in}, hidden, out, true, true, kFloat32);
  for (Tensor& p : t) p.requires_grad_();
  const size_t hidden_bytes = rows * hidden * sizeof(float), out_bytes = rows * out * sizeof(float);
  auto held_by_output = [&](const Fn& f) {
    const size_t before = memory_stats(Device::cpu()).bytes_in_use;
    const Tensor y = f(t);
    return memory_stats(Device::cpu()).bytes_in_use - before;
  };
  const size_t fused_bytes = held_by_output(fused("none")), composed_bytes = held_by_output(composed("none"));
  EXPECT_GE(fused_bytes, hidden_bytes + out_bytes);
  EXPECT_LT(fused_bytes, hidden_bytes + out_bytes + hidden_bytes / 4);
  EXPECT_GE(composed_bytes, 2 * hidden_bytes + out_bytes);
}

// keep_gelu_output saves the GELU's output too (a second [rows, hidden] tensor while the output
// lives), and the backward reads it instead of making it again: the same values and gradients, for
// every subset of inputs wanting a gradient that the backward treats apart; and a gradient check.
TEST(LinearGeluLinear, KeepingTheGeluOutputChangesNoResult) {
  manual_seed(50);
  for (DType dtype : {kFloat64, kFloat32}) {
    const std::vector<Tensor> in = draw_layers({2, 3, 5}, 7, 4, true, true, dtype);
    const Tensor seed = randn({2, 3, 4}, dtype);
    for (const char* approximate : {"none", "tanh"}) {
      for (int subset = 0; subset < 4; ++subset) {  // all; w2 alone; all but w2; x alone
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + approximate + " subset " + std::to_string(subset));
        std::vector<bool> wanted = kAll;
        if (subset == 1) wanted = {false, false, false, true, false};
        if (subset == 2) wanted = {true, true, true, false, true};
        if (subset == 3) wanted = {true, false, false, false, false};
        const Result kept = run(fused(approximate, true), in, wanted, seed);
        const Result made_again = run(fused(approximate, false), in, wanted, seed);
        expect_results_close(kept, made_again, 0, 0);
      }
    }
  }
  std::vector<Tensor> in = draw_layers({2, 3, 5}, 7, 4, true, true);
  for (Tensor& t : in) t.requires_grad_();
  GradcheckResult r = gradcheck(fused("none", true), in, {1e-6, 1e-8, 1e-6});
  EXPECT_TRUE(r) << r.message;

  const int64_t rows = 32, hidden = 512, out = 8;
  std::vector<Tensor> t = draw_layers({rows, 8}, hidden, out, true, true, kFloat32);
  for (Tensor& p : t) p.requires_grad_();
  const size_t before = memory_stats(Device::cpu()).bytes_in_use;
  const Tensor y = fused("none", true)(t);
  const size_t held = memory_stats(Device::cpu()).bytes_in_use - before;
  const size_t hidden_bytes = rows * hidden * sizeof(float), out_bytes = rows * out * sizeof(float);
  EXPECT_GE(held, 2 * hidden_bytes + out_bytes);
  EXPECT_LT(held, 2 * hidden_bytes + out_bytes + hidden_bytes / 4);
}

// The forward's GELU and derivative for a kept layer (Kernels::gelu_with_derivative): the GELU's
// values, and the derivative against central differences of gelu in float64.
TEST(LinearGeluLinear, GeluWithDerivativeIsTheGeluAndItsSlope) {
  manual_seed(51);
  for (bool tanh : {false, true}) {
    SCOPED_TRACE(tanh ? "tanh" : "none");
    const char* approximate = tanh ? "tanh" : "none";
    const Tensor x = randn({257}, kFloat64) * 3.0;
    Tensor out = empty_like(x), derivative = empty_like(x);
    kernels_for(Device::cpu()).gelu_with_derivative(tanh, x, out, derivative);
    EXPECT_TRUE(out.equal(gelu(x, approximate)));
    const double h = 1e-6;
    const Tensor slope = (gelu(x + h, approximate) - gelu(x - h, approximate)) / (2 * h);
    EXPECT_TRUE(all_close(derivative, slope, 1e-8, 1e-8));
  }
}

// gelu's backward is not differentiable twice, nor is the fused op's: a create_graph backward
// through it stops with an error naming it.
TEST(LinearGeluLinear, CreateGraphBackwardIsAnError) {
  manual_seed(46);
  std::vector<Tensor> in = draw_layers({3, 5}, 7, 4, true, true);
  for (Tensor& t : in) t.requires_grad_();
  const Tensor y = fused("none")(in).sum();
  expect_error([&] { autograd::grad({y}, {in[0]}, {}, true, true); }, {"linear_gelu_linear", "differentiable twice"});
}

TEST(LinearGeluLinear, LinearModuleForwardGeluLinear) {
  manual_seed(47);
  nn::Linear first(5, 7), second(nn::LinearOptions(7, 4).bias(false));
  first->to(kFloat64);
  second->to(kFloat64);
  const Tensor x = randn({2, 3, 5}, kFloat64);
  EXPECT_TRUE(all_close(first->forward_gelu_linear(x, *second, "tanh"),
                        second->forward(gelu(first->forward(x), "tanh")), 1e-12, 1e-12));
  nn::Linear wrong(6, 4);
  expect_error([&] { first->forward_gelu_linear(x, *wrong); }, {"6 inputs", "7 outputs"});
  expect_error([&] { first->forward_gelu_linear(randn({2, 6}, kFloat64), *second); }, {"last dimension 5"});
}

// With the dropout between its two linear layers off (eval, or p = 0) the encoder layer's GELU
// feed-forward block runs fused: the same values and input gradient as its blocks composed.
TEST(LinearGeluLinear, TransformerEncoderLayerWithoutDropout) {
  manual_seed(48);
  nn::TransformerEncoderLayer layer(
      nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).batch_first(true).activation("gelu"));
  layer->to(kFloat64);
  layer->eval();
  const Tensor x = randn({2, 5, 8}, kFloat64);
  auto hand = [&](const Tensor& in) {
    Tensor x1 = layer->norm1->forward(add(in, std::get<0>(layer->self_attn->forward(in, in, in))));
    return layer->norm2->forward(add(x1, layer->linear2->forward(gelu(layer->linear1->forward(x1)))));
  };
  const Tensor seed = randn({2, 5, 8}, kFloat64);
  const Result got = run([&](const std::vector<Tensor>& t) { return layer->forward(t[0]); }, {x}, {true}, seed);
  const Result want = run([&](const std::vector<Tensor>& t) { return hand(t[0]); }, {x}, {true}, seed);
  EXPECT_TRUE(all_close(got.out, want.out, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(got.grads[0], want.grads[0], 1e-12, 1e-12));
}

// ---- CUDA (skips without a GPU) ----

namespace {

// Inputs scaled so that the hidden layer and the output are about 1 whatever the depth of the
// sums, where an absolute tolerance means the same everywhere; bfloat16-representable values, so
// that autocast's casts are exact.
std::vector<Tensor> scaled_layers(const Shape& x_shape, int64_t hidden, int64_t out, bool bias1, bool bias2) {
  std::vector<Tensor> in = draw_layers(x_shape, hidden, out, bias1, bias2, kFloat32);
  in[1] = in[1] * (1 / std::sqrt(double(x_shape.back())));
  in[3] = in[3] * (1 / std::sqrt(double(hidden)));
  for (Tensor& t : in)
    if (t.defined()) t = t.to(kBFloat16).to(kFloat32);
  return in;
}

std::vector<Tensor> on_gpu(const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.defined() ? t.to(gpu()) : Tensor());
  return out;
}

}  // namespace

// CUDA float32 and bfloat16 under autocast against the CPU's float32 composition: output and every
// gradient, for a 3-D input with both biases and a 2-D one without the first.
TEST(CudaLinearGeluLinear, Float32AndAutocastMatchTheCpuComposition) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  struct Case {
    Shape x;
    int64_t hidden, out;
    bool bias1, bias2;
  };
  for (const Case& c : {Case{{2, 37, 48}, 192, 48, true, true}, Case{{64, 32}, 128, 10, false, true}}) {
    for (const char* approximate : {"none", "tanh"}) {
      SCOPED_TRACE(shape_str(c.x) + " hidden " + std::to_string(c.hidden) + " " + approximate);
      const std::vector<Tensor> in = scaled_layers(c.x, c.hidden, c.out, c.bias1, c.bias2);
      Shape out_shape = c.x;
      out_shape.back() = c.out;
      const Tensor seed = randn(out_shape).to(kBFloat16).to(kFloat32);
      const Result reference = run(composed(approximate), in, kAll, seed);
      const std::vector<Tensor> in_gpu = on_gpu(in);
      const Result f32 = run(fused(approximate), in_gpu, kAll, seed);
      ASSERT_EQ(f32.out.device(), gpu());
      expect_results_close(f32, reference, 1e-4, 1e-4);
      Result low;
      {
        AutocastGuard guard(gpu(), kBFloat16);
        low = run(fused(approximate), in_gpu, kAll, seed);
      }
      EXPECT_EQ(low.out.dtype(), kBFloat16);
      // Two layers round twice: the hidden layer and its gradient are bfloat16 too.
      EXPECT_TRUE(close_to_scale(low.out, reference.out, 2e-2)) << "output";
      for (size_t i = 0; i < in.size(); ++i) {
        if (!in[i].defined()) continue;
        EXPECT_EQ(low.grads[i].dtype(), kFloat32) << kNames[i];
        EXPECT_TRUE(close_to_scale(low.grads[i], reference.grads[i], 3e-2)) << "gradient of " << kNames[i];
      }
      // Each first-layer input alone, and the second weight alone: the skipped products on CUDA.
      for (size_t i : {size_t(0), size_t(1), size_t(3)}) {
        std::vector<bool> wanted(in.size(), false);
        wanted[i] = true;
        EXPECT_TRUE(all_close(run(fused(approximate), in_gpu, wanted, seed).grads[i], reference.grads[i], 1e-4, 1e-4))
            << "gradient of " << kNames[i] << " alone";
      }
    }
  }
}

TEST(CudaLinearGeluLinear, GradcheckInFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    std::vector<Tensor> in = on_gpu(draw_layers({2, 3, 5}, 7, 4, true, true));
    for (Tensor& t : in) t.requires_grad_();
    GradcheckResult r = gradcheck(fused(approximate), in, {1e-6, 1e-8, 1e-6});
    EXPECT_TRUE(r) << r.message;
  }
}

// keep_gelu_output on CUDA: the backward's GELU gradient from the plain kernel rather than the one
// that also makes the output again, within the compute type's rounding of the latter, in float32
// and under bfloat16 autocast.
TEST(CudaLinearGeluLinear, KeepingTheGeluOutputMatches) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const std::vector<Tensor> in = on_gpu(scaled_layers({4, 37, 48}, 192, 48, true, true));
  const Tensor seed = randn({4, 37, 48}).to(kBFloat16).to(kFloat32);
  for (bool autocast_on : {false, true}) {
    for (const char* approximate : {"none", "tanh"}) {
      SCOPED_TRACE(std::string(approximate) + (autocast_on ? " bfloat16 autocast" : " float32"));
      Result kept, made_again;
      {
        std::optional<AutocastGuard> guard;
        if (autocast_on) guard.emplace(gpu(), kBFloat16);
        kept = run(fused(approximate, true), in, kAll, seed);
        made_again = run(fused(approximate, false), in, kAll, seed);
      }
      // Two forwards of the same op: cuBLAS may time and pick other configurations for each. Under
      // autocast, where gemm_times runs, the kept layer multiplies the float32 product by its stored
      // bfloat16 derivative and the other rounds the product first: each rounds twice, in other
      // places, and the gradients differ as bfloat16's do from float32's (3e-2, as above).
      const bool derivative_kept = autocast_on && kernels_for(gpu()).gemm_times_supported(kBFloat16, 48, 192);
      const double tol = derivative_kept ? 3e-2 : autocast_on ? 1e-2 : 1e-5;
      EXPECT_TRUE(close_to_scale(kept.out, made_again.out, tol)) << "output";
      for (size_t i = 0; i < in.size(); ++i)
        EXPECT_TRUE(close_to_scale(kept.grads[i], made_again.grads[i], tol)) << "gradient of " << kNames[i];
    }
  }
}

// The one-pass GELU output and gradient of the backward against the two kernels it replaces (the
// CPU's composed default), for every floating dtype and lengths with and without a vector tail.
TEST(CudaLinearGeluLinear, GeluBackwardWithOutputMatchesTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
    for (int64_t n : {1, 7, 11, 1029, 8003}) {  // 8003: threads with two packs
      for (bool tanh : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " n " + std::to_string(n) + (tanh ? " tanh" : ""));
        const Tensor input = (randn({n}) * 3.0).to(dtype), grad = randn({n}).to(dtype);
        // The reference in float64 from the same (rounded) values.
        const Tensor input64 = input.to(kFloat64);
        Tensor cpu_grad = grad.to(kFloat64).clone(), cpu_out = empty_like(input64);  // grad stays the GPU's input
        kernels_for(Device::cpu()).gelu_backward_with_output(tanh, input64, cpu_grad, cpu_out);
        Tensor gpu_grad = grad.cuda(), gpu_out = empty_like(gpu_grad);
        kernels_for(gpu()).gelu_backward_with_output(tanh, input.cuda(), gpu_grad, gpu_out);
        // Absolute as well as relative: GELU's tail (x far below 0) is a difference of nearly equal
        // terms, a few units of the compute type's last place of 1, whatever its own size.
        const double tol = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 1e-5 : 1e-2;
        EXPECT_TRUE(all_close(gpu_out.cpu().to(kFloat64), cpu_out, tol, tol)) << "output";
        EXPECT_TRUE(all_close(gpu_grad.cpu().to(kFloat64), cpu_grad, tol, tol)) << "gradient";
        // The forward's own kernel (two packs a thread for the 16-bit types) gives the same bits.
        EXPECT_TRUE(gelu(input.cuda(), tanh ? "tanh" : "none").cpu().equal(gpu_out.cpu())) << "forward";
      }
    }
  }
}

// The forward's GELU and derivative in one pass (what a kept layer stores where the backward's
// product multiplies by the derivative) against the CPU's composed default in float64, and its
// GELU output bit for bit against the forward's own kernel.
TEST(CudaLinearGeluLinear, GeluWithDerivativeMatchesTheCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
    for (int64_t n : {1, 7, 11, 1029, 8003}) {
      for (bool tanh : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " n " + std::to_string(n) + (tanh ? " tanh" : ""));
        const Tensor input = (randn({n}) * 3.0).to(dtype);
        const Tensor input64 = input.to(kFloat64);
        Tensor cpu_out = empty_like(input64), cpu_derivative = empty_like(input64);
        kernels_for(Device::cpu()).gelu_with_derivative(tanh, input64, cpu_out, cpu_derivative);
        Tensor gpu_out = empty_like(input.cuda()), gpu_derivative = empty_like(gpu_out);
        kernels_for(gpu()).gelu_with_derivative(tanh, input.cuda(), gpu_out, gpu_derivative);
        const double tol = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 1e-5 : 1e-2;
        EXPECT_TRUE(all_close(gpu_out.cpu().to(kFloat64), cpu_out, tol, tol)) << "output";
        EXPECT_TRUE(all_close(gpu_derivative.cpu().to(kFloat64), cpu_derivative, tol, tol)) << "derivative";
        EXPECT_TRUE(gelu(input.cuda(), tanh ? "tanh" : "none").cpu().equal(gpu_out.cpu())) << "forward";
      }
    }
  }
}

// gemm_times, the product whose epilogue multiplies by a tensor, against float32's product times the
// factor, for both 16-bit types and each operand read as stored or transposed. Where the device
// offers it (cuDNN's runtime fusion on a Hopper GPU), it must run.
TEST(CudaLinearGeluLinear, GemmTimesMatchesTheProductTimesTheFactor) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Kernels& k = kernels_for(gpu());
  EXPECT_FALSE(k.gemm_times_supported(kFloat32, 64, 136));
  for (DType dtype : {kBFloat16, kFloat16}) {
    if (!k.gemm_times_supported(dtype, 64, 136)) GTEST_SKIP() << "no product with a multiplying epilogue on this device";
    const int64_t m = 96, kk = 64, n = 136;
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (trans_a ? " a^T" : " a") + (trans_b ? " b^T" : " b"));
        const Tensor a = randn(trans_a ? Shape{kk, m} : Shape{m, kk}).to(dtype);
        const Tensor b = (randn(trans_b ? Shape{n, kk} : Shape{kk, n}) * 0.2).to(dtype);
        const Tensor factor = rand({m, n}).to(dtype);
        const Tensor fa = trans_a ? a.to(kFloat32).t() : a.to(kFloat32), fb = trans_b ? b.to(kFloat32).t() : b.to(kFloat32);
        const Tensor expected = matmul(fa, fb) * factor.to(kFloat32);
        Tensor c = Tensor::empty({m, n}, dtype, gpu());
        ASSERT_TRUE(k.gemm_times(a.cuda(), trans_a, b.cuda(), trans_b, factor.cuda(), c));
        // One rounding of the float32 result, against the reference's exact product of the same
        // rounded inputs: within the 16-bit type's half unit, relative to the values' scale.
        EXPECT_TRUE(close_to_scale(c.cpu().to(kFloat32), expected, dtype == kBFloat16 ? 8e-3 : 1e-3));
      }
    }
    // Rows of 100 16-bit values are not 16-byte aligned: declined, the caller composes (and a
    // layer of that width keeps the GELU's input, not its derivative).
    EXPECT_FALSE(k.gemm_times_supported(dtype, kk, 100));
    Tensor c = Tensor::empty({m, 100}, dtype, gpu());
    EXPECT_FALSE(k.gemm_times(randn({m, kk}).to(dtype).cuda(), false, randn({kk, 100}).to(dtype).cuda(), false,
                              rand({m, 100}).to(dtype).cuda(), c));
  }
}

// A layer that keeps its GELU's output keeps the derivative in place of the GELU's input where the
// backward multiplies by it inside its product: values and gradients within bfloat16's rounding of
// the float32 composition's, for a layer without biases (char_gpt's) and one with both.
TEST(CudaLinearGeluLinear, KeptDerivativeMatchesFloat32) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  if (!kernels_for(gpu()).gemm_times_supported(kBFloat16, 16, 512)) GTEST_SKIP() << "no gemm_times on this device";
  for (bool biases : {false, true}) {
    SCOPED_TRACE(biases ? "biases" : "no biases");
    const std::vector<Tensor> in = on_gpu(scaled_layers({256, 16}, 512, 16, biases, biases));
    const Tensor seed = randn({256, 16}).to(kBFloat16).to(kFloat32);
    const Result reference = run(composed("none"), in, kAll, seed);
    AutocastGuard guard(gpu(), kBFloat16);
    const Result kept = run(fused("none", true), in, kAll, seed);
    EXPECT_TRUE(close_to_scale(kept.out, reference.out, 2e-2)) << "output";
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].defined()) {
        EXPECT_TRUE(close_to_scale(kept.grads[i], reference.grads[i], 3e-2)) << kNames[i];
      }
  }
}

// nn::Sequential runs a Linear, a GELU and a Linear as linear_gelu_linear (nanoGPT's MLP as the
// tutorial writes it), with the values and gradients of its modules run one by one.
TEST(LinearGeluLinear, SequentialFusionKeepsOutputsAndGradients) {
  MINIDL_FRESH_SEED();
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    nn::Sequential net(nn::Linear(7, 12), nn::GELU(nn::GELUOptions().approximate(approximate)), nn::Linear(12, 7),
                       nn::Dropout(0.0));
    net->to(kFloat64);
    Tensor x = randn({2, 4, 7}, kFloat64);
    Tensor fused = net(x);
    ASSERT_NE(fused.grad_fn(), nullptr);
    EXPECT_EQ(fused.grad_fn()->name(), "LinearGeluLinearBackward0");
    fused.sum().backward();
    std::vector<Tensor> fused_grads;
    for (auto& [name, p] : net->named_parameters()) fused_grads.push_back(p.grad().clone());
    net->zero_grad();
    Tensor y = x;
    for (const auto& m : *net) y = m->forward(y);
    EXPECT_NE(y.grad_fn()->name(), "LinearGeluLinearBackward0");
    y.sum().backward();
    EXPECT_TRUE(close_to_scale(fused, y, 1e-12));
    size_t i = 0;
    for (auto& [name, p] : net->named_parameters()) EXPECT_TRUE(close_to_scale(fused_grads[i++], p.grad(), 1e-12)) << name;
  }
}

}  // namespace minidl::linear_gelu_linear_test
