// The math, logical and activation ops of ops/math.h, ops/logical.h and ops/activation.h on CUDA:
// each against the CPU kernel on the same fresh random inputs (forward and input gradients, float32
// and float64), special values, a float64 gradient check on the GPU, and dropout2d's channel masks.
// GPU tests skip, saying why, where no CUDA device is usable.
#include <limits>

#include "test_cuda_util.h"

namespace minidl::cuda_math_ops_test {

using namespace minidl::testing;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  const char* name;
  Fn f;
  int inputs;
  double low, high;  // the inputs' range
};

// Away from kinks and jumps where the cases need it (ranges), and from ties (distinct draws).
const std::vector<Case>& differentiable_cases() {
  static const std::vector<Case> all = {
      {"sin", [](auto& in) { return sin(in[0]); }, 1, -3, 3},
      {"cos", [](auto& in) { return cos(in[0]); }, 1, -3, 3},
      {"tan", [](auto& in) { return tan(in[0]); }, 1, -1.2, 1.2},
      {"asin", [](auto& in) { return asin(in[0]); }, 1, -0.9, 0.9},
      {"acos", [](auto& in) { return acos(in[0]); }, 1, -0.9, 0.9},
      {"atan", [](auto& in) { return atan(in[0]); }, 1, -3, 3},
      {"sinh", [](auto& in) { return sinh(in[0]); }, 1, -2, 2},
      {"cosh", [](auto& in) { return cosh(in[0]); }, 1, -2, 2},
      {"rsqrt", [](auto& in) { return rsqrt(in[0]); }, 1, 0.3, 3},
      {"reciprocal", [](auto& in) { return reciprocal(in[0]); }, 1, 0.3, 3},
      {"log1p", [](auto& in) { return log1p(in[0]); }, 1, -0.7, 3},
      {"expm1", [](auto& in) { return expm1(in[0]); }, 1, -2, 2},
      {"log2", [](auto& in) { return log2(in[0]); }, 1, 0.3, 4},
      {"log10", [](auto& in) { return log10(in[0]); }, 1, 0.3, 4},
      {"erf", [](auto& in) { return erf(in[0]); }, 1, -2, 2},
      {"atan2", [](auto& in) { return atan2(in[0], in[1]); }, 2, 0.5, 2},
      {"maximum", [](auto& in) { return maximum(in[0], in[1] - 0.5); }, 2, -2, 2},
      {"minimum", [](auto& in) { return minimum(in[0], in[1] + 0.5); }, 2, -2, 2},
      {"fmod", [](auto& in) { return fmod(in[0] * 3, in[1] + 4.5); }, 2, 0.1, 0.4},
      {"softplus", [](auto& in) { return softplus(in[0]); }, 1, -3, 3},
      {"softplus beta 2 threshold 3", [](auto& in) { return softplus(in[0], 2.0, 3.0); }, 1, -3, 1.4},
      {"elu", [](auto& in) { return elu(in[0], 0.7); }, 1, -3, 3},
      {"selu", [](auto& in) { return selu(in[0]); }, 1, -3, 3},
      {"mish", [](auto& in) { return mish(in[0]); }, 1, -3, 3},
      {"hardtanh", [](auto& in) { return hardtanh(in[0], -0.5, 1.5); }, 1, -3, 3},
      {"relu6", [](auto& in) { return relu6(in[0] * 3); }, 1, -3, 3},
      {"hardsigmoid", [](auto& in) { return hardsigmoid(in[0] * 2); }, 1, -3, 3},
      {"hardswish", [](auto& in) { return hardswish(in[0] * 2); }, 1, -3, 3},
  };
  return all;
}

Tensor draw(const Shape& shape, DType dtype, double low, double high) {
  return (rand(shape, kFloat64) * (high - low) + low).to(dtype);
}

// Forward and input gradients of f on the CPU and the GPU from the same inputs and seed gradient.
void expect_cpu_agreement(const Case& c, DType dtype, const Shape& shape) {
  SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dtype));
  std::vector<Tensor> cpu_in, gpu_in;
  for (int i = 0; i < c.inputs; ++i) {
    Tensor x = draw(shape, dtype, c.low, c.high);
    cpu_in.push_back(x.clone().requires_grad_());
    gpu_in.push_back(x.to(gpu()).requires_grad_());
  }
  Tensor y = c.f(cpu_in), yg = c.f(gpu_in);
  ASSERT_EQ(yg.device(), gpu());
  EXPECT_TRUE(all_close(yg, y, tol(dtype), tol(dtype)));
  Tensor seed = randn(y.shape(), dtype);
  y.backward(seed);
  yg.backward(seed.to(gpu()));
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    ASSERT_TRUE(gpu_in[i].grad().defined()) << "input " << i;
    EXPECT_TRUE(all_close(gpu_in[i].grad(), cpu_in[i].grad(), tol(dtype), tol(dtype))) << "input " << i;
  }
}

}  // namespace

TEST(CudaMathOps, MatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (const Case& c : differentiable_cases()) {
    expect_cpu_agreement(c, kFloat32, {37, 29});
    expect_cpu_agreement(c, kFloat64, {5, 7});
  }
}

TEST(CudaMathOps, Gradcheck) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (const Case& c : differentiable_cases()) {
    std::vector<Tensor> in;
    for (int i = 0; i < c.inputs; ++i) in.push_back(draw({3, 4}, kFloat64, c.low, c.high).to(gpu()).requires_grad_());
    GradcheckResult r = gradcheck(c.f, in);
    EXPECT_TRUE(r) << c.name << ": " << r.message;
  }
  // prelu: a per-channel weight, both gradients.
  Tensor x = (randn({2, 3, 2, 2}, kFloat64) + 0.1).to(gpu()).requires_grad_();
  Tensor w = Tensor::from_vector<double>({0.25, -0.5, 2}).to(gpu()).requires_grad_();
  GradcheckResult r = gradcheck([](auto& in) { return prelu(in[0], in[1]); }, {x, w});
  EXPECT_TRUE(r) << "prelu: " << r.message;
}

TEST(CudaMathOps, RoundingAndSpecialValues) {
  MINIDL_REQUIRE_CUDA();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = Tensor::from_vector<double>({2.5, 0.5, 1.5, -0.5, -2.5, 3.7, -0.0, inf, -inf, nan, 1e-7}).to(dtype);
    Tensor xg = x.to(gpu());
    using U = Tensor (*)(const Tensor&);
    const U ops[] = {floor, ceil, trunc, sign, sqrt, rsqrt, reciprocal, log1p, expm1, log2, log10, erf, sin, atan};
    for (U op : ops) {
      EXPECT_TRUE(all_close(op(xg), op(x), tol(dtype), tol(dtype)));
    }
    EXPECT_TRUE(all_equal(round(xg), round(x)));  // halves to even on both
    EXPECT_TRUE(all_close(round(xg, 1), round(x, 1), 0, 0));
    EXPECT_TRUE(all_close(round(xg * 1000, -2), round(x * 1000, -2), 0, 0));
    EXPECT_TRUE(all_equal(isnan(xg), isnan(x)));
    EXPECT_TRUE(all_equal(isinf(xg), isinf(x)));
    EXPECT_TRUE(all_equal(isfinite(xg), isfinite(x)));
    EXPECT_TRUE(all_equal(nan_to_num(xg), nan_to_num(x)));
    Tensor y = flip(x, {0});
    EXPECT_TRUE(all_equal(maximum(xg, y.to(gpu())), maximum(x, y)));
    EXPECT_TRUE(all_equal(minimum(xg, y.to(gpu())), minimum(x, y)));
    EXPECT_TRUE(all_close(atan2(xg, y.to(gpu())), atan2(x, y), tol(dtype), tol(dtype)));
    EXPECT_TRUE(all_close(fmod(xg, y.to(gpu())), fmod(x, y), tol(dtype), tol(dtype)));
  }
  EXPECT_EQ(round(Tensor::from_vector<double>({2.5, -0.5}).to(gpu())).to(Device::cpu()).to_vector<double>(),
            (std::vector<double>{2, -0.0}));
}

TEST(CudaMathOps, IntegersAndLogical) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor a = randint(-50, 50, {6, 7}), b = randint(1, 9, {7});
  Tensor ag = a.to(gpu()), bg = b.to(gpu());
  EXPECT_TRUE(all_equal(sign(ag), sign(a)));
  EXPECT_TRUE(all_equal(floor(ag), floor(a)));
  EXPECT_TRUE(all_equal(fmod(ag, bg), fmod(a, b)));
  EXPECT_TRUE(all_equal(maximum(ag, bg), maximum(a, b)));
  EXPECT_TRUE(all_equal(ag & bg, a & b));
  EXPECT_TRUE(all_equal(ag | bg, a | b));
  EXPECT_TRUE(all_equal(ag ^ 5, a ^ 5));
  EXPECT_TRUE(all_equal(~ag, ~a));
  EXPECT_TRUE(all_close(sin(ag), sin(a), 1e-5, 1e-5));
  Tensor m = a > 0, n = b > 4;
  Tensor mg = m.to(gpu()), ng = n.to(gpu());
  EXPECT_TRUE(all_equal(mg & ng, m & n));
  EXPECT_TRUE(all_equal(mg | ng, m | n));
  EXPECT_TRUE(all_equal(mg ^ ng, m ^ n));
  EXPECT_TRUE(all_equal(~mg, ~m));
  Tensor f = randn({6, 7});
  EXPECT_TRUE(all_equal(logical_and(f.to(gpu()) > 0, ag), logical_and(f > 0, a)));
  EXPECT_TRUE(all_equal(logical_xor(f.to(gpu()), bg), logical_xor(f, b)));
  EXPECT_TRUE(all_equal(logical_not(ag), logical_not(a)));
  // Strided operands: a transposed view.
  EXPECT_TRUE(all_equal(bitwise_and(ag.transpose(0, 1), 3), bitwise_and(a.transpose(0, 1), 3)));
  EXPECT_TRUE(all_close(sin(f.to(gpu()).transpose(0, 1)), sin(f.transpose(0, 1)), 1e-5, 1e-5));
}

TEST(CudaMathOps, Dropout2dChannels) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  Tensor x = ones({4, 32, 3, 3}, kFloat32).to(gpu()).requires_grad_();
  Tensor y = dropout2d(x, 0.5, true);
  ASSERT_EQ(y.device(), gpu());
  y.sum().backward();
  std::vector<float> v = y.to(Device::cpu()).to_vector<float>();
  EXPECT_EQ(x.grad().to(Device::cpu()).to_vector<float>(), v);
  int dropped = 0;
  for (int64_t plane = 0; plane < 4 * 32; ++plane) {
    EXPECT_TRUE(v[plane * 9] == 0.0f || v[plane * 9] == 2.0f) << v[plane * 9];
    for (int64_t k = 1; k < 9; ++k) ASSERT_EQ(v[plane * 9 + k], v[plane * 9]) << "plane " << plane;
    dropped += v[plane * 9] == 0.0f;
  }
  EXPECT_GT(dropped, 32);  // 64 expected of 128
  EXPECT_LT(dropped, 96);
  // Module on the GPU: PReLU's weight gradient against the CPU's.
  nn::PReLU cpu_module(nn::PReLUOptions().num_parameters(3)), gpu_module(nn::PReLUOptions().num_parameters(3));
  gpu_module->to(gpu());
  Tensor in = randn({2, 3, 4, 4});
  cpu_module(in).sum().backward();
  gpu_module(in.to(gpu())).sum().backward();
  EXPECT_TRUE(all_close(gpu_module->weight.grad(), cpu_module->weight.grad(), 1e-4, 1e-4));
}

// The composed activations, distances and views: values and gradients as on the CPU.
TEST(CudaMathOps, ComposedActivationsDistancesAndViewsMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const std::vector<std::pair<const char*, Fn>> unary = {
      {"softsign", [](auto& in) { return softsign(in[0]); }},
      {"tanhshrink", [](auto& in) { return tanhshrink(in[0]); }},
      {"hardshrink", [](auto& in) { return hardshrink(in[0], 0.3); }},
      {"softshrink", [](auto& in) { return softshrink(in[0], 0.3); }},
      {"celu", [](auto& in) { return celu(in[0], 0.7); }},
      {"softmin", [](auto& in) { return softmin(in[0], 1); }},
      {"glu", [](auto& in) { return glu(in[0], 1); }},
      {"normalize", [](auto& in) { return normalize(in[0], 2, 1); }},
      {"movedim + unflatten", [](auto& in) { return in[0].movedim(0, 1).unflatten(0, {2, 3}); }},
  };
  for (const auto& [name, f] : unary) expect_cpu_cuda_agree(name, f, {randn({5, 6}, kFloat64)}, 1e-10);
  expect_cpu_cuda_agree("logit", [](auto& in) { return logit(in[0], 1e-3); }, {rand({5, 6}, kFloat64)}, 1e-10);
  expect_cpu_cuda_agree("cosine_similarity", [](auto& in) { return cosine_similarity(in[0], in[1], -1); },
                        {randn({5, 6}, kFloat64), randn({1, 6}, kFloat64)}, 1e-10);
  expect_cpu_cuda_agree("pairwise_distance", [](auto& in) { return pairwise_distance(in[0], in[1]); },
                        {randn({5, 6}, kFloat64), randn({5, 6}, kFloat64)}, 1e-10);
}

}  // namespace minidl::cuda_math_ops_test
