// The losses' options as PyTorch defines them: reductions, ignore_index (left out of the mean),
// class weights, label smoothing, l1_loss, binary_cross_entropy_with_logits (stable for any |x|,
// pos_weight) and log_sigmoid. Values by hand or by direct loops, float64 gradchecks, the modules
// and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "minidl.h"
#include "float64_util.h"
#include "test_util.h"
#include "nn/nn.h"

namespace minidl::losses_test {

using minidl::testing::expect_error;
using minidl::testing::leaf;
using minidl::testing::expect_gradcheck;

namespace {

Tensor targets(const std::vector<int64_t>& t) { return Tensor::from_vector<int64_t>(t); }

double log_sum_exp(const std::vector<double>& row) {
  double s = 0;
  for (double v : row) s += std::exp(v);
  return std::log(s);
}

// PyTorch's cross_entropy with class weights and label smoothing, written out per row: each row not
// ignored contributes (1 - eps) * w[t] * -lp[t] + eps / C * sum_c w[c] * -lp[c]; the mean divides
// by the sum of w[t] over those rows.
double reference_cross_entropy(const std::vector<double>& logits, int64_t classes, const std::vector<int64_t>& target,
                               const std::vector<double>& weight, int64_t ignore_index, double eps, Reduction reduction) {
  double total = 0, total_weight = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == ignore_index) continue;
    std::vector<double> row(logits.begin() + static_cast<int64_t>(i) * classes,
                            logits.begin() + static_cast<int64_t>(i + 1) * classes);
    const double lse = log_sum_exp(row);
    double smooth = 0;
    for (int64_t c = 0; c < classes; ++c) smooth += weight[c] * (lse - row[c]);
    const int64_t t = target[i];
    total += (1 - eps) * weight[t] * (lse - row[t]) + eps / static_cast<double>(classes) * smooth;
    total_weight += weight[t];
  }
  return reduction == Reduction::Sum ? total : total / total_weight;
}

}  // namespace

static_assert(std::is_invocable_r_v<Tensor, decltype(nn::functional::cross_entropy), Tensor, Tensor>,
              "nn::functional::cross_entropy must be passable as a criterion(output, target)");

TEST(CrossEntropy, IgnoreIndexIsLeftOutOfTheMean) {
  // Row 1 is ignored: the mean is over rows 0 and 2 only (by hand, from log-sum-exp).
  const std::vector<double> x{1, 2, 3, 5, 0, 0, 2, 0, -1};
  Tensor logits = Tensor::from_vector(x, {3, 3});
  const double row0 = log_sum_exp({1, 2, 3}) - 1, row2 = log_sum_exp({2, 0, -1}) + 1;
  EXPECT_NEAR(cross_entropy(logits, targets({0, -100, 2})).item<double>(), (row0 + row2) / 2, 1e-14);
  EXPECT_NEAR(cross_entropy(logits, targets({0, 1, 2}), {}, Reduction::Mean, 1).item<double>(), (row0 + row2) / 2, 1e-14);
  EXPECT_NEAR(cross_entropy(logits, targets({0, -100, 2}), {}, Reduction::Sum).item<double>(), row0 + row2, 1e-14);
  std::vector<double> rows = cross_entropy(logits, targets({0, -100, 2}), {}, Reduction::None).to_vector<double>();
  EXPECT_NEAR(rows[0], row0, 1e-14);
  EXPECT_EQ(rows[1], 0.0);
  EXPECT_NEAR(rows[2], row2, 1e-14);
  // nll_loss agrees; every row ignored gives NaN for the mean (0 / 0, as PyTorch) and 0 for the sum.
  EXPECT_NEAR(nll_loss(log_softmax(logits, 1), targets({0, -100, 2})).item<double>(), (row0 + row2) / 2, 1e-14);
  EXPECT_TRUE(std::isnan(cross_entropy(logits, targets({-100, -100, -100})).item<double>()));
  EXPECT_TRUE(std::isnan(nll_loss(logits, targets({-100, -100, -100})).item<double>()));
  EXPECT_EQ(cross_entropy(logits, targets({-100, -100, -100}), {}, Reduction::Sum).item<double>(), 0.0);
  // The ignored row gets no gradient; the others are scaled by 1 / 2, not 1 / 3.
  Tensor l = logits.clone().requires_grad_();
  cross_entropy(l, targets({0, -100, 2})).backward();
  std::vector<double> g = l.grad().to_vector<double>();
  EXPECT_EQ(std::vector<double>(g.begin() + 3, g.begin() + 6), (std::vector<double>{0, 0, 0}));
  EXPECT_NEAR(g[0], (std::exp(1 - log_sum_exp({1, 2, 3})) - 1) / 2, 1e-14);
  Tensor all_ignored = logits.clone().requires_grad_();
  cross_entropy(all_ignored, targets({-100, -100, -100})).backward();
  EXPECT_EQ(all_ignored.grad().to_vector<double>(), std::vector<double>(9, 0.0));
}

TEST(CrossEntropy, LabelSmoothingByHand) {
  // One row of 3 classes, logits [1, 2, 3], target 2, eps 0.1: log p = x - lse(x) with
  // lse = 3.4076059644; nll = 0.4076059644; the mean over classes of -log p = 1.4076059644; the
  // loss is 0.9 * 0.4076059644 + 0.1 * 1.4076059644 = 0.5076059644.
  Tensor logits = Tensor::from_vector<double>({1, 2, 3}, {1, 3});
  EXPECT_NEAR(cross_entropy(logits, targets({2}), {}, Reduction::Mean, -100, 0.1).item<double>(), 0.5076059644443801,
              1e-12);
  EXPECT_NEAR(cross_entropy(logits.to(kFloat32), targets({2}), {}, Reduction::Mean, -100, 0.1).item<float>(), 0.50760596f,
              1e-6);
  // Smoothing 1 is the mean over classes alone; 0 is plain cross-entropy.
  EXPECT_NEAR(cross_entropy(logits, targets({2}), {}, Reduction::Mean, -100, 1.0).item<double>(), 1.4076059644443801, 1e-12);
  // Several rows, an ignored one, every reduction, with and without class weights, against the
  // per-row definition.
  manual_seed(51);
  Tensor x = randn({4, 5}, kFloat64);
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<int64_t> t{3, 1, -100, 4};
  const std::vector<double> ones(5, 1.0), w{0.5, 1, 2, 1.5, 0.25};
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    for (bool weighted : {false, true}) {
      SCOPED_TRACE(std::string(r == Reduction::Mean ? "mean" : "sum") + (weighted ? " weighted" : ""));
      Tensor wt = weighted ? Tensor::from_vector(w) : Tensor();
      const double got = cross_entropy(x, targets(t), wt, r, -100, 0.2).item<double>();
      EXPECT_NEAR(got, reference_cross_entropy(xv, 5, t, weighted ? w : ones, -100, 0.2, r), 1e-12);
    }
  }
  std::vector<double> rows = cross_entropy(x, targets(t), {}, Reduction::None, -100, 0.2).to_vector<double>();
  EXPECT_EQ(rows[2], 0.0);
  EXPECT_NEAR(rows[0], reference_cross_entropy(xv, 5, {3, -100, -100, -100}, ones, -100, 0.2, Reduction::Sum), 1e-12);
}

TEST(CrossEntropy, FusedAndComposedPathsAgree) {
  manual_seed(52);
  for (DType dtype : {kFloat32, kFloat64}) {
    Tensor x = randn({6, 4}, dtype);
    Tensor t = targets({0, -100, 3, 2, -100, 1});
    Tensor a = x.clone().requires_grad_(), b = x.clone().requires_grad_();
    Tensor fused = cross_entropy(a, t);                               // one kernel
    Tensor composed = nll_loss(log_softmax(b, 1), t);                 // three ops
    const double tol = dtype == kFloat32 ? 1e-6 : 1e-14;
    EXPECT_NEAR(fused.to(kFloat64).item<double>(), composed.to(kFloat64).item<double>(), tol);
    fused.backward();
    composed.backward();
    std::vector<double> ga = a.grad().to(kFloat64).to_vector<double>(), gb = b.grad().to(kFloat64).to_vector<double>();
    for (size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga[i], gb[i], tol) << i;
  }
}

TEST(CrossEntropy, Gradcheck) {
  manual_seed(53);
  Tensor t = targets({2, -100, 0, 4});
  Tensor w = uniform({5}, 0.5, 2, kFloat64);
  expect_gradcheck("fused, ignore_index", [&](auto& in) { return cross_entropy(in[0], t); }, {leaf({4, 5})});
  expect_gradcheck("custom ignore_index", [&](auto& in) { return cross_entropy(in[0], targets({2, 1, 0, 1}), {}, Reduction::Mean, 1); },
                   {leaf({4, 5})});
  expect_gradcheck("sum", [&](auto& in) { return cross_entropy(in[0], t, {}, Reduction::Sum); }, {leaf({4, 5})});
  expect_gradcheck("none", [&](auto& in) { return cross_entropy(in[0], t, {}, Reduction::None); }, {leaf({4, 5})});
  expect_gradcheck("smoothing", [&](auto& in) { return cross_entropy(in[0], t, {}, Reduction::Mean, -100, 0.1); },
                   {leaf({4, 5})});
  expect_gradcheck("smoothing, none", [&](auto& in) { return cross_entropy(in[0], t, {}, Reduction::None, -100, 0.3); },
                   {leaf({4, 5})});
  expect_gradcheck("weight, smoothing", [&](auto& in) { return cross_entropy(in[0], t, w, Reduction::Mean, -100, 0.1); },
                   {leaf({4, 5})});
  expect_gradcheck("weight", [&](auto& in) { return cross_entropy(in[0], t, w, Reduction::Mean, -100, 0.0); },
                   {leaf({4, 5})});
  expect_gradcheck("batch of one", [&](auto& in) { return cross_entropy(in[0], targets({1}), {}, Reduction::Mean, -100, 0.5); },
                   {leaf({1, 3})});
}

TEST(NllLoss, ReductionsWeightsAndIgnoreIndexByHand) {
  const std::vector<double> v{-0.5, -1.0, -2.0, -0.1, -3.0, -0.7, -1.2, -0.4, -0.9};
  Tensor lp = Tensor::from_vector(v, {3, 3});
  Tensor w = Tensor::from_vector<double>({0.5, 1, 2});
  Tensor t = targets({2, 0, 1});
  EXPECT_NEAR(nll_loss(lp, t).item<double>(), (2.0 + 0.1 + 0.4) / 3, 1e-15);
  EXPECT_NEAR(nll_loss(lp, t, {}, Reduction::Sum).item<double>(), 2.5, 1e-15);
  EXPECT_EQ(nll_loss(lp, t, {}, Reduction::None).to_vector<double>(), (std::vector<double>{2.0, 0.1, 0.4}));
  // Weighted: rows weigh w[t] = 2, 0.5, 1; the mean divides by their sum, 3.5.
  EXPECT_NEAR(nll_loss(lp, t, w, Reduction::Mean, -100).item<double>(), (2 * 2.0 + 0.5 * 0.1 + 1 * 0.4) / 3.5, 1e-15);
  EXPECT_NEAR(nll_loss(lp, t, w, Reduction::Sum, -100).item<double>(), 2 * 2.0 + 0.5 * 0.1 + 0.4, 1e-15);
  EXPECT_EQ(nll_loss(lp, t, w, Reduction::None, -100).to_vector<double>(), (std::vector<double>{4.0, 0.05, 0.4}));
  // ignore_index 0 drops row 1 from both the sum and the divisor.
  EXPECT_NEAR(nll_loss(lp, t, w, Reduction::Mean, 0).item<double>(), (2 * 2.0 + 0.4) / 3, 1e-15);
  manual_seed(54);
  Tensor tt = targets({2, -100, 0, 2});
  Tensor wt = uniform({3}, 0.5, 2, kFloat64);
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_gradcheck("nll", [&](auto& in) { return nll_loss(in[0], tt, {}, r); }, {leaf({4, 3})});
    expect_gradcheck("nll weighted", [&](auto& in) { return nll_loss(in[0], tt, wt, r, -100); }, {leaf({4, 3})});
  }
  expect_gradcheck("nll scaled", [&](auto& in) { return nll_loss(in[0], tt) * -3.0; }, {leaf({4, 3})});
}

TEST(L1Loss, ValuesReductionsAndGradient) {
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}), b = Tensor::from_vector<double>({0, 2, 5, 1}, {2, 2});
  EXPECT_DOUBLE_EQ(l1_loss(a, b).item<double>(), (1 + 0 + 2 + 3) / 4.0);
  EXPECT_DOUBLE_EQ(l1_loss(a, b, Reduction::Sum).item<double>(), 6.0);
  EXPECT_EQ(l1_loss(a, b, Reduction::None).to_vector<double>(), (std::vector<double>{1, 0, 2, 3}));
  // The gradient is sign(a - b) / N, 0 where they are equal (as PyTorch's).
  Tensor al = a.clone().requires_grad_();
  l1_loss(al, b).backward();
  EXPECT_EQ(al.grad().to_vector<double>(), (std::vector<double>{0.25, 0, -0.25, 0.25}));
  manual_seed(55);
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
    expect_gradcheck("l1", [r](auto& in) { return l1_loss(in[0], in[1], r); }, {leaf({3, 4}), leaf({3, 4})});
  nn::L1Loss criterion(Reduction::Sum);
  EXPECT_DOUBLE_EQ(criterion(a, b).item<double>(), 6.0);
}

TEST(BceWithLogits, StableForLargeLogits) {
  // Each of these overflows a naive sigmoid-then-log in float32; the loss and its gradient stay
  // finite and exact: 0 for confident right answers, |x| for confident wrong ones.
  Tensor x = Tensor::from_vector<float>({1000, -1000, 1000, -1000, 0, 100});
  Tensor t = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1});
  std::vector<float> loss = binary_cross_entropy_with_logits(x, t, {}, {}, Reduction::None).to_vector<float>();
  const std::vector<float> expected{0, 0, 1000, 1000, std::log(2.0f), 0};
  for (size_t i = 0; i < loss.size(); ++i) EXPECT_NEAR(loss[i], expected[i], 1e-6) << i;
  Tensor xl = x.clone().requires_grad_();
  binary_cross_entropy_with_logits(xl, t, {}, {}, Reduction::Sum).backward();
  const std::vector<float> grad = xl.grad().to_vector<float>(), expected_grad{0, 0, 1, -1, -0.5f, 0};
  for (size_t i = 0; i < grad.size(); ++i) EXPECT_NEAR(grad[i], expected_grad[i], 1e-30) << i;  // -sigmoid(-100) last
  for (DType dtype : {kFloat32, kFloat64}) {
    const double v = binary_cross_entropy_with_logits(x.to(dtype) * 1e30, t.to(dtype)).to(kFloat64).item<double>();
    EXPECT_TRUE(std::isfinite(v)) << dtype;
  }
  // log_sigmoid itself, and its gradient sigmoid(-x), at the extremes.
  Tensor ls = Tensor::from_vector<double>({-800, 0, 800}).requires_grad_();
  Tensor y = log_sigmoid(ls);
  EXPECT_EQ(y.to_vector<double>()[0], -800.0);
  EXPECT_DOUBLE_EQ(y.to_vector<double>()[1], -std::log(2.0));
  EXPECT_EQ(y.to_vector<double>()[2], 0.0);
  y.sum().backward();
  EXPECT_EQ(ls.grad().to_vector<double>(), (std::vector<double>{1, 0.5, 0}));
}

TEST(BceWithLogits, ValuesPosWeightAndWeight) {
  // Against the textbook formula -(p t log s + (1 - t) log(1 - s)), s = sigmoid(x), on moderate x.
  manual_seed(56);
  Tensor x = randn({3, 4}, kFloat64) * 2.0, t = rand({3, 4}, kFloat64);  // soft targets too
  Tensor pw = Tensor::from_vector<double>({0.5, 1, 2, 3});               // one per class, broadcast
  Tensor w = Tensor::from_vector<double>({1, 0, 2}, {3, 1});             // one per row, broadcast
  std::vector<double> xv = x.to_vector<double>(), tv = t.to_vector<double>();
  std::vector<double> got = binary_cross_entropy_with_logits(x, t, w, pw, Reduction::None).to_vector<double>();
  double mean = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double s = 1 / (1 + std::exp(-xv[i]));
    const double p = pw.to_vector<double>()[i % 4], wi = w.to_vector<double>()[i / 4];
    const double ref = -wi * (p * tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s));
    EXPECT_NEAR(got[i], ref, 1e-12) << i;
    mean += ref / 12;
  }
  EXPECT_NEAR(binary_cross_entropy_with_logits(x, t, w, pw, Reduction::Mean).item<double>(), mean, 1e-12);
  // By hand: x = 0, t = 1, pos_weight 3: 3 log 2.
  EXPECT_NEAR(binary_cross_entropy_with_logits(zeros({1}, kFloat64), ones({1}, kFloat64), {}, full({1}, 3.0, kFloat64), Reduction::Sum)
                  .item<double>(),
              3 * std::log(2.0), 1e-15);
  // Gradients to every input: logits, targets, pos_weight and weight.
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_gradcheck("bce", [r](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], {}, {}, r); },
                     {leaf({3, 4}), rand({3, 4}, kFloat64).requires_grad_()});
  }
  expect_gradcheck("bce pos_weight, weight",
                   [](auto& in) { return binary_cross_entropy_with_logits(in[0], in[1], in[3], in[2], Reduction::Mean); },
                   {leaf({3, 4}), rand({3, 4}, kFloat64).requires_grad_(),
                    uniform({4}, 0.5, 2, kFloat64).requires_grad_(), uniform({3, 1}, 0.5, 2, kFloat64).requires_grad_()});
  expect_gradcheck("log_sigmoid", [](auto& in) { return log_sigmoid(in[0]); }, {leaf({2, 5})});
  // At exactly 0 the gradient is -(1 - t) ... the smooth value, not a kink's.
  Tensor z = zeros({1}, kFloat64).requires_grad_();
  binary_cross_entropy_with_logits(z, ones({1}, kFloat64)).backward();
  EXPECT_DOUBLE_EQ(z.grad().item<double>(), -0.5);
}

TEST(LossModules, OptionsBuffersAndPrinting) {
  manual_seed(57);
  Tensor x = randn({4, 3}, kFloat64);
  Tensor t = targets({0, 2, 1, 2});
  Tensor w = Tensor::from_vector<double>({1, 2, 0.5});
  nn::CrossEntropyLoss plain;
  EXPECT_DOUBLE_EQ(plain(x, t).item<double>(), cross_entropy(x, t).item<double>());
  nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().weight(w).ignore_index(1).label_smoothing(0.1).reduction(Reduction::Sum));
  EXPECT_DOUBLE_EQ(ce(x, t).item<double>(), cross_entropy(x, t, w, Reduction::Sum, 1, 0.1).item<double>());
  EXPECT_EQ(ce->named_buffers().size(), 1u);
  EXPECT_EQ(ce->named_buffers()[0].first, "weight");
  EXPECT_TRUE(plain->named_buffers().empty());
  nn::NLLLoss nll(nn::NLLLossOptions().weight(w).reduction(Reduction::None));
  EXPECT_EQ(nll(x, t).to_vector<double>(), nll_loss(x, t, w, Reduction::None, -100).to_vector<double>());
  Tensor probs = rand({4, 3}, kFloat64), pw = full({3}, 2.0, kFloat64);
  nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions().pos_weight(pw));
  EXPECT_DOUBLE_EQ(bce(x, probs).item<double>(),
                   binary_cross_entropy_with_logits(x, probs, {}, pw, Reduction::Mean).item<double>());
  EXPECT_EQ(bce->named_buffers()[0].first, "pos_weight");
  // The weight buffers follow the module's dtype.
  const double in_float64 = ce(x, t).item<double>();
  ce->to(kFloat32);
  EXPECT_EQ(ce->weight.dtype(), kFloat32);
  EXPECT_NEAR(ce(x.to(kFloat32), t).item<float>(), in_float64, 1e-5);
  std::ostringstream os;
  os << *nn::Sequential(nn::CrossEntropyLoss(), nn::NLLLoss(), nn::L1Loss(), nn::BCEWithLogitsLoss());
  EXPECT_EQ(os.str(),
            "Sequential(\n  (0): CrossEntropyLoss()\n  (1): NLLLoss()\n  (2): L1Loss()\n  (3): BCEWithLogitsLoss()\n)");
}

TEST(LossErrors, SayWhatWasExpectedAndFound) {
  Tensor x = zeros({3, 4});
  Tensor t = targets({0, 1, 2});
  expect_error([&] { cross_entropy(x, Tensor::from_vector<float>({0, 1, 2})); }, {"cross_entropy", "int64", "float32"});
  expect_error([&] { cross_entropy(x, targets({0, 1})); }, {"cross_entropy", "[3]", "[2]"});
  expect_error([&] { cross_entropy(x, targets({0, 5, 1}), {}, Reduction::Sum); }, {"target 5", "position 1", "4 classes"});
  expect_error([&] { cross_entropy(x, targets({0, -1, 1}), {}, Reduction::Mean, -100, 0.1); }, {"target -1", "ignore_index -100"});
  expect_error([&] { cross_entropy(x, t, {}, Reduction::Mean, -100, 1.5); }, {"label_smoothing", "[0, 1]", "1.5"});
  expect_error([&] { cross_entropy(x, t, ones({3}), Reduction::Mean, -100, 0.0); }, {"weight", "[4]", "[3]"});
  expect_error([&] { nll_loss(x, t, ones({4}, kFloat64), Reduction::Mean, -100); }, {"weight", "float32", "float64"});
  expect_error([&] { nll_loss(x, targets({0, 9, 1}), {}, Reduction::None); }, {"nll_loss", "target 9", "4 classes"});
  expect_error([&] { l1_loss(x, zeros({4, 3})); }, {"l1_loss", "[3, 4]", "[4, 3]"});
  expect_error([&] { l1_loss(x, zeros({3, 4}, kFloat64)); }, {"l1_loss", "float32", "float64"});
  expect_error([&] { binary_cross_entropy_with_logits(x, zeros({3})); }, {"binary_cross_entropy_with_logits", "[3, 4]", "[3]"});
  expect_error([&] { binary_cross_entropy_with_logits(x, zeros({3, 4}), {}, ones({3}), Reduction::Mean); },
               {"pos_weight", "[3]", "[3, 4]"});
  expect_error([&] { binary_cross_entropy_with_logits(x, zeros({3, 4}), ones({4}, kFloat64), Tensor(), Reduction::Mean); },
               {"weight", "float64", "float32"});
  expect_error([&] { log_sigmoid(zeros({2}, kInt64)); }, {"log_sigmoid", "floating", "int64"});
}

}  // namespace minidl::losses_test
