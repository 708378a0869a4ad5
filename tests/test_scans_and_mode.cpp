// logcumsumexp, cummax / cummin and mode as PyTorch gives them: hand-worked values (ties, NaN, -inf),
// gradients checked in float64, and CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "higher_order_util.h"
#include "test_util.h"

namespace minidl::scans_and_mode_test {

namespace {

using testing::expect_error;
using D = std::vector<double>;
using L = std::vector<int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f64(const D& v, Shape shape = {}) { return Tensor::from_vector<double>(v, shape); }
D values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }
L longs(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }

TEST(ScansAndMode, LogcumsumexpIsStable) {
  const D got = values(logcumsumexp(f64({0, std::log(3.0), std::log(4.0)}), 0));
  EXPECT_NEAR(got[0], 0, 1e-15);
  EXPECT_NEAR(got[1], std::log(4.0), 1e-15);
  EXPECT_NEAR(got[2], std::log(8.0), 1e-15);
  // exp(1000) overflows; the scan does not. -inf adds nothing, and a row of -inf stays -inf.
  const D big = values(f64({1000, 1000, -kInf}).logcumsumexp(0));
  EXPECT_EQ(big[0], 1000);
  EXPECT_NEAR(big[1], 1000 + M_LN2, 1e-12);
  EXPECT_NEAR(big[2], 1000 + M_LN2, 1e-12);
  EXPECT_EQ(values(logcumsumexp(f64({-kInf, -kInf, 0}), 0)), (D{-kInf, -kInf, 0}));
  EXPECT_EQ(values(logcumsumexp(f64({kInf, kInf}), 0)), (D{kInf, kInf}));
  // Along dim 0 of a matrix; integers compute in float32.
  const Tensor m = f64({0, 1, 2, 3}, {2, 2});
  EXPECT_TRUE(allclose(logcumsumexp(m, 0), log(cumsum(exp(m), 0))));
  EXPECT_EQ(logcumsumexp(tensor({1, 2}, kInt64), 0).dtype(), kFloat32);
  expect_error([&] { logcumsumexp(m, 2); }, {"logcumsumexp", "dimension out of range"});
  manual_seed(1);
  GradcheckResult r = gradcheck([](auto& in) { return logcumsumexp(in[0], 1); }, {randn({3, 5}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return logcumsumexp(in[0], 0); }, {(randn({4, 2}, kFloat64) * 20).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  // Second derivatives, over several rows and gradients of both signs.
  r = minidl::testing::gradgradcheck([](auto& in) { return logcumsumexp(in[0], 1); },
                                     {randn({3, 5}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << "second derivative: " << r.message;
  r = minidl::testing::gradgradcheck([](auto& in) { return logcumsumexp(in[0] * 4, 0) * in[0]; },
                                     {randn({6, 2}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << "second derivative of a product: " << r.message;
}

// -inf is log(0) in a log-space dynamic program: an element of -inf adds nothing, so its gradient is
// 0, as is every gradient through a prefix of -infs (no NaN from -inf - -inf).
TEST(ScansAndMode, LogcumsumexpGradientAtMinusInfinityIsZero) {
  const Tensor x = f64({-kInf, 0.5, -kInf, 0.2}).requires_grad_();
  const Tensor g = f64({0.3, 0.6, -0.2, 0.9});
  const Tensor grad = autograd::grad({logcumsumexp(x, 0)}, {x}, {g})[0];
  // By hand: grad[j] = sum over i >= j of g[i] exp(x[j] - out[i]), out = [-inf, 0.5, 0.5, log(e^0.5 + e^0.2)].
  const double out3 = std::log(std::exp(0.5) + std::exp(0.2));
  const D want = {0, 0.6 + -0.2 + 0.9 * std::exp(0.5 - out3), 0, 0.9 * std::exp(0.2 - out3)};
  const D got = values(grad);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
  const Tensor all = f64({-kInf, -kInf, 0.5}).requires_grad_();
  EXPECT_EQ(values(autograd::grad({logcumsumexp(all, 0)}, {all}, {ones_like(all)})[0]), (D{0, 0, 1}));
}

TEST(ScansAndMode, CumsumIsDifferentiableTwice) {
  manual_seed(3);
  GradcheckResult r = minidl::testing::gradgradcheck([](auto& in) { return cumsum(in[0] * in[0], 1) * in[0]; },
                                    {randn({3, 5}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(ScansAndMode, CummaxAndCumminKeepTheLastIndexReached) {
  // A later equal element takes the index; from a NaN on the values are NaN and each new NaN takes
  // the index (torch.cummax).
  auto [best, at] = cummax(f64({1, 3, 2, 3, NAN, 5, NAN}), 0);
  const D v = values(best);
  EXPECT_EQ((D{v[0], v[1], v[2], v[3]}), (D{1, 3, 3, 3}));
  EXPECT_TRUE(std::isnan(v[4]) && std::isnan(v[5]) && std::isnan(v[6]));
  EXPECT_EQ(longs(at), (L{0, 1, 1, 3, 4, 4, 6}));
  auto [low, low_at] = f64({3, 1, 2, 1}).cummin(0);
  EXPECT_EQ(values(low), (D{3, 1, 1, 1}));
  EXPECT_EQ(longs(low_at), (L{0, 1, 1, 3}));
  // Along dim 0 of a matrix, integers and bool too.
  auto [col_best, col_at] = cummax(tensor({{1, 5}, {4, 2}, {4, 7}}, kInt64), 0);
  EXPECT_EQ(longs(col_best), (L{1, 5, 4, 5, 4, 7}));
  EXPECT_EQ(longs(col_at), (L{0, 0, 1, 0, 2, 2}));
  auto [flags, flags_at] = cummax(tensor({0, 1, 0}, kInt64).to(kBool), 0);
  EXPECT_EQ(flags.dtype(), kBool);
  EXPECT_EQ(longs(flags_at), (L{0, 1, 1}));
  auto [scalar, scalar_at] = cummin(full({}, 2.0), 0);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar_at.item<int64_t>(), 0);
  // The gradient goes to the elements the values came from.
  Tensor x = f64({2, 1, 3, 3}).requires_grad_();
  std::get<0>(cummax(x, 0)).sum().backward();
  EXPECT_EQ(values(x.grad()), (D{2, 0, 1, 1}));
  manual_seed(2);
  GradcheckResult r = gradcheck([](auto& in) { return std::get<0>(cummin(in[0], 1)); },
                                {randn({3, 6}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(ScansAndMode, ModeTakesTheSmallestMostFrequentAndItsLastPosition) {
  const Tensor x = tensor({{2, 1, 2, 1, 3}, {5, 5, 4, 4, 4}}, kInt64);
  auto [value, at] = mode(x, 1);
  EXPECT_EQ(longs(value), (L{1, 4}));
  EXPECT_EQ(longs(at), (L{3, 4}));
  auto [kept, kept_at] = x.mode(0, /*keepdim=*/true);
  EXPECT_EQ(kept.sizes(), (Shape{1, 5}));
  EXPECT_EQ(longs(kept), (L{2, 1, 2, 1, 3}));  // each column has two different values: the smaller
  EXPECT_EQ(longs(kept_at), (L{0, 0, 0, 0, 0}));
  // Each NaN counts apart: one repeated value beats any number of NaN.
  auto [with_nan, with_nan_at] = mode(f64({NAN, 7, NAN, 7, NAN}), 0);
  EXPECT_EQ(with_nan.item<double>(), 7);
  EXPECT_EQ(with_nan_at.item<int64_t>(), 3);
  auto [single, single_at] = mode(full({}, 4.0));
  EXPECT_EQ(single.item<float>(), 4);
  EXPECT_EQ(single_at.item<int64_t>(), 0);
  expect_error([] { mode(zeros({2, 0}), 1); }, {"mode", "non-empty", "size 0"});
  // The gradient reaches the element picked.
  Tensor y = f64({1, 2, 2, 3}).requires_grad_();
  std::get<0>(mode(y, 0)).backward();
  EXPECT_EQ(values(y.grad()), (D{0, 0, 1, 0}));
}

TEST(CudaScansAndMode, MatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(3);
  for (int64_t cols : {1, 7, 300}) {  // rows of one element, short rows, rows over a block's tile
    const Tensor x = randn({5, cols}, kFloat64), xc = x.cuda();
    for (int64_t dim : {0, 1}) {
      EXPECT_TRUE(allclose(logcumsumexp(xc, dim).cpu(), logcumsumexp(x, dim), 1e-12, 1e-12));
      auto [v, i] = cummax(xc, dim);
      auto [v_cpu, i_cpu] = cummax(x, dim);
      EXPECT_TRUE(equal(v.cpu(), v_cpu));
      EXPECT_TRUE(equal(i.cpu(), i_cpu));
      auto [w, j] = cummin(xc.to(kBFloat16), dim);
      auto [w_cpu, j_cpu] = cummin(x.to(kBFloat16), dim);
      EXPECT_TRUE(equal(w.cpu(), w_cpu));
      EXPECT_TRUE(equal(j.cpu(), j_cpu));
    }
  }
  const Tensor votes = randint(0, 4, {6, 9}), votes_c = votes.cuda();
  auto [m, at] = mode(votes_c, 1);
  auto [m_cpu, at_cpu] = mode(votes, 1);
  EXPECT_TRUE(equal(m.cpu(), m_cpu));
  EXPECT_TRUE(equal(at.cpu(), at_cpu));
  auto [n, n_at] = cummax(tensor({1.0, NAN, 2.0, NAN}).cuda(), 0);
  EXPECT_EQ(longs(n_at.cpu()), (L{0, 1, 1, 3}));
  // logcumsumexp's gradient, -infs included (0 there), and its second derivative, as on the CPU.
  const Tensor x = randn({4, 6}, kFloat64).masked_fill(randn({4, 6}) > 0.8, -kInf), g = randn({4, 6}, kFloat64);
  auto grads = [&](const Tensor& in, const Tensor& seed) {
    const Tensor leaf = in.detach().requires_grad_();
    const Tensor first = autograd::grad({logcumsumexp(leaf, 1)}, {leaf}, {seed}, true, true)[0];
    const Tensor second = autograd::grad({first}, {leaf}, {seed}, true, false, true)[0];
    return std::vector<Tensor>{first.detach(), second};
  };
  const std::vector<Tensor> on_gpu = grads(x.cuda(), g.cuda()), on_cpu = grads(x, g);
  EXPECT_TRUE(allclose(on_gpu[0].cpu(), on_cpu[0], 1e-12, 1e-12)) << "first derivative";
  EXPECT_TRUE(allclose(on_gpu[1].cpu(), on_cpu[1], 1e-12, 1e-12)) << "second derivative";
  EXPECT_FALSE(isnan(on_cpu[0]).any().item<bool>());
}

}  // namespace

}  // namespace minidl::scans_and_mode_test
