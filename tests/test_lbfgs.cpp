// L-BFGS: its first two iterations against the algorithm written out in doubles, convergence on a
// quadratic and on Rosenbrock's function (with and without the strong Wolfe line search), a model
// fitted by least squares, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_util.h"

namespace minidl::lbfgs_test {

using minidl::testing::expect_error;
using minidl::testing::values;

namespace {

// f(x) = 0.5 x'Ax - b'x with A = M'M + I (symmetric positive definite); grad = Ax - b.
struct Quadratic {
  Tensor a, b;
  explicit Quadratic(int64_t n) {
    const Tensor m = randn({n, n}, kFloat64);
    a = matmul(m.t(), m) + eye(n, kFloat64);
    b = randn({n}, kFloat64);
  }
  Tensor loss(const Tensor& x) const { return 0.5 * dot(x, mv(a, x)) - dot(b, x); }
  std::vector<double> grad(const std::vector<double>& x) const {
    const Tensor g = mv(a, Tensor::from_vector<double>(x)) - b;
    return values(g);
  }
};

double dot_d(const std::vector<double>& u, const std::vector<double>& v) {
  double s = 0;
  for (size_t i = 0; i < u.size(); ++i) s += u[i] * v[i];
  return s;
}

// A x = b by Gaussian elimination with partial pivoting, in doubles.
std::vector<double> solve(const Tensor& a_t, const Tensor& b_t) {
  const size_t n = static_cast<size_t>(b_t.numel());
  std::vector<double> a = values(a_t), b = values(b_t);
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r * n + c]) > std::fabs(a[pivot * n + c])) pivot = r;
    for (size_t k = 0; k < n; ++k) std::swap(a[c * n + k], a[pivot * n + k]);
    std::swap(b[c], b[pivot]);
    for (size_t r = c + 1; r < n; ++r) {
      const double m = a[r * n + c] / a[c * n + c];
      for (size_t k = c; k < n; ++k) a[r * n + k] -= m * a[c * n + k];
      b[r] -= m * b[c];
    }
  }
  std::vector<double> x(n);
  for (size_t r = n; r-- > 0;) {
    double v = b[r];
    for (size_t k = r + 1; k < n; ++k) v -= a[r * n + k] * x[k];
    x[r] = v / a[r * n + r];
  }
  return x;
}

optim::LossClosure closure_of(optim::Optimizer& opt, const std::function<Tensor()>& loss) {
  return [&opt, loss] {
    opt.zero_grad();
    Tensor l = loss();
    l.backward();
    return l;
  };
}

}  // namespace

// Without a line search: x1 = x0 - min(1, 1 / sum|g0|) lr g0; then one curvature pair (s, y), and the
// direction from the two-loop recursion: q = -g1; alpha = rho s'q; q -= alpha y; r = q (s'y / y'y);
// beta = rho y'r; r += (alpha - beta) s; x2 = x1 + lr r.
TEST(LBFGS, FirstTwoIterationsFollowTheAlgorithm) {
  manual_seed(11);
  const Quadratic f(4);
  const std::vector<double> x0 = values(randn({4}, kFloat64));
  const double lr = 0.5;
  Tensor x = Tensor::from_vector<double>(x0).requires_grad_();
  // max_eval's default, max_iter * 5 / 4 = 2, would stop after one iteration (as PyTorch's does).
  optim::LBFGS opt({x}, optim::LBFGSOptions(lr).max_iter(2).max_eval(10));
  opt.step(closure_of(opt, [&] { return f.loss(x); }));

  const std::vector<double> g0 = f.grad(x0);
  double l1 = 0;
  for (double v : g0) l1 += std::fabs(v);
  const double t = std::min(1.0, 1 / l1) * lr;
  std::vector<double> x1(4), s(4), y(4);
  for (size_t i = 0; i < 4; ++i) x1[i] = x0[i] - t * g0[i];
  const std::vector<double> g1 = f.grad(x1);
  for (size_t i = 0; i < 4; ++i) s[i] = x1[i] - x0[i], y[i] = g1[i] - g0[i];
  const double rho = 1 / dot_d(y, s);
  std::vector<double> q(4), r(4), x2(4);
  for (size_t i = 0; i < 4; ++i) q[i] = -g1[i];
  const double alpha = rho * dot_d(s, q);
  for (size_t i = 0; i < 4; ++i) q[i] -= alpha * y[i];
  const double h = dot_d(s, y) / dot_d(y, y);
  for (size_t i = 0; i < 4; ++i) r[i] = q[i] * h;
  const double beta = rho * dot_d(y, r);
  for (size_t i = 0; i < 4; ++i) x2[i] = x1[i] + lr * (r[i] + (alpha - beta) * s[i]);

  const std::vector<double> got = values(x);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], x2[i], 1e-12) << i;
  EXPECT_EQ(opt.n_iter(), 2);
  EXPECT_EQ(opt.func_evals(), 2);  // the first call, and one after the first iteration (not after the last)
}

TEST(LBFGS, SolvesAQuadraticWithAndWithoutTheLineSearch) {
  manual_seed(12);
  const Quadratic f(10);
  // The minimum: A x = b.
  const Tensor solution = Tensor::from_vector<double>(solve(f.a, f.b));
  for (bool wolfe : {true, false}) {
    SCOPED_TRACE(wolfe ? "strong_wolfe" : "fixed step");
    Tensor x = zeros({10}, kFloat64).requires_grad_();
    auto options = optim::LBFGSOptions(1).max_iter(100).history_size(10).tolerance_grad(1e-12).tolerance_change(1e-20);
    if (wolfe) options.line_search_fn("strong_wolfe");
    optim::LBFGS opt({x}, options);
    for (int i = 0; i < 5; ++i) opt.step(closure_of(opt, [&] { return f.loss(x); }));
    EXPECT_LT(amax(abs(x.detach() - solution)).item<double>(), 1e-8);
  }
}

TEST(LBFGS, MinimizesRosenbrockWithTheStrongWolfeSearch) {
  Tensor p = Tensor::from_vector<double>({-1.5, 2.0}).requires_grad_();
  optim::LBFGS opt({p}, optim::LBFGSOptions(1).max_iter(200).line_search_fn("strong_wolfe"));
  auto rosenbrock = [&] {
    const Tensor a = p.index({0}), b = p.index({1});
    return pow(1.0 - a, 2.0) + 100.0 * pow(b - a * a, 2.0);
  };
  const Tensor first = opt.step(closure_of(opt, rosenbrock));
  EXPECT_NEAR(first.item<double>(), 2.5 * 2.5 + 100 * 0.25 * 0.25, 1e-12);  // the loss at the start
  EXPECT_NEAR(values(p)[0], 1.0, 1e-5);
  EXPECT_NEAR(values(p)[1], 1.0, 1e-5);
  EXPECT_LE(opt.func_evals(), 200 * 5 / 4 + 25);  // max_eval, plus at most one line search past it
}

TEST(LBFGS, FitsALinearModelByLeastSquares) {
  manual_seed(13);
  const Tensor x = randn({64, 3}, kFloat64), w_true = Tensor::from_vector<double>({1.5, -2.0, 0.5}, {3, 1});
  const Tensor y = matmul(x, w_true) + 0.7;
  nn::Linear model(nn::LinearOptions(3, 1));
  model->to(kFloat64);
  optim::LBFGS opt(model->parameters(), optim::LBFGSOptions(1).line_search_fn("strong_wolfe"));
  for (int i = 0; i < 3; ++i) opt.step(closure_of(opt, [&] { return mse_loss(model(x), y); }));
  EXPECT_NEAR(values(model->weight)[0], 1.5, 1e-6);
  EXPECT_NEAR(values(model->weight)[1], -2.0, 1e-6);
  EXPECT_NEAR(values(model->bias)[0], 0.7, 1e-6);
}

TEST(LBFGS, BadInputSaysWhatWasExpected) {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({2}, kFloat64).requires_grad_();
  expect_error([&] { optim::LBFGS({a, b}); }, {"LBFGS", "one dtype and device", "float32", "float64"});
  expect_error([&] { optim::LBFGS({a}, optim::LBFGSOptions().line_search_fn("backtracking")); },
               {"LBFGS", "strong_wolfe", "backtracking"});
  optim::LBFGS opt({a});
  expect_error([&] { opt.step(); }, {"LBFGS", "needs a closure"});
  expect_error([&] { opt.step([&] { return a * 2.0; }); }, {"LBFGS", "the loss (one element)", "[2]"});
  EXPECT_FALSE(opt.capturable());
}

}  // namespace minidl::lbfgs_test
