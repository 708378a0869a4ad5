// softmax / log_softmax over any dim, nll_loss, the fused cross_entropy and mse_loss: values against
// direct formulas, stability for large logits, gradients against central differences, bad targets;
// the activation and loss modules over them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>

#include "minidl.h"
#include "test_util.h"
#include "nn/nn.h"

namespace minidl::softmax_loss_test {

using minidl::testing::expect_error;

namespace {

// softmax over `dim` of a contiguous row-major array of `shape`, the textbook way (no max shift).
std::vector<double> reference_softmax(const std::vector<double>& x, const Shape& shape, int64_t dim, bool log) {
  int64_t outer = 1, inner = 1, n = shape[dim];
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<double> out(x.size());
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t c = 0; c < inner; ++c) {
      double total = 0;
      for (int64_t i = 0; i < n; ++i) total += std::exp(x[(a * n + i) * inner + c]);
      for (int64_t i = 0; i < n; ++i) {
        size_t at = static_cast<size_t>((a * n + i) * inner + c);
        out[at] = log ? x[at] - std::log(total) : std::exp(x[at]) / total;
      }
    }
  return out;
}

Tensor target_of(const std::vector<int64_t>& t) { return Tensor::from_vector<int64_t>(t); }

}  // namespace

TEST(Softmax, ForwardMatchesReferenceOnEveryDim) {
  manual_seed(11);
  const Shape shape{3, 4, 5};
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = randn(shape, dtype);
    std::vector<double> xv = x.to(kFloat64).to_vector<double>();
    for (int64_t dim : {0, 1, 2, -1}) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " dim " + std::to_string(dim) + (log ? " log" : ""));
        Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
        EXPECT_EQ(y.shape(), shape);
        EXPECT_EQ(y.dtype(), dtype);
        std::vector<double> ref = reference_softmax(xv, shape, dim < 0 ? dim + 3 : dim, log);
        std::vector<double> got = y.to(kFloat64).to_vector<double>();
        for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], dtype == kFloat32 ? 1e-6 : 1e-14) << i;
      }
      // Every slice along dim sums to 1.
      std::vector<double> sums = sum(softmax(x, dim).to(kFloat64), {dim}).to_vector<double>();
      for (double s : sums) EXPECT_NEAR(s, 1.0, 1e-6);
    }
  }
}

TEST(Softmax, NonContiguousInputAndWideInner) {
  manual_seed(12);
  // A transposed input is made contiguous first; an inner size past one kernel chunk (256) is split.
  Tensor x = randn({7, 3}, kFloat64).t();  // [3, 7]
  std::vector<double> ref = reference_softmax(x.contiguous().to_vector<double>(), {3, 7}, 1, false);
  std::vector<double> got = softmax(x, 1).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-14);
  Tensor wide = randn({2, 3, 300}, kFloat64);
  ref = reference_softmax(wide.to_vector<double>(), {2, 3, 300}, 1, true);
  got = log_softmax(wide, 1).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-13);
}

TEST(Softmax, StableForLargeLogits) {
  for (DType dtype : {kFloat32, kFloat64}) {
    // exp(1000) overflows both float types; the shifted computation must not.
    Tensor x = Tensor::from_vector<double>({1000, 999, 998, -1000, 1000, 1000}, {2, 3}).to(dtype);
    std::vector<double> p = softmax(x, 1).to(kFloat64).to_vector<double>();
    std::vector<double> lp = log_softmax(x, 1).to(kFloat64).to_vector<double>();
    const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
    EXPECT_NEAR(p[0], 1 / z, 1e-6);
    EXPECT_NEAR(p[2], std::exp(-2.0) / z, 1e-6);
    EXPECT_NEAR(lp[0], -std::log(z), 1e-5);
    EXPECT_NEAR(p[3], 0.0, 1e-30);
    EXPECT_NEAR(p[4], 0.5, 1e-6);
    EXPECT_NEAR(lp[3], -2000 - std::log(2.0), 1e-3);
    for (double v : lp) EXPECT_TRUE(std::isfinite(v));
    // Also over dim 0 (the strided kernel).
    std::vector<double> p0 = softmax(x.t(), 0).to(kFloat64).to_vector<double>();
    EXPECT_NEAR(p0[0], 1 / z, 1e-6);
    for (double v : p0) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(Softmax, Gradcheck) {
  manual_seed(13);
  for (int64_t dim : {0, 1, -1}) {
    for (bool log : {false, true}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + (log ? " log" : ""));
      // Random output weights, so that a gradient which only sums correctly would still be caught.
      Tensor w = randn({2, 3, 5}, kFloat64);
      auto f = [&](const std::vector<Tensor>& in) { return mul(log ? log_softmax(in[0], dim) : softmax(in[0], dim), w); };
      auto r = gradcheck(f, {randn({2, 3, 5}, kFloat64).requires_grad_()});
      EXPECT_TRUE(r) << r.message;
    }
  }
  // A transposed incoming gradient and a single-row input.
  auto r = gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0], 1).t(); },
                     {randn({3, 4}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], 0); }, {randn({1, 7}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(Loss, NllLossValue) {
  Tensor lp = Tensor::from_vector<double>({-0.5, -1.0, -2.0, -0.1, -3.0, -0.7}, {2, 3});
  Tensor loss = nll_loss(lp, target_of({2, 0}));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_DOUBLE_EQ(loss.item<double>(), (2.0 + 0.1) / 2);
}

TEST(Loss, CrossEntropyValueAndFusionMatch) {
  manual_seed(14);
  Tensor logits = Tensor::from_vector<double>({1, 2, 3, 0, 0, 0}, {2, 3});
  // Row 0: -log(e^1 / (e^1+e^2+e^3)); row 1: log 3.
  const double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 1;
  EXPECT_NEAR(cross_entropy(logits, target_of({0, 1})).item<double>(), (row0 + std::log(3.0)) / 2, 1e-14);
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = randn({7, 5}, dtype);
    Tensor t = target_of({0, 4, 2, 2, 1, 3, 4});
    double fused = cross_entropy(x, t).to(kFloat64).item<double>();
    double composed = nll_loss(log_softmax(x, 1), t).to(kFloat64).item<double>();
    EXPECT_NEAR(fused, composed, dtype == kFloat32 ? 1e-6 : 1e-14);
    // Large logits stay finite.
    EXPECT_TRUE(std::isfinite(cross_entropy(mul(x, scalar_like(1000, x)), t).item<float>()));
  }
}

TEST(Loss, Gradcheck) {
  manual_seed(15);
  struct Size {
    int64_t n, c;
  };
  for (Size s : {Size{1, 3}, Size{5, 7}, Size{3, 1}}) {
    SCOPED_TRACE("N=" + std::to_string(s.n) + " C=" + std::to_string(s.c));
    std::vector<int64_t> t;
    for (int64_t i = 0; i < s.n; ++i) t.push_back((i * 3 + 1) % s.c);
    Tensor target = target_of(t);
    auto ce = gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], target); },
                        {randn({s.n, s.c}, kFloat64).requires_grad_()});
    EXPECT_TRUE(ce) << ce.message;
    auto nll = gradcheck([&](const std::vector<Tensor>& in) { return nll_loss(in[0], target); },
                         {randn({s.n, s.c}, kFloat64).requires_grad_()});
    EXPECT_TRUE(nll) << nll.message;
    auto composed = gradcheck([&](const std::vector<Tensor>& in) { return nll_loss(log_softmax(in[0], 1), target); },
                              {randn({s.n, s.c}, kFloat64).requires_grad_()});
    EXPECT_TRUE(composed) << composed.message;
  }
  // The upstream gradient reaches the kernels as a 0-d tensor; scale it so that it matters.
  Tensor target = target_of({1, 0});
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return mul(cross_entropy(in[0], target), scalar_like(-3, in[0])); },
                     {randn({2, 4}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([&](const std::vector<Tensor>& in) { return mul(nll_loss(in[0], target), scalar_like(-3, in[0])); },
                {randn({2, 4}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

// A backward that starts at the loss takes the gradient the forward wrote (no kernel of its own);
// any other seed, or a loss that is not the root, scales it. Against (softmax - one-hot) / count.
TEST(Loss, CrossEntropyGradientFromItsOwnSeedAndFromAnyOther) {
  manual_seed(16);
  const int64_t n = 6, c = 5, ignore = -1;
  Tensor x = randn({n, c}, kFloat64);
  const std::vector<int64_t> t{3, ignore, 0, 4, ignore, 1};
  std::vector<double> expected = reference_softmax(x.to_vector<double>(), {n, c}, 1, /*log=*/false);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      double& e = expected[static_cast<size_t>(i * c + j)];
      e = t[i] == ignore ? 0 : (e - (j == t[i] ? 1 : 0)) / 4;  // 4 rows count
    }
  auto grad_of = [&](const std::function<void(Tensor&)>& run_backward) {
    Tensor leaf = x.clone().requires_grad_();
    Tensor loss = cross_entropy(leaf, target_of(t), {}, Reduction::Mean, ignore);
    run_backward(loss);
    return leaf.grad().to_vector<double>();
  };
  auto expect_scaled = [&](const std::vector<double>& got, double scale, const char* what) {
    SCOPED_TRACE(what);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], scale * expected[i], 1e-15) << "element " << i;
  };
  expect_scaled(grad_of([](Tensor& loss) { loss.backward(); }), 1, "implied seed");
  expect_scaled(grad_of([](Tensor& loss) { loss.backward(full({}, 1.0, kFloat64)); }), 1, "a seed of ones passed in");
  expect_scaled(grad_of([](Tensor& loss) { loss.backward(full({}, 2.5, kFloat64)); }), 2.5, "a seed of 2.5");
  expect_scaled(grad_of([](Tensor& loss) { mul(loss, scalar_like(-3, loss)).backward(); }), -3, "loss times -3");
  expect_scaled(grad_of([](Tensor& loss) { add(loss, scalar_like(5, loss)).backward(); }), 1, "loss plus 5");
  // Twice through a retained graph: the gradient it hands out is not changed by the accumulation.
  expect_scaled(grad_of([](Tensor& loss) {
                  loss.backward(Tensor(), /*retain_graph=*/true);
                  loss.backward();
                }),
                2, "two backwards");
}

TEST(Loss, BadTargetsGiveClearErrors) {
  Tensor x = zeros({3, 4});
  for (const char* op : {"nll_loss", "cross_entropy"}) {
    SCOPED_TRACE(op);
    auto call = [&](const Tensor& input, const Tensor& t) {
      return std::string(op) == "nll_loss" ? nll_loss(input, t) : cross_entropy(input, t);
    };
    expect_error([&] { call(x, target_of({0, 7, 1})); }, {op, "target 7", "position 1", "4 classes"});
    expect_error([&] { call(x, target_of({0, 1, -1})); }, {"target -1", "position 2"});
    expect_error([&] { call(x, Tensor::from_vector<float>({0, 1, 2})); }, {"int64", "float32"});
    expect_error([&] { call(x, target_of({0, 1})); }, {"[2]", "[3, 4]"});
    expect_error([&] { call(x, zeros({3, 1}, kInt64)); }, {"[3, 1]", "[3, 4]"});
    expect_error([&] { call(zeros({3}), target_of({0, 1, 2})); }, {"[N, C]", "[3]"});
    expect_error([&] { call(zeros({3, 4}, kInt64), target_of({0, 1, 2})); }, {"floating", "int64"});
  }
}

TEST(MseLoss, ValuesReductionsAndGradients) {
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}), b = Tensor::from_vector<double>({0, 2, 5, 1}, {2, 2});
  EXPECT_DOUBLE_EQ(mse_loss(a, b).item<double>(), (1 + 0 + 4 + 9) / 4.0);
  EXPECT_DOUBLE_EQ(mse_loss(a, b, Reduction::Sum).item<double>(), 14.0);
  EXPECT_EQ(mse_loss(a, b, Reduction::None).to_vector<double>(), (std::vector<double>{1, 0, 4, 9}));
  manual_seed(21);
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    auto result = gradcheck([r](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], r); },
                            {randn({3, 4}, kFloat64).requires_grad_(), randn({3, 4}, kFloat64).requires_grad_()});
    EXPECT_TRUE(result) << result.message;
  }
  nn::MSELoss criterion;
  EXPECT_DOUBLE_EQ(criterion(a, b).item<double>(), 3.5);
  EXPECT_THROW(mse_loss(a, Tensor::from_vector<double>({1, 2})), Error);  // shapes differ
  EXPECT_THROW(mse_loss(a, b.to(kFloat32)), Error);                      // dtypes differ
}

TEST(ActivationModules, MatchTheirOps) {
  manual_seed(22);
  Tensor x = randn({3, 5});
  EXPECT_EQ(nn::Sigmoid()(x).to_vector<float>(), sigmoid(x).to_vector<float>());
  EXPECT_EQ(nn::Tanh()(x).to_vector<float>(), tanh(x).to_vector<float>());
  EXPECT_EQ(nn::Softmax(1)(x).to_vector<float>(), softmax(x, 1).to_vector<float>());
  EXPECT_EQ(nn::LogSoftmax(0)(x).to_vector<float>(), log_softmax(x, 0).to_vector<float>());
  std::ostringstream os;
  os << *nn::Sequential(nn::Tanh(), nn::LogSoftmax(1));
  EXPECT_EQ(os.str(), "Sequential(\n  (0): Tanh()\n  (1): LogSoftmax(dim=1)\n)");
}

}  // namespace minidl::softmax_loss_test
