// The margin, embedding and likelihood losses (ops/loss_margin.h, ops/loss_likelihood.h): values
// against references written as plain loops over doubles, every reduction, float64 gradchecks on
// random inputs, the modules (nn/loss_more.h) and their printing, the F:: forms and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <sstream>

#include "float64_util.h"
#include "minidl.h"
#include "nn/functional_more.h"
#include "nn/loss_more.h"
#include "ops/loss_likelihood.h"
#include "ops/loss_margin.h"
#include "test_util.h"

namespace minidl::losses_margin_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::f64;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

const GradcheckOptions kTight{1e-6, 1e-8, 1e-6};
const Reduction kReductions[] = {Reduction::Mean, Reduction::Sum, Reduction::None};

// The per-element losses folded as `r` folds them.
std::vector<double> reduced(const std::vector<double>& per_element, Reduction r) {
  if (r == Reduction::None) return per_element;
  double s = 0;
  for (double v : per_element) s += v;
  return {r == Reduction::Sum ? s : s / static_cast<double>(per_element.size())};
}

void expect_values(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  const std::vector<double> v = values(got);
  ASSERT_EQ(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
}

// n values of 1 or -1, at random.
Tensor signs(int64_t n) {
  std::vector<double> v = values(rand({n}, kFloat64));
  for (double& x : v) x = x < 0.5 ? -1.0 : 1.0;
  return f64(v);
}

template <class T>
std::string printed(const T& module) {
  std::ostringstream os;
  os << module;
  return os.str();
}

double log_sigmoid_ref(double z) { return z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z)); }

}  // namespace

TEST(LossesMargin, MarginRanking) {
  Tensor a = randn({6}, kFloat64), b = randn({6}, kFloat64), y = signs(6);
  const std::vector<double> x1 = values(a), x2 = values(b), t = values(y);
  for (double margin : {0.0, 0.7}) {
    std::vector<double> per;
    for (size_t i = 0; i < 6; ++i) per.push_back(std::max(0.0, -t[i] * (x1[i] - x2[i]) + margin));
    for (Reduction r : kReductions) expect_values(margin_ranking_loss(a, b, y, margin, r), reduced(per, r));
  }
  // A hand value: y = 1 wants x1 > x2; 0.2 - 1 + 0.5 is 0 after the clamp, 1 - 0.2 + 0.5 = 1.3.
  EXPECT_DOUBLE_EQ(margin_ranking_loss(f64({1, 0.2}), f64({0.2, 1}), f64({1, 1}), 0.5, Reduction::Sum).item<double>(), 1.3);
  // Broadcast: one target column for every row.
  EXPECT_EQ(margin_ranking_loss(randn({3, 4}, kFloat64), randn({3, 4}, kFloat64), f64({1, -1, 1}, {3, 1}), 0.0,
                                Reduction::None).shape(),
            (Shape{3, 4}));
  for (Reduction r : kReductions)
    expect_gradcheck("margin_ranking_loss", [&](auto& in) { return margin_ranking_loss(in[0], in[1], y, 0.3, r); },
                     {leaf({6}), leaf({6})}, kTight);
  expect_error([&] { margin_ranking_loss(a, b, f64({1, -1}, {1, 2})); },
               {"margin_ranking_loss", "one number of dims", "[6]", "[1, 2]"});
  expect_error([&] { margin_ranking_loss(a, randn({5}, kFloat64), y); }, {"margin_ranking_loss", "[6]", "[5]"});
  expect_error([&] { margin_ranking_loss(a, b, y, 0.0, Reduction::BatchMean); }, {"margin_ranking_loss", "BatchMean"});
}

TEST(LossesMargin, HingeEmbedding) {
  Tensor x = randn({7}, kFloat64);
  Tensor y = f64({1, -1, 1, -1, 0, 1, -1});  // 0: neither, so both terms, as PyTorch's
  const std::vector<double> xv = values(x), t = values(y);
  for (double margin : {1.0, 0.25}) {
    std::vector<double> per;
    for (size_t i = 0; i < 7; ++i)
      per.push_back((t[i] != 1 ? std::max(0.0, margin - xv[i]) : 0.0) + (t[i] != -1 ? xv[i] : 0.0));
    for (Reduction r : kReductions) expect_values(hinge_embedding_loss(x, y, margin, r), reduced(per, r));
  }
  EXPECT_DOUBLE_EQ(hinge_embedding_loss(f64({0.3, 0.3, 2}), f64({1, -1, -1}), 1.0, Reduction::Sum).item<double>(), 1.0);
  for (Reduction r : kReductions)
    expect_gradcheck("hinge_embedding_loss", [&](auto& in) { return hinge_embedding_loss(in[0], y, 0.5, r); },
                     {leaf({7})}, kTight);
  expect_error([&] { hinge_embedding_loss(x, f64({1, -1})); }, {"hinge_embedding_loss", "broadcasts", "[7]", "[2]"});
  expect_error([&] { hinge_embedding_loss(x, y.to(kFloat32)); }, {"hinge_embedding_loss", "float64", "float32"});
}

TEST(LossesMargin, SoftMargin) {
  Tensor x = randn({3, 4}, kFloat64), y = reshape(signs(12), {3, 4});
  const std::vector<double> xv = values(x), t = values(y);
  std::vector<double> per;
  for (size_t i = 0; i < 12; ++i) per.push_back(std::log1p(std::exp(-t[i] * xv[i])));
  for (Reduction r : kReductions) expect_values(soft_margin_loss(x, y, r), reduced(per, r));
  // Stable where log1p(exp(-z)) would overflow: -z = 1000 gives 1000.
  EXPECT_DOUBLE_EQ(soft_margin_loss(f64({1000, -1000}), f64({-1, -1}), Reduction::None).to_vector<double>()[0], 1000.0);
  for (Reduction r : kReductions)
    expect_gradcheck("soft_margin_loss", [&](auto& in) { return soft_margin_loss(in[0], in[1], r); },
                     {leaf({3, 4}), leaf({3, 4})}, kTight);
  expect_error([&] { soft_margin_loss(x, randn({4, 3}, kFloat64)); }, {"soft_margin_loss", "[3, 4]", "[4, 3]"});
}

TEST(LossesMargin, CosineEmbedding) {
  const int64_t n = 5, d = 4;
  Tensor a = randn({n, d}, kFloat64), b = randn({n, d}, kFloat64), y = signs(n);
  const std::vector<double> av = values(a), bv = values(b), t = values(y);
  auto cos_ref = [&](int64_t i) {
    double dot = 0, m1 = 0, m2 = 0;
    for (int64_t k = 0; k < d; ++k) {
      dot += av[i * d + k] * bv[i * d + k];
      m1 += av[i * d + k] * av[i * d + k];
      m2 += bv[i * d + k] * bv[i * d + k];
    }
    return dot / std::sqrt((m1 + 1e-12) * (m2 + 1e-12));
  };
  for (double margin : {0.0, -0.3, 0.4}) {
    std::vector<double> per;
    for (int64_t i = 0; i < n; ++i) per.push_back(t[i] == 1 ? 1 - cos_ref(i) : std::max(0.0, cos_ref(i) - margin));
    for (Reduction r : kReductions) expect_values(cosine_embedding_loss(a, b, y, margin, r), reduced(per, r));
  }
  // [D] with a 0-d target: the first row alone.
  Tensor one = cosine_embedding_loss(a[0], b[0], reshape(f64({1}), {}), 0.0, Reduction::None);
  EXPECT_EQ(one.dim(), 0);
  EXPECT_NEAR(one.item<double>(), 1 - cos_ref(0), 1e-12);
  for (Reduction r : kReductions)
    expect_gradcheck("cosine_embedding_loss", [&](auto& in) { return cosine_embedding_loss(in[0], in[1], y, -0.2, r); },
                     {leaf({n, d}), leaf({n, d})}, kTight);
  expect_error([&] { cosine_embedding_loss(a, b, ones({n, 1}, kFloat64)); },
               {"cosine_embedding_loss", "0-d or 1-D target", "[5, 1]"});
  expect_error([&] { cosine_embedding_loss(a[0], b[0], y); }, {"cosine_embedding_loss", "2-D inputs", "[4]", "[5]"});
  expect_error([&] { cosine_embedding_loss(a, b, signs(3)); }, {"cosine_embedding_loss", "target of shape [5]", "[3]"});
}

TEST(LossesMargin, TripletMargin) {
  const int64_t n = 4, d = 3;
  Tensor an = randn({n, d}, kFloat64), po = randn({n, d}, kFloat64), ne = randn({n, d}, kFloat64);
  const std::vector<double> av = values(an), pv = values(po), nv = values(ne);
  auto dist = [&](const std::vector<double>& x, const std::vector<double>& y, int64_t i, double p, double eps) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k) s += std::pow(std::abs(x[i * d + k] - y[i * d + k] + eps), p);
    return std::pow(s, 1 / p);
  };
  for (double p : {2.0, 1.0, 3.0})
    for (bool swap : {false, true}) {
      std::vector<double> per;
      for (int64_t i = 0; i < n; ++i) {
        double dn = dist(av, nv, i, p, 1e-6);
        if (swap) dn = std::min(dn, dist(pv, nv, i, p, 1e-6));
        per.push_back(std::max(0.0, 2.0 + dist(av, pv, i, p, 1e-6) - dn));
      }
      for (Reduction r : kReductions)
        expect_values(triplet_margin_loss(an, po, ne, 2.0, p, 1e-6, swap, r), reduced(per, r), 1e-11);
    }
  for (bool swap : {false, true})
    expect_gradcheck("triplet_margin_loss",
                     [&](auto& in) { return triplet_margin_loss(in[0], in[1], in[2], 3.0, 2.0, 1e-6, swap, Reduction::Sum); },
                     {leaf({n, d}), leaf({n, d}), leaf({n, d})}, kTight);
  expect_gradcheck("triplet_margin_loss p=1",
                   [&](auto& in) { return triplet_margin_loss(in[0], in[1], in[2], 3.0, 1.0, 1e-6, false, Reduction::None); },
                   {leaf({n, d}), leaf({n, d}), leaf({n, d})}, kTight);
  expect_error([&] { triplet_margin_loss(an, po, ne[0]); },
               {"triplet_margin_loss", "one number of dims", "anchor 2-D", "negative 1-D", "[3]"});
  expect_error([&] { triplet_margin_loss(an, po, ne, 1.0, 0.0); }, {"triplet_margin_loss", "p > 0", "0"});
}

TEST(LossesMargin, MultilabelSoftMargin) {
  const int64_t n = 3, c = 4;
  Tensor x = randn({n, c}, kFloat64), y = reshape(f64({1, 0, 0, 1, 0, 1, 1, 0, 0.3, 1, 0, 0}), {n, c});
  Tensor w = f64({0.5, 1, 2, 1.5});
  const std::vector<double> xv = values(x), t = values(y), wv = values(w);
  for (bool weighted : {false, true}) {
    std::vector<double> per;
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t k = 0; k < c; ++k) {
        const double z = xv[i * c + k], tk = t[i * c + k];
        s += -(tk * log_sigmoid_ref(z) + (1 - tk) * log_sigmoid_ref(-z)) * (weighted ? wv[k] : 1.0);
      }
      per.push_back(s / c);
    }
    for (Reduction r : kReductions)
      expect_values(multilabel_soft_margin_loss(x, y, weighted ? w : Tensor(), r), reduced(per, r));
  }
  EXPECT_EQ(multilabel_soft_margin_loss(x, y, {}, Reduction::None).shape(), (Shape{n}));
  for (Reduction r : kReductions)
    expect_gradcheck("multilabel_soft_margin_loss",
                     [&](auto& in) { return multilabel_soft_margin_loss(in[0], in[1], in[2], r); },
                     {leaf({n, c}), leaf({n, c}), leaf({c})}, kTight);
  expect_error([&] { multilabel_soft_margin_loss(x, randn({n}, kFloat64)); },
               {"multilabel_soft_margin_loss", "[3, 4]", "[3]"});
  expect_error([&] { multilabel_soft_margin_loss(x, y, ones({3}, kFloat64)); },
               {"multilabel_soft_margin_loss", "weight", "[3]", "[3, 4]"});
}

TEST(LossesMargin, MultiMargin) {
  const int64_t n = 5, c = 4;
  Tensor x = randn({n, c}, kFloat64), y = Tensor::from_vector<int64_t>({0, 3, 1, 1, 2});
  Tensor w = f64({0.5, 1, 2, 1.5});
  const std::vector<double> xv = values(x), wv = values(w);
  const std::vector<int64_t> t = y.to_vector<int64_t>();
  for (int64_t p : {1, 2})
    for (double margin : {1.0, 0.3})
      for (bool weighted : {false, true}) {
        std::vector<double> per;
        for (int64_t i = 0; i < n; ++i) {
          double s = 0;
          for (int64_t k = 0; k < c; ++k) {
            if (k == t[i]) continue;
            const double z = std::max(0.0, margin - xv[i * c + t[i]] + xv[i * c + k]);
            s += (p == 1 ? z : z * z) * (weighted ? wv[t[i]] : 1.0);
          }
          per.push_back(s / c);
        }
        for (Reduction r : kReductions)
          expect_values(multi_margin_loss(x, y, p, margin, weighted ? w : Tensor(), r), reduced(per, r));
      }
  // A hand value: x = [0.1, 0.2, 0.4, 0.8], y = 3: (1 - 0.8 + 0.1) + (1 - 0.8 + 0.2) + (1 - 0.8 + 0.4) = 1.3, / 4.
  EXPECT_NEAR(multi_margin_loss(f64({0.1, 0.2, 0.4, 0.8}, {1, 4}), Tensor::from_vector<int64_t>({3})).item<double>(),
              0.325, 1e-15);
  // [C] with a 0-d target gives a 0-d loss under None, with [1] a [1] one.
  Tensor row = x[1];
  EXPECT_EQ(multi_margin_loss(row, reshape(Tensor::from_vector<int64_t>({3}), {}), 1, 1.0, {}, Reduction::None).dim(), 0);
  EXPECT_EQ(multi_margin_loss(row, Tensor::from_vector<int64_t>({3}), 1, 1.0, {}, Reduction::None).shape(), (Shape{1}));
  for (int64_t p : {1, 2})
    for (Reduction r : kReductions)
      expect_gradcheck("multi_margin_loss", [&](auto& in) { return multi_margin_loss(in[0], y, p, 0.8, in[1], r); },
                       {leaf({n, c}), rand({c}, kFloat64).requires_grad_()}, kTight);
  expect_error([&] { multi_margin_loss(x, y, 3); }, {"multi_margin_loss", "p == 1 and p == 2", "3"});
  expect_error([&] { multi_margin_loss(x, Tensor::from_vector<int64_t>({0, 1})); },
               {"multi_margin_loss", "target of shape [5]", "[2]"});
  expect_error([&] { multi_margin_loss(x, Tensor::from_vector<int64_t>({0, 1, 4, 1, 0})); },
               {"multi_margin_loss", "[0, 4)", "got 4"});
  expect_error([&] { multi_margin_loss(x, y.to(kFloat64)); }, {"multi_margin_loss", "int64", "float64"});
  expect_error([&] { multi_margin_loss(x, y, 1, 1.0, ones({3}, kFloat64)); },
               {"multi_margin_loss", "weight of shape [4]", "[3]"});
  expect_error([&] { multi_margin_loss(randn({2, 3, 4}, kFloat64), y); }, {"multi_margin_loss", "[N, C] or [C]", "[2, 3, 4]"});
}

TEST(LossesMargin, MultilabelMargin) {
  const int64_t n = 4, c = 5;
  Tensor x = randn({n, c}, kFloat64);
  // Row 0: classes 3 and 0; row 1: none; row 2: every class (nothing to compare with); row 3: 2
  // listed twice (counted twice, as PyTorch's), and what follows the -1 ignored.
  Tensor y = Tensor::from_vector<int64_t>({3, 0, -1, 1, 2, -1, 0, 0, 0, 0, 0, 1, 2, 3, 4, 2, 2, 4, -1, 1}, {n, c});
  const std::vector<double> xv = values(x);
  const std::vector<int64_t> t = y.to_vector<int64_t>();
  std::vector<double> per;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> listed;
    for (int64_t j = 0; j < c && t[i * c + j] != -1; ++j) listed.push_back(t[i * c + j]);
    double s = 0;
    for (int64_t tj : listed)
      for (int64_t k = 0; k < c; ++k) {
        if (std::find(listed.begin(), listed.end(), k) != listed.end()) continue;
        s += std::max(0.0, 1 - (xv[i * c + tj] - xv[i * c + k]));
      }
    per.push_back(s / c);
  }
  EXPECT_EQ(per[1], 0.0);
  EXPECT_EQ(per[2], 0.0);
  for (Reduction r : kReductions) expect_values(multilabel_margin_loss(x, y, r), reduced(per, r));
  // PyTorch's documented example: 0.85.
  EXPECT_NEAR(multilabel_margin_loss(f64({0.1, 0.2, 0.4, 0.8}, {1, 4}), Tensor::from_vector<int64_t>({3, 0, -1, 1}, {1, 4}))
                  .item<double>(),
              0.85, 1e-15);
  EXPECT_EQ(multilabel_margin_loss(x[0], y[0], Reduction::None).dim(), 0);
  for (Reduction r : kReductions)
    expect_gradcheck("multilabel_margin_loss", [&](auto& in) { return multilabel_margin_loss(in[0], y, r); },
                     {leaf({n, c})}, kTight);
  expect_error([&] { multilabel_margin_loss(x, Tensor::from_vector<int64_t>({0, 1, 2, 3, 4})); },
               {"multilabel_margin_loss", "[4, 5]", "[5]"});
  expect_error([&] { multilabel_margin_loss(x, full({n, c}, 5, kInt64)); }, {"multilabel_margin_loss", "[-1, 5)", "got 5"});
  expect_error([&] { multilabel_margin_loss(x, full({n, c}, -2, kInt64)); }, {"multilabel_margin_loss", "got -2"});
}

TEST(LossesLikelihood, PoissonNll) {
  Tensor x = randn({3, 4}, kFloat64);
  Tensor rate = rand({3, 4}, kFloat64) + 0.1;
  Tensor y = f64({0, 1, 2, 3, 0.5, 7, 1.5, 0, 4, 1, 2.5, 10}, {3, 4});
  const std::vector<double> xv = values(x), rv = values(rate), t = values(y);
  for (bool log_input : {true, false})
    for (bool full : {false, true}) {
      std::vector<double> per;
      for (size_t i = 0; i < 12; ++i) {
        double l = log_input ? std::exp(xv[i]) - t[i] * xv[i] : rv[i] - t[i] * std::log(rv[i] + 1e-8);
        if (full && t[i] > 1) l += t[i] * std::log(t[i]) - t[i] + 0.5 * std::log(2 * std::numbers::pi * t[i]);
        per.push_back(l);
      }
      for (Reduction r : kReductions)
        expect_values(poisson_nll_loss(log_input ? x : rate, y, log_input, full, 1e-8, r), reduced(per, r));
    }
  Tensor counts = (rand({3, 4}, kFloat64) * 4).requires_grad_();  // some <= 1, some > 1
  for (Reduction r : kReductions) {
    expect_gradcheck("poisson_nll_loss", [&](auto& in) { return poisson_nll_loss(in[0], in[1], true, true, 1e-8, r); },
                     {leaf({3, 4}), counts}, kTight);
    expect_gradcheck("poisson_nll_loss rate",
                     [&](auto& in) { return poisson_nll_loss(in[0], in[1], false, false, 1e-8, r); },
                     {(rand({3, 4}, kFloat64) + 0.2).requires_grad_(), counts}, kTight);
  }
  // The target's gradient where Stirling's term is masked out is finite, even at a target of 0.
  Tensor zero = f64({0, 3}).requires_grad_();
  poisson_nll_loss(f64({0.5, 0.5}), zero, true, true).backward();
  for (double g : values(zero.grad())) EXPECT_TRUE(std::isfinite(g));
  expect_error([&] { poisson_nll_loss(x, randn({4, 3}, kFloat64)); }, {"poisson_nll_loss", "[3, 4]", "[4, 3]"});
}

TEST(LossesLikelihood, GaussianNll) {
  const int64_t n = 3, d = 4;
  Tensor mu = randn({n, d}, kFloat64), y = randn({n, d}, kFloat64);
  Tensor var_full = rand({n, d}, kFloat64) + 0.05, var_row = rand({n}, kFloat64) + 0.05;
  const std::vector<double> mv = values(mu), yv = values(y), vf = values(var_full), vr = values(var_row);
  for (bool full : {false, true})
    for (int shape : {0, 1, 2}) {  // var [N, D], [N], [N, 1]
      std::vector<double> per;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < d; ++k) {
          const double v = std::max(shape == 0 ? vf[i * d + k] : vr[i], 1e-6), diff = mv[i * d + k] - yv[i * d + k];
          per.push_back(0.5 * (std::log(v) + diff * diff / v) + (full ? 0.5 * std::log(2 * std::numbers::pi) : 0.0));
        }
      Tensor var = shape == 0 ? var_full : shape == 1 ? var_row : reshape(var_row, {n, 1});
      for (Reduction r : kReductions) expect_values(gaussian_nll_loss(mu, y, var, full, 1e-6, r), reduced(per, r));
    }
  // The clamp at eps: a variance of 0 counts as eps, and its gradient passes through unchanged
  // (d/dv at v = eps), as PyTorch's in-place clamp under no_grad gives it.
  Tensor v0 = f64({0.0}).requires_grad_();
  Tensor loss = gaussian_nll_loss(f64({1.0}), f64({0.0}), v0, false, 0.5, Reduction::Sum);
  EXPECT_NEAR(loss.item<double>(), 0.5 * (std::log(0.5) + 2.0), 1e-15);
  loss.backward();
  EXPECT_NEAR(values(v0.grad())[0], 0.5 * (1 / 0.5 - 1 / 0.25), 1e-15);
  auto positive = [](Shape s) { return (rand(s, kFloat64) + 0.1).requires_grad_(); };
  for (Reduction r : kReductions) {
    expect_gradcheck("gaussian_nll_loss", [&](auto& in) { return gaussian_nll_loss(in[0], in[1], in[2], true, 1e-6, r); },
                     {leaf({n, d}), leaf({n, d}), positive({n, d})}, kTight);
    expect_gradcheck("gaussian_nll_loss var [N]",
                     [&](auto& in) { return gaussian_nll_loss(in[0], in[1], in[2], false, 1e-6, r); },
                     {leaf({n, d}), leaf({n, d}), positive({n})}, kTight);
  }
  expect_error([&] { gaussian_nll_loss(mu, y, var_full - 1.0); }, {"gaussian_nll_loss", "var has negative entries"});
  expect_error([&] { gaussian_nll_loss(mu, y, rand({d}, kFloat64)); },
               {"gaussian_nll_loss", "var of shape [4]", "input of shape [3, 4]", "[3]"});
  expect_error([&] { gaussian_nll_loss(mu, randn({2, d}, kFloat64), var_full); }, {"gaussian_nll_loss", "[2, 4]", "[3, 4]"});
}

TEST(LossesMargin, ModulesPrintAndMatchTheFunctions) {
  namespace F = nn::functional;
  Tensor a = randn({4, 3}, kFloat64), b = randn({4, 3}, kFloat64), c = randn({4, 3}, kFloat64), y = signs(4);
  Tensor idx = Tensor::from_vector<int64_t>({2, 0, 1, 1});
  Tensor ml = Tensor::from_vector<int64_t>({2, -1, 0, 1, 0, 2, 1, -1, 0, 1, 2, -1}, {4, 3});
  Tensor w = f64({0.5, 2, 1});

  nn::MarginRankingLoss rank(nn::MarginRankingLossOptions().margin(0.5).reduction(Reduction::Sum));
  EXPECT_EQ(printed(rank), "MarginRankingLoss()");
  EXPECT_DOUBLE_EQ(rank(a[0], b[0], f64({1, -1, 1})).item<double>(),
                   margin_ranking_loss(a[0], b[0], f64({1, -1, 1}), 0.5, Reduction::Sum).item<double>());
  nn::HingeEmbeddingLoss hinge(nn::HingeEmbeddingLossOptions().margin(2));
  EXPECT_EQ(printed(hinge), "HingeEmbeddingLoss()");
  EXPECT_DOUBLE_EQ(hinge(a, ones({4, 3}, kFloat64) * -1.0).item<double>(),
                   hinge_embedding_loss(a, ones({4, 3}, kFloat64) * -1.0, 2.0).item<double>());
  nn::SoftMarginLoss soft(Reduction::None);
  EXPECT_EQ(printed(soft), "SoftMarginLoss()");
  EXPECT_EQ(soft(a, b).shape(), (Shape{4, 3}));
  nn::CosineEmbeddingLoss cosine(nn::CosineEmbeddingLossOptions().margin(0.1));
  EXPECT_EQ(printed(cosine), "CosineEmbeddingLoss()");
  EXPECT_DOUBLE_EQ(cosine(a, b, y).item<double>(), cosine_embedding_loss(a, b, y, 0.1).item<double>());
  nn::TripletMarginLoss triplet(nn::TripletMarginLossOptions().swap(true).p(1));
  EXPECT_EQ(printed(triplet), "TripletMarginLoss()");
  EXPECT_DOUBLE_EQ(triplet(a, b, c).item<double>(), triplet_margin_loss(a, b, c, 1.0, 1.0, 1e-6, true).item<double>());
  nn::MultiLabelSoftMarginLoss mlsm(nn::MultiLabelSoftMarginLossOptions().weight(w));
  EXPECT_EQ(printed(mlsm), "MultiLabelSoftMarginLoss()");
  EXPECT_EQ(mlsm->buffers().size(), 1u);  // the weight moves with the module
  EXPECT_DOUBLE_EQ(mlsm(a, sigmoid(b)).item<double>(), multilabel_soft_margin_loss(a, sigmoid(b), w).item<double>());
  nn::MultiMarginLoss mm(nn::MultiMarginLossOptions().p(2).margin(0.5).weight(w));
  EXPECT_EQ(printed(mm), "MultiMarginLoss()");
  EXPECT_EQ(mm->named_buffers().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_DOUBLE_EQ(mm(a, idx).item<double>(), multi_margin_loss(a, idx, 2, 0.5, w).item<double>());
  expect_error([] { nn::MultiMarginLoss(nn::MultiMarginLossOptions().p(3)); }, {"MultiMarginLoss", "p == 1 and p == 2", "3"});
  nn::MultiLabelMarginLoss mlm;
  EXPECT_EQ(printed(mlm), "MultiLabelMarginLoss()");
  EXPECT_DOUBLE_EQ(mlm(a, ml).item<double>(), multilabel_margin_loss(a, ml).item<double>());
  nn::PoissonNLLLoss poisson(nn::PoissonNLLLossOptions().log_input(false).full(true));
  EXPECT_EQ(printed(poisson), "PoissonNLLLoss()");
  Tensor rate = exp(a), counts = abs(b) * 3.0;
  EXPECT_DOUBLE_EQ(poisson(rate, counts).item<double>(), poisson_nll_loss(rate, counts, false, true).item<double>());
  nn::GaussianNLLLoss gauss(nn::GaussianNLLLossOptions().full(true).reduction(Reduction::Sum));
  EXPECT_EQ(printed(gauss), "GaussianNLLLoss()");
  EXPECT_DOUBLE_EQ(gauss(a, b, exp(c)).item<double>(), gaussian_nll_loss(a, b, exp(c), true, 1e-6, Reduction::Sum).item<double>());
  // Cloned, with the weight buffer.
  auto copy = std::dynamic_pointer_cast<nn::MultiMarginLossImpl>(mm->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(values(copy->weight), values(w));

  // F:: with libtorch's options objects, or the free functions' arguments.
  EXPECT_DOUBLE_EQ(F::margin_ranking_loss(a, b, c, F::MarginRankingLossFuncOptions().margin(0.2)).item<double>(),
                   margin_ranking_loss(a, b, c, 0.2).item<double>());
  EXPECT_DOUBLE_EQ(F::hinge_embedding_loss(a, y.unsqueeze(1), F::HingeEmbeddingLossFuncOptions().margin(0.5)).item<double>(),
                   hinge_embedding_loss(a, y.unsqueeze(1), 0.5).item<double>());
  EXPECT_DOUBLE_EQ(F::soft_margin_loss(a, b, Reduction::Sum).item<double>(),
                   soft_margin_loss(a, b, Reduction::Sum).item<double>());
  EXPECT_DOUBLE_EQ(F::soft_margin_loss(a, b, F::SoftMarginLossFuncOptions(Reduction::Sum)).item<double>(),
                   soft_margin_loss(a, b, Reduction::Sum).item<double>());
  EXPECT_DOUBLE_EQ(F::cosine_embedding_loss(a, b, y, F::CosineEmbeddingLossFuncOptions().margin(0.3)).item<double>(),
                   cosine_embedding_loss(a, b, y, 0.3).item<double>());
  EXPECT_DOUBLE_EQ(F::triplet_margin_loss(a, b, c, F::TripletMarginLossFuncOptions().margin(2).swap(true)).item<double>(),
                   triplet_margin_loss(a, b, c, 2.0, 2.0, 1e-6, true).item<double>());
  EXPECT_DOUBLE_EQ(F::multilabel_soft_margin_loss(a, sigmoid(b), w, Reduction::Sum).item<double>(),
                   multilabel_soft_margin_loss(a, sigmoid(b), w, Reduction::Sum).item<double>());
  EXPECT_DOUBLE_EQ(F::multi_margin_loss(a, idx, F::MultiMarginLossFuncOptions().p(2)).item<double>(),
                   multi_margin_loss(a, idx, 2).item<double>());
  EXPECT_DOUBLE_EQ(F::multi_margin_loss(a, idx).item<double>(), multi_margin_loss(a, idx).item<double>());
  EXPECT_DOUBLE_EQ(F::multilabel_margin_loss(a, ml, Reduction::Sum).item<double>(),
                   multilabel_margin_loss(a, ml, Reduction::Sum).item<double>());
  EXPECT_DOUBLE_EQ(F::poisson_nll_loss(a, counts, F::PoissonNLLLossFuncOptions().full(true)).item<double>(),
                   poisson_nll_loss(a, counts, true, true).item<double>());
  EXPECT_DOUBLE_EQ(F::gaussian_nll_loss(a, b, exp(c)).item<double>(), gaussian_nll_loss(a, b, exp(c)).item<double>());
  // A function object passes as a criterion(output, target).
  std::function<Tensor(const Tensor&, const Tensor&)> criterion = F::soft_margin_loss;
  EXPECT_DOUBLE_EQ(criterion(a, b).item<double>(), soft_margin_loss(a, b).item<double>());
}

}  // namespace minidl::losses_margin_test
