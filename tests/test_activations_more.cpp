// softplus, elu, selu, mish, hardtanh, relu6, hardsigmoid, hardswish, prelu, glu, dropout2d and their
// modules: values against PyTorch's results, the gradients at the kinks PyTorch defines, float64
// gradient checks away from them, and the errors for bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "minidl.h"
#include "nn/nn.h"
#include "float64_util.h"
#include "test_util.h"

namespace minidl::activations_more_test {

using minidl::testing::expect_error;
using minidl::testing::f64;
using minidl::testing::expect_gradcheck;
namespace F = minidl::nn::functional;

namespace {

void expect_near(const Tensor& t, const std::vector<double>& expected, double tol, const char* what) {
  std::vector<double> got = t.to(kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol) << what << " [" << i << "]";
}

// d sum(op(x)) / dx at the given points.
std::vector<double> grad_at(const std::function<Tensor(const Tensor&)>& op, const std::vector<double>& points) {
  Tensor x = f64(points).requires_grad_();
  op(x).sum().backward();
  return x.grad().to_vector<double>();
}

// Random float64 values in [-3, 3) kept 0.05 away from each of `kinks`.
Tensor away_from(const Shape& shape, const std::vector<double>& kinks) {
  std::vector<double> v = (rand(shape, kFloat64) * 6 - 3).to_vector<double>();
  for (double& e : v)
    for (double k : kinks)
      if (std::abs(e - k) < 0.05) e = k + (e < k ? -0.05 : 0.05);
  return Tensor::from_vector(v, shape).requires_grad_();
}

const double kSeluScale = 1.0507009873554804934193349852946;
const double kSeluAlpha = 1.6732632423543772848170429916717;

}  // namespace

TEST(ActivationsMore, KnownValues) {
  // torch.nn.functional.softplus(torch.tensor([-1., 0., 1., 30.], dtype=torch.float64))
  expect_near(softplus(f64({-1, 0, 1, 30})), {0.31326168751822286, 0.6931471805599453, 1.3132616875182228, 30}, 1e-15,
              "softplus");
  // beta=2: log1p(exp(2)) / 2 = 1.0634640055214863; 2 * 15 > 20 gives 15 itself.
  expect_near(softplus(f64({1, 15}), 2.0), {1.0634640055214863, 15}, 1e-15, "softplus beta 2");
  expect_near(softplus(f64({1}), 1.0, 0.5), {1}, 0, "softplus threshold 0.5");
  expect_near(elu(f64({-1, 0, 2})), {-0.6321205588285577, 0, 2}, 1e-15, "elu");
  expect_near(elu(f64({-1}), 0.5), {-0.31606027941427883}, 1e-15, "elu alpha 0.5");
  expect_near(selu(f64({-1, 1})), {-1.1113307378125628, 1.0507009873554805}, 1e-15, "selu");
  // F.mish(torch.tensor([-1., 1., 25.], dtype=torch.float64))
  expect_near(mish(f64({-1, 1, 25})), {-0.30340146137410895, 0.8650983882673103, 25}, 1e-15, "mish");
  expect_near(hardtanh(f64({-2, -0.5, 3})), {-1, -0.5, 1}, 0, "hardtanh");
  expect_near(hardtanh(f64({-2, 0.5, 3}), 0, 2), {0, 0.5, 2}, 0, "hardtanh 0..2");
  expect_near(relu6(f64({-1, 3, 7})), {0, 3, 6}, 0, "relu6");
  expect_near(hardsigmoid(f64({-4, 0, 1, 4})), {0, 0.5, 4.0 / 6, 1}, 1e-15, "hardsigmoid");
  expect_near(hardswish(f64({-4, -1, 1, 4})), {0, -1.0 / 3, 4.0 / 6, 4}, 1e-15, "hardswish");
  expect_near(softplus(Tensor::from_vector<float>({-1, 0, 1})), {0.31326168751822286, 0.6931471805599453, 1.3132616875182228},
              1e-6, "softplus float32");
  EXPECT_TRUE(std::isnan(hardswish(f64({std::nan("")})).item<double>()));
  EXPECT_TRUE(std::isnan(mish(f64({std::nan("")})).item<double>()));
}

TEST(ActivationsMore, GradientsAtKinks) {
  // PyTorch's conventions: hardtanh and relu6 pass no gradient at their bounds; elu takes the
  // negative branch at 0; hardsigmoid is flat at +-3; hardswish has slope -0.5 at -3 and 1.5 at 3.
  EXPECT_EQ(grad_at([](const Tensor& x) { return hardtanh(x); }, {-1, -0.5, 1, 2}), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(grad_at(relu6, {0, 3, 6, 7}), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(grad_at([](const Tensor& x) { return elu(x, 0.5); }, {0, 1}), (std::vector<double>{0.5, 1}));
  EXPECT_EQ(grad_at(hardsigmoid, {-3, 0, 3}), (std::vector<double>{0, 1.0 / 6, 0}));
  EXPECT_EQ(grad_at(hardswish, {-3, 0, 3, 4}), (std::vector<double>{-0.5, 0.5, 1.5, 1}));
  std::vector<double> g = grad_at(selu, {-1, 1});
  EXPECT_NEAR(g[0], kSeluScale * kSeluAlpha * std::exp(-1.0), 1e-15);
  EXPECT_NEAR(g[1], kSeluScale, 1e-15);
  // Softplus above its threshold is the identity, below it the sigmoid.
  std::vector<double> s = grad_at([](const Tensor& x) { return softplus(x, 2.0, 4.0); }, {3, 1});
  EXPECT_EQ(s[0], 1.0);
  EXPECT_NEAR(s[1], 1 / (1 + std::exp(-2.0)), 1e-15);
}

TEST(ActivationsMore, Gradcheck) {
  manual_seed(21);
  expect_gradcheck("softplus", [](auto& in) { return softplus(in[0]); }, {away_from({3, 4}, {})});
  expect_gradcheck("softplus beta 3, threshold 2",
                   [](auto& in) { return softplus(in[0], 3.0, 2.0); }, {away_from({3, 4}, {2.0 / 3})});
  expect_gradcheck("elu", [](auto& in) { return elu(in[0], 0.7); }, {away_from({3, 4}, {0})});
  expect_gradcheck("selu", [](auto& in) { return selu(in[0]); }, {away_from({3, 4}, {0})});
  expect_gradcheck("mish", [](auto& in) { return mish(in[0]); }, {away_from({3, 4}, {})});
  expect_gradcheck("hardtanh", [](auto& in) { return hardtanh(in[0], -0.5, 2.0); }, {away_from({3, 4}, {-0.5, 2})});
  expect_gradcheck("relu6", [](auto& in) { return relu6(in[0] * 3); }, {away_from({3, 4}, {0, 2})});
  expect_gradcheck("hardsigmoid", [](auto& in) { return hardsigmoid(in[0] * 2); }, {away_from({3, 4}, {-1.5, 1.5})});
  expect_gradcheck("hardswish", [](auto& in) { return hardswish(in[0] * 2); }, {away_from({3, 4}, {-1.5, 1.5})});
  expect_gradcheck("prelu [C]", [](auto& in) { return prelu(in[0], in[1]); },
                   {away_from({2, 3, 2, 2}, {0}), f64({0.25, -0.5, 2}).requires_grad_()});
  expect_gradcheck("prelu [1]", [](auto& in) { return prelu(in[0], in[1]); },
                   {away_from({4, 5}, {0}), f64({0.1}).requires_grad_()});
}

TEST(ActivationsMore, PreluPerChannel) {
  Tensor x = f64({-1, 2, -3, 4, -5, 6}).reshape({1, 3, 2});
  Tensor w = f64({0.5, 1, 2}).requires_grad_();
  Tensor xr = x.detach().requires_grad_();
  Tensor y = prelu(xr, w);
  expect_near(y, {-0.5, 2, -3, 4, -10, 6}, 0, "prelu");
  y.sum().backward();
  // d/dw[c] = the sum of the channel's non-positive inputs; d/dx = 1 or w[c].
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{-1, -3, -5}));
  EXPECT_EQ(xr.grad().to_vector<double>(), (std::vector<double>{0.5, 1, 1, 1, 2, 1}));
}

TEST(ActivationsMore, Dropout2dZeroesWholeChannels) {
  manual_seed(3);
  Tensor x = ones({8, 16, 3, 5}).requires_grad_();
  Tensor y = dropout2d(x, 0.25, true);
  std::vector<float> v = y.to_vector<float>();
  int64_t dropped = 0;
  for (int64_t plane = 0; plane < 8 * 16; ++plane) {
    const float first = v[plane * 15];
    EXPECT_TRUE(first == 0.0f || std::abs(first - 1 / 0.75f) < 1e-6) << first;
    for (int64_t k = 1; k < 15; ++k) ASSERT_EQ(v[plane * 15 + k], first) << "plane " << plane;
    dropped += first == 0.0f;
  }
  EXPECT_GT(dropped, 12);  // 32 expected of 128
  EXPECT_LT(dropped, 56);
  // The gradient follows the mask.
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), v);
  // Seeded, it repeats; one image [C, H, W] gets one draw per channel.
  manual_seed(3);
  EXPECT_EQ(dropout2d(ones({8, 16, 3, 5}), 0.25, true).to_vector<float>(), v);
  Tensor one = dropout2d(ones({64, 2, 2}), 0.5, true);
  EXPECT_EQ(one.shape(), (Shape{64, 2, 2}));
  std::vector<float> o = one.to_vector<float>();
  for (int64_t c = 0; c < 64; ++c)
    for (int64_t k = 1; k < 4; ++k) ASSERT_EQ(o[c * 4 + k], o[c * 4]) << "channel " << c;
  // Not training, or p = 0: the identity; p = 1: zeros.
  Tensor z = randn({2, 3, 4, 4});
  EXPECT_EQ(dropout2d(z, 0.5, false).to_vector<float>(), z.to_vector<float>());
  EXPECT_EQ(dropout2d(z, 0.0, true).to_vector<float>(), z.to_vector<float>());
  EXPECT_EQ(dropout2d(z, 1.0, true).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(feature_dropout(ones({4, 6}), 0.5, true).shape(), (Shape{4, 6}));
}

TEST(ActivationsMore, Modules) {
  Tensor x = f64({-2, -0.5, 0.5, 8});
  expect_near(nn::Softplus(nn::SoftplusOptions().beta(2).threshold(10))(x), {std::log1p(std::exp(-4.0)) / 2,
              std::log1p(std::exp(-1.0)) / 2, std::log1p(std::exp(1.0)) / 2, 8}, 1e-15, "Softplus");
  expect_near(nn::ELU(nn::ELUOptions().alpha(2))(x), {2 * std::expm1(-2.0), 2 * std::expm1(-0.5), 0.5, 8}, 1e-15, "ELU");
  expect_near(nn::SELU()(x), selu(x).to_vector<double>(), 0, "SELU");
  expect_near(nn::Mish()(x), mish(x).to_vector<double>(), 0, "Mish");
  expect_near(nn::Hardtanh(nn::HardtanhOptions().min_val(-1).max_val(0.25))(x), {-1, -0.5, 0.25, 0.25}, 0, "Hardtanh");
  expect_near(nn::ReLU6()(x), {0, 0, 0.5, 6}, 0, "ReLU6");
  expect_near(nn::LogSigmoid()(x), log_sigmoid(x).to_vector<double>(), 0, "LogSigmoid");
  EXPECT_EQ(nn::Identity()(x).to_vector<double>(), x.to_vector<double>());
  EXPECT_EQ(nn::Identity(3, "ignored")(x).to_vector<double>(), x.to_vector<double>());

  nn::PReLU prelu_module(nn::PReLUOptions().num_parameters(3).init(0.1));
  ASSERT_EQ(prelu_module->parameters().size(), 1u);
  EXPECT_EQ(prelu_module->weight.shape(), (Shape{3}));
  EXPECT_EQ(prelu_module->weight.to_vector<float>(), (std::vector<float>{0.1f, 0.1f, 0.1f}));
  Tensor img = -ones({2, 3, 2, 2});
  prelu_module(img).sum().backward();
  EXPECT_EQ(prelu_module->weight.grad().to_vector<float>(), (std::vector<float>{-8, -8, -8}));
  EXPECT_EQ(nn::PReLU()->weight.to_vector<float>(), (std::vector<float>{0.25f}));

  nn::Dropout2d drop(0.5);
  drop->eval();
  Tensor z = randn({2, 3, 4, 4});
  EXPECT_EQ(drop(z).to_vector<float>(), z.to_vector<float>());
  drop->train();
  EXPECT_EQ(drop(z).shape(), z.shape());
  nn::Dropout2d drop_options(nn::Dropout2dOptions().p(0.2));
  EXPECT_EQ(drop_options->options.p(), 0.2);

  std::ostringstream os;
  os << *nn::Sequential(nn::Softplus(), nn::ELU(), nn::Hardtanh(), nn::PReLU(), nn::Dropout2d(0.3), nn::Identity());
  const std::string printed = os.str();
  for (const char* part : {"beta=1, threshold=20", "alpha=1", "min_val=-1, max_val=1", "num_parameters=1", "p=0.3",
                           "Identity"})
    EXPECT_NE(printed.find(part), std::string::npos) << part << " not in " << printed;
}

TEST(ActivationsMore, Functional) {
  Tensor x = f64({-1, 0.5, 30});
  expect_near(F::softplus(x, F::SoftplusFuncOptions().beta(2)), softplus(x, 2.0).to_vector<double>(), 0, "F::softplus");
  expect_near(F::softplus(x), softplus(x).to_vector<double>(), 0, "F::softplus plain");
  expect_near(F::elu(x, F::ELUFuncOptions().alpha(0.5)), elu(x, 0.5).to_vector<double>(), 0, "F::elu");
  expect_near(F::hardtanh(x, F::HardtanhFuncOptions().min_val(0).max_val(6)), {0, 0.5, 6}, 0, "F::hardtanh");
  expect_near(F::logsigmoid(x), log_sigmoid(x).to_vector<double>(), 0, "F::logsigmoid");
  expect_near(F::selu(x), selu(x).to_vector<double>(), 0, "F::selu");
  expect_near(F::mish(x), mish(x).to_vector<double>(), 0, "F::mish");
  expect_near(F::relu6(x), {0, 0.5, 6}, 0, "F::relu6");
  expect_near(F::prelu(x, f64({0.5})), {-0.5, 0.5, 30}, 0, "F::prelu");
  EXPECT_EQ(F::dropout2d(ones({1, 2, 2, 2}), 0.5, false).sum().item<float>(), 8.0f);
}

TEST(ActivationsMore, BadInput) {
  Tensor i = Tensor::from_vector<int64_t>({1, 2});
  expect_error([&] { softplus(i); }, {"softplus", "floating", "int64"});
  expect_error([&] { elu(i); }, {"elu", "int64"});
  expect_error([&] { hardtanh(i); }, {"hardtanh", "int64"});
  expect_error([] { hardtanh(zeros({2}), 1.0, -1.0); }, {"hardtanh", "min_val <= max_val"});
  expect_error([] { nn::Hardtanh(nn::HardtanhOptions().min_val(1).max_val(1)); }, {"Hardtanh", "max_val > min_val"});
  expect_error([] { softplus(zeros({2}), 0.0); }, {"softplus", "beta"});
  expect_error([] { prelu(zeros({2, 3}), zeros({4})); }, {"prelu", "4", "[2, 3]"});
  expect_error([] { prelu(zeros({2, 3}), zeros({3}, kFloat64)); }, {"prelu", "float32", "float64"});
  expect_error([] { prelu(zeros({2, 3}), zeros({3, 1})); }, {"prelu", "[3, 1]"});
  expect_error([] { nn::PReLU(nn::PReLUOptions().num_parameters(0)); }, {"PReLU", "num_parameters"});
  expect_error([] { dropout2d(zeros({2, 3}), 0.5, true); }, {"dropout2d", "[N, C, H, W]", "[2, 3]"});
  expect_error([] { dropout2d(zeros({1, 2, 3, 3}), 1.5, true); }, {"dropout2d", "1.5"});
  expect_error([] { nn::Dropout2d(-0.1); }, {"Dropout2d", "[0, 1]"});
  expect_error([] { feature_dropout(zeros({3}), 0.5, true); }, {"feature_dropout", "[3]"});
}

TEST(ActivationsMore, GluGatesOneHalfWithTheOther) {
  // [1, 2 | 0, -1] along the last dim: 1 * sigmoid(0), 2 * sigmoid(-1).
  const Tensor x = f64({1, 2, 0, -1}).reshape({1, 4});
  expect_near(glu(x), {0.5, 2 / (1 + std::exp(1.0))}, 1e-15, "glu, last dim");
  // Along dim 0 of [2, 2]: rows are the halves.
  expect_near(glu(f64({1, 2, 0, -1}).reshape({2, 2}), 0), {0.5, 2 / (1 + std::exp(1.0))}, 1e-15, "glu, dim 0");
  expect_gradcheck("glu", [](const std::vector<Tensor>& in) { return glu(in[0], 1); },
                   {randn({3, 6, 2}, kFloat64).requires_grad_()});
  nn::GLU module(1);
  std::ostringstream os;
  os << *module;
  EXPECT_EQ(os.str(), "GLU(dim=1)");
  expect_near(module(x.reshape({2, 2})), F::glu(x.reshape({2, 2}), 1).to_vector<double>(), 0, "module");
  expect_error([] { glu(zeros({2, 3})); }, {"glu", "even", "[2, 3]", "size 3"});
  expect_error([] { glu(zeros({2, 4}), 2); }, {"glu", "out of range", "got 2"});
  expect_error([] { glu(zeros({4}, kInt64)); }, {"glu", "int64"});
}

TEST(ActivationsMore, ShrinksSoftsignCeluLogitSoftmin) {
  const Tensor x = f64({-2, -0.25, 0.25, 2});
  expect_near(softsign(x), {-2.0 / 3, -0.2, 0.2, 2.0 / 3}, 1e-15, "softsign");
  expect_near(tanhshrink(x), {-2 - std::tanh(-2.0), -0.25 - std::tanh(-0.25), 0.25 - std::tanh(0.25), 2 - std::tanh(2.0)},
              1e-15, "tanhshrink");
  expect_near(hardshrink(x), {-2, 0, 0, 2}, 0, "hardshrink");
  expect_near(hardshrink(x, 0.1), {-2, -0.25, 0.25, 2}, 0, "hardshrink 0.1");
  expect_near(softshrink(x), {-1.5, 0, 0, 1.5}, 0, "softshrink");
  expect_near(celu(x, 2.0), {2 * std::expm1(-1.0), 2 * std::expm1(-0.125), 0.25, 2}, 1e-15, "celu");
  expect_near(logit(f64({0.25, 0.5})), {std::log(1.0 / 3), 0}, 1e-15, "logit");
  EXPECT_EQ(logit(f64({1.0})).item<double>(), INFINITY);
  expect_near(logit(f64({0.0, 1.0}), 0.25), {std::log(1.0 / 3), std::log(3.0)}, 1e-15, "logit, clamped");
  expect_near(softmin(f64({0, std::log(2.0)}), 0), {2.0 / 3, 1.0 / 3}, 1e-15, "softmin");
  // The shrinks' gradient is 1 beyond the threshold and 0 inside, as PyTorch's.
  EXPECT_EQ(grad_at([](const Tensor& t) { return hardshrink(t); }, {-2, -0.25, 0.25, 2}), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(grad_at([](const Tensor& t) { return softshrink(t); }, {-2, -0.25, 0.25, 2}), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(grad_at([](const Tensor& t) { return logit(t, 0.25); }, {0.1, 0.9}), (std::vector<double>{0, 0}));
  for (auto [name, f] : std::vector<std::pair<const char*, std::function<Tensor(const std::vector<Tensor>&)>>>{
           {"softsign", [](auto& in) { return softsign(in[0]); }},
           {"tanhshrink", [](auto& in) { return tanhshrink(in[0]); }},
           {"celu", [](auto& in) { return celu(in[0], 0.5); }},
           {"softmin", [](auto& in) { return softmin(in[0], 1); }},
       })
    expect_gradcheck(name, f, {away_from({3, 4}, {0})});
  expect_gradcheck("hardshrink", [](auto& in) { return hardshrink(in[0]); }, {away_from({3, 4}, {-0.5, 0.5})});
  expect_gradcheck("softshrink", [](auto& in) { return softshrink(in[0]); }, {away_from({3, 4}, {-0.5, 0.5})});
  expect_gradcheck("logit", [](auto& in) { return logit(in[0]); },
                   {uniform({3, 4}, 0.1, 0.9, kFloat64).requires_grad_()});
  // Modules, printed as PyTorch prints them.
  std::ostringstream os;
  os << *nn::Softsign() << " " << *nn::Tanhshrink() << " " << *nn::Hardshrink(nn::HardshrinkOptions().lambda(0.1))
     << " " << *nn::Softshrink() << " " << *nn::CELU(nn::CELUOptions().alpha(2)) << " " << *nn::Softmin(1);
  EXPECT_EQ(os.str(), "Softsign() Tanhshrink() Hardshrink(0.1) Softshrink(0.5) CELU(alpha=2) Softmin(dim=1)");
  expect_near(nn::CELU(nn::CELUOptions().alpha(2))(x), celu(x, 2.0).to_vector<double>(), 0, "CELU module");
  expect_near(nn::Softmin(0)(x), softmin(x, 0).to_vector<double>(), 0, "Softmin module");
  expect_error([] { softshrink(zeros({2}), -1); }, {"softshrink", "lambd", "-1"});
  expect_error([] { celu(zeros({2}), 0); }, {"celu", "alpha > 0"});
  expect_error([] { softsign(zeros({2}, kInt64)); }, {"softsign", "int64"});
}

}  // namespace minidl::activations_more_test
