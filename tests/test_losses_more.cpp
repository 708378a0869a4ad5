// binary_cross_entropy, kl_div, smooth_l1_loss, huber_loss, and nll_loss / cross_entropy over
// spatial dims: values by hand (as PyTorch gives them), by loops, float64 gradchecks, the modules,
// the functional options and the errors.
#include <gtest/gtest.h>

#include <cmath>

#include "minidl.h"
#include "nn/nn.h"
#include "float64_util.h"
#include "test_util.h"

namespace minidl::losses_more_test {

using minidl::testing::expect_error;
using minidl::testing::f64;
using minidl::testing::values;
using minidl::testing::leaf;
using minidl::testing::expect_gradcheck;

namespace {

}  // namespace

TEST(LossesMore, BinaryCrossEntropy) {
  Tensor x = f64({0.8, 0.3, 0.5}), t = f64({1, 0, 0.5});
  EXPECT_NEAR(binary_cross_entropy(x, t).item<double>(), 0.4243218919376292, 1e-15);
  EXPECT_NEAR(binary_cross_entropy(x, t, f64({2, 1, 0})).item<double>(), 0.26765401552238394, 1e-15);
  EXPECT_NEAR(binary_cross_entropy(x, t, {}, Reduction::Sum).item<double>(), 3 * 0.4243218919376292, 1e-14);
  // Each log is clamped to -100: certainty and its opposite give 100, not infinity.
  EXPECT_EQ(values(binary_cross_entropy(f64({0, 1, 0}), f64({1, 0, 0}), {}, Reduction::None)),
            (std::vector<double>{100, 100, 0}));
  Tensor edge = f64({0.0, 1.0}).requires_grad_();
  binary_cross_entropy(edge, f64({0, 1})).backward();
  EXPECT_EQ(values(edge.grad()), (std::vector<double>{0, 0}));  // finite, as PyTorch's
  // The same loss as on logits, through the sigmoid.
  Tensor logits = randn({4, 3}, kFloat64), labels = rand({4, 3}, kFloat64);
  EXPECT_NEAR(binary_cross_entropy(sigmoid(logits), labels).item<double>(),
              binary_cross_entropy_with_logits(logits, labels).item<double>(), 1e-12);
  auto probs = [] { return (rand({3, 4}, kFloat64) * 0.8 + 0.1).requires_grad_(); };
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
    expect_gradcheck("bce", [r](auto& in) { return binary_cross_entropy(in[0], in[1], {}, r); }, {probs(), probs()});
  expect_gradcheck("bce weight", [](auto& in) { return binary_cross_entropy(in[0], in[1], in[2]); },
                   {probs(), probs(), rand({4}, kFloat64)});
}

TEST(LossesMore, KlDiv) {
  Tensor input = log(f64({0.25, 0.75, 0.25, 0.75}, {2, 2})), target = f64({0.5, 0.5, 0.5, 0.5}, {2, 2});
  const double per_row = 0.14384103622589042;  // 0.5 * log(4 / 3)
  EXPECT_NEAR(kl_div(input, target, Reduction::Sum).item<double>(), 2 * per_row, 1e-15);
  EXPECT_NEAR(kl_div(input, target, Reduction::BatchMean).item<double>(), per_row, 1e-15);
  EXPECT_NEAR(kl_div(input, target).item<double>(), per_row / 2, 1e-15);  // Mean: over all 4 elements
  EXPECT_NEAR(kl_div(input, log(target), Reduction::BatchMean, /*log_target=*/true).item<double>(), per_row, 1e-15);
  // A zero target contributes 0 (0 * log 0 = 0), and its gradients stay finite.
  Tensor t0 = f64({1, 0}).requires_grad_();
  Tensor x0 = log(f64({0.25, 0.75})).detach().requires_grad_();
  Tensor loss = kl_div(x0, t0, Reduction::Sum);
  EXPECT_NEAR(loss.item<double>(), std::log(4.0), 1e-15);
  loss.backward();
  for (double g : values(t0.grad())) EXPECT_TRUE(std::isfinite(g));
  EXPECT_EQ(values(x0.grad()), (std::vector<double>{-1, 0}));
  Tensor positive = (rand({3, 4}, kFloat64) + 0.1).requires_grad_();
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None, Reduction::BatchMean}) {
    expect_gradcheck("kl_div", [r](auto& in) { return kl_div(in[0], in[1], r); }, {leaf({3, 4}), positive});
    expect_gradcheck("kl_div log_target", [r](auto& in) { return kl_div(in[0], in[1], r, true); },
                     {leaf({3, 4}), leaf({3, 4})});
  }
}

TEST(LossesMore, SmoothL1AndHuber) {
  Tensor x = f64({0.5, 3, -1}), t = f64({0, 1, 0});
  EXPECT_EQ(values(smooth_l1_loss(x, t, Reduction::None)), (std::vector<double>{0.125, 1.5, 0.5}));
  EXPECT_EQ(values(smooth_l1_loss(x, t, Reduction::None, 2.0)), (std::vector<double>{0.0625, 1.0, 0.25}));
  EXPECT_EQ(values(smooth_l1_loss(x, t, Reduction::None, 0.0)), (std::vector<double>{0.5, 2, 1}));
  EXPECT_NEAR(smooth_l1_loss(x, t).item<double>(), 2.125 / 3, 1e-15);
  EXPECT_EQ(values(huber_loss(x, t, Reduction::None)), (std::vector<double>{0.125, 1.5, 0.5}));
  EXPECT_EQ(values(huber_loss(x, t, Reduction::None, 2.0)), (std::vector<double>{0.125, 2.0, 0.5}));
  EXPECT_DOUBLE_EQ(huber_loss(x, t, Reduction::Sum, 2.0).item<double>(), 2.625);
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    expect_gradcheck("smooth_l1", [r](auto& in) { return smooth_l1_loss(in[0], in[1], r, 0.7); },
                     {leaf({3, 4}), leaf({3, 4})});
    expect_gradcheck("huber", [r](auto& in) { return huber_loss(in[0], in[1], r, 0.7); }, {leaf({3, 4}), leaf({3, 4})});
  }
}

TEST(LossesMore, SpatialNllAndCrossEntropy) {
  // input [N=2, C=3, 2, 2], target [2, 2, 2]; by loops over every (n, h, w).
  Tensor logits = randn({2, 3, 2, 2}, kFloat64);
  Tensor target = Tensor::from_vector<int64_t>({0, 2, 1, -100, 2, 2, 0, 1}, {2, 2, 2});
  Tensor weight = f64({0.5, 2.0, 1.0});
  std::vector<double> x = values(logits), w = values(weight);
  std::vector<int64_t> t = target.to_vector<int64_t>();
  double nll_sum = 0, nll_weight = 0, ce_sum = 0, ce_count = 0;
  std::vector<double> ce_rows(8, 0.0);
  for (int n = 0; n < 2; ++n)
    for (int p = 0; p < 4; ++p) {
      const int64_t c = t[n * 4 + p];
      if (c == -100) continue;
      double lse = 0;
      for (int k = 0; k < 3; ++k) lse += std::exp(x[(n * 3 + k) * 4 + p]);
      const double nlp = std::log(lse) - x[(n * 3 + c) * 4 + p];
      ce_rows[n * 4 + p] = nlp;
      ce_sum += nlp;
      ce_count += 1;
      nll_sum += w[c] * -x[(n * 3 + c) * 4 + p];
      nll_weight += w[c];
    }
  EXPECT_NEAR(cross_entropy(logits, target).item<double>(), ce_sum / ce_count, 1e-12);
  Tensor rows = cross_entropy(logits, target, {}, Reduction::None);
  EXPECT_EQ(rows.shape(), (Shape{2, 2, 2}));
  std::vector<double> rv = values(rows);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(rv[i], ce_rows[i], 1e-12);
  EXPECT_NEAR(nll_loss(logits, target, weight).item<double>(), nll_sum / nll_weight, 1e-12);
  EXPECT_NEAR(nll_loss(logits, target, weight, Reduction::Sum).item<double>(), nll_sum, 1e-12);
  // libtorch's argument order: an empty weight, then the reduction.
  Tensor lp = log_softmax(randn({4, 3}, kFloat64), 1);
  Tensor t2 = Tensor::from_vector<int64_t>({0, 1, 2, 1});
  EXPECT_NEAR(nll_loss(lp, t2, {}, Reduction::Sum).item<double>(), 4 * nll_loss(lp, t2).item<double>(), 1e-12);
  // [C] with a 0-d target.
  Tensor one = randn({5}, kFloat64);
  EXPECT_NEAR(cross_entropy(one, reshape(Tensor::from_vector<int64_t>({3}), {})).item<double>(),
              cross_entropy(unsqueeze(one, 0), Tensor::from_vector<int64_t>({3})).item<double>(), 1e-14);
  Tensor st = Tensor::from_vector<int64_t>({0, 2, 1, 1, 2, 0}, {2, 3});
  expect_gradcheck("ce spatial", [&](auto& in) { return cross_entropy(in[0], st); }, {leaf({2, 3, 3})});
  expect_gradcheck("ce spatial, all options",
                   [&](auto& in) { return cross_entropy(in[0], st, in[1], Reduction::Mean, 1, 0.1); },
                   {leaf({2, 3, 3}), rand({3}, kFloat64) + 0.5});
  expect_gradcheck("nll spatial none", [&](auto& in) { return nll_loss(in[0], st, {}, Reduction::None); },
                   {leaf({2, 3, 3})});
}

TEST(LossesMore, ModulesAndFunctionalOptions) {
  namespace F = nn::functional;
  Tensor p = f64({0.8, 0.3}), y = f64({1, 0});
  nn::BCELoss bce;
  EXPECT_DOUBLE_EQ(bce(p, y).item<double>(), binary_cross_entropy(p, y).item<double>());
  nn::BCELoss bce_w(nn::BCELossOptions().weight(f64({1, 2})).reduction(Reduction::Sum));
  EXPECT_DOUBLE_EQ(bce_w(p, y).item<double>(), binary_cross_entropy(p, y, f64({1, 2}), Reduction::Sum).item<double>());
  EXPECT_EQ(bce_w->buffers().size(), 1u);
  Tensor lp = log(f64({0.25, 0.75})), q = f64({0.5, 0.5});
  nn::KLDivLoss kl(nn::KLDivLossOptions().reduction(Reduction::BatchMean));
  EXPECT_DOUBLE_EQ(kl(lp, q).item<double>(), kl_div(lp, q, Reduction::BatchMean).item<double>());
  nn::SmoothL1Loss sl1(nn::SmoothL1LossOptions().beta(0.5));
  nn::HuberLoss huber(nn::HuberLossOptions().delta(0.5).reduction(Reduction::Sum));
  EXPECT_DOUBLE_EQ(sl1(p, y).item<double>(), smooth_l1_loss(p, y, Reduction::Mean, 0.5).item<double>());
  EXPECT_DOUBLE_EQ(huber(p, y).item<double>(), huber_loss(p, y, Reduction::Sum, 0.5).item<double>());
  EXPECT_EQ(sl1->name(), "SmoothL1Loss");
  // F:: with libtorch's options objects.
  Tensor logits = randn({2, 3, 4}, kFloat64);
  Tensor target = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 1, 2, 2}, {2, 4});
  EXPECT_DOUBLE_EQ(F::nll_loss(log_softmax(logits, 1), target, F::NLLLossFuncOptions().reduction(Reduction::Sum))
                       .item<double>(),
                   nll_loss(log_softmax(logits, 1), target, {}, Reduction::Sum).item<double>());
  EXPECT_DOUBLE_EQ(F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().ignore_index(1).label_smoothing(0.2))
                       .item<double>(),
                   cross_entropy(logits, target, {}, Reduction::Mean, 1, 0.2).item<double>());
  EXPECT_DOUBLE_EQ(F::cross_entropy(logits, target, {}, Reduction::Sum).item<double>(),
                   cross_entropy(logits, target, {}, Reduction::Sum).item<double>());
  EXPECT_DOUBLE_EQ(F::kl_div(lp, q, F::KLDivFuncOptions().reduction(Reduction::Sum)).item<double>(),
                   kl_div(lp, q, Reduction::Sum).item<double>());
  EXPECT_DOUBLE_EQ(F::huber_loss(p, y, F::HuberLossFuncOptions().delta(0.25)).item<double>(),
                   huber_loss(p, y, Reduction::Mean, 0.25).item<double>());
  EXPECT_DOUBLE_EQ(F::binary_cross_entropy(p, y).item<double>(), binary_cross_entropy(p, y).item<double>());
  // A Reduction alone stays the free function's argument (L1LossOptions converts from one).
  EXPECT_DOUBLE_EQ(F::mse_loss(p, y, Reduction::Sum).item<double>(), mse_loss(p, y, Reduction::Sum).item<double>());
  nn::NLLLoss spatial;
  EXPECT_DOUBLE_EQ(spatial(log_softmax(logits, 1), target).item<double>(),
                   nll_loss(log_softmax(logits, 1), target).item<double>());
}

TEST(LossesMore, Errors) {
  Tensor x = rand({3, 4});
  expect_error([&] { binary_cross_entropy(x, rand({3})); }, {"binary_cross_entropy", "[3, 4]", "[3]"});
  expect_error([&] { binary_cross_entropy(x, x, ones({5})); }, {"binary_cross_entropy", "weight", "[5]"});
  expect_error([&] { kl_div(x, rand({4, 3})); }, {"kl_div", "[3, 4]", "[4, 3]"});
  expect_error([&] { smooth_l1_loss(x, x, Reduction::Mean, -1.0); }, {"smooth_l1_loss", "beta", "-1"});
  expect_error([&] { huber_loss(x, x, Reduction::Mean, 0.0); }, {"huber_loss", "delta > 0", "0"});
  expect_error([&] { mse_loss(x, x, Reduction::BatchMean); }, {"mse_loss", "BatchMean", "kl_div"});
  expect_error([&] { huber_loss(x, x.to(kFloat64)); }, {"huber_loss", "float32", "float64"});
  Tensor logits = randn({2, 3, 4});
  expect_error([&] { cross_entropy(logits, zeros({2, 3}, kInt64)); },
               {"cross_entropy", "[2, 4]", "[2, 3, 4]", "[2, 3]"});
  expect_error([&] { nll_loss(logits, zeros({2, 4})); }, {"nll_loss", "int64", "float32"});
  expect_error([&] { nll_loss(randn({3}), zeros({1}, kInt64)); }, {"nll_loss", "0-d", "[1]"});
  expect_error([&] { cross_entropy(logits, Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 0}, {2, 4})); },
               {"cross_entropy", "target 3", "3 classes"});
}

}  // namespace minidl::losses_more_test
