// The inverse hyperbolic and special functions (erfc, erfinv, lgamma, digamma, polygamma, mvlgamma,
// the Bessel functions, ndtri, the special namespace), hypot, copysign, signbit, gcd / lcm,
// nextafter, ldexp and frexp: values against known constants (and libtorch's), PyTorch's conventions
// at the poles and signed zeros, gradients checked in float64, and CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::special_math_test {

namespace {

using testing::expect_error;
using D = std::vector<double>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEulerGamma = 0.57721566490153286;

D values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

void expect_near_all(const Tensor& got, const D& want, double rel) {
  const D g = values(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isinf(want[i]) || std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i]) << "element " << i << ": " << g[i];
    } else {
      EXPECT_NEAR(g[i], want[i], rel * std::max(1.0, std::fabs(want[i]))) << "element " << i;
    }
  }
}

Tensor f64(const D& v) { return Tensor::from_vector<double>(v); }

TEST(SpecialMath, InverseHyperbolic) {
  expect_near_all(asinh(f64({0, 1, -2})), {0, 0.88137358701954303, -1.4436354751788103}, 1e-15);
  expect_near_all(acosh(f64({1, 2, 0.5})), {0, 1.3169578969248168, NAN}, 1e-15);
  expect_near_all(atanh(f64({0.5, 1, -1, 2})), {0.54930614433405489, kInf, -kInf, NAN}, 1e-15);
  EXPECT_EQ(tensor({1, 2}, kInt64).asinh().dtype(), kFloat32);  // integers compute in float32
  EXPECT_EQ(values(arcsinh(f64({1}))), values(asinh(f64({1}))));
  manual_seed(1);
  const Tensor x = randn({5}, kFloat64);
  GradcheckResult r = gradcheck([](auto& in) { return asinh(in[0]); }, {x.clone().requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return acosh(in[0]); }, {(x.abs() + 1.2).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return atanh(in[0]); }, {(tanh(x) * 0.8).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(SpecialMath, ErfcAndErfinv) {
  // erfc keeps its precision where 1 - erf(x) would round to 0.
  expect_near_all(erfc(f64({0, 1, 10, -1})), {1, 0.15729920705028513, 2.0884875837625446e-45, 1.8427007929497148}, 1e-14);
  expect_near_all(erfinv(f64({0, 0.5, -0.9, 1, -1, 1.5})),
                  {0, 0.47693627620446987, -1.1630871536766741, kInf, -kInf, NAN}, 1e-14);
  // Small arguments keep their relative precision: erfinv(y) ~ sqrt(pi) / 2 * y.
  const D tiny = values(erfinv(f64({1e-10, -1e-300})));
  EXPECT_NEAR(tiny[0], 8.8622692545275801e-11, 1e-25);
  EXPECT_NEAR(tiny[1], -8.8622692545275801e-301, 1e-315);
  EXPECT_TRUE(std::signbit(values(erfinv(f64({-0.0})))[0]));
  // erfinv inverts erf on random points within |x| < 2, where erf's own rounding moves the
  // inverse by less than the tolerance.
  manual_seed(2);
  const Tensor x = tanh(randn({200}, kFloat64)) * 2;
  EXPECT_TRUE(allclose(erfinv(erf(x)), x, 1e-12, 1e-13));
  EXPECT_TRUE(allclose(erfinv(erf(x.to(kFloat32))), x.to(kFloat32), 1e-5, 1e-5));
  GradcheckResult r = gradcheck([](auto& in) { return erfc(in[0]); }, {randn({6}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return erfinv(in[0]); }, {(tanh(randn({6}, kFloat64)) * 0.9).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(SpecialMath, GammaFamily) {
  const double half_log_pi = 0.5 * std::log(M_PI);
  expect_near_all(lgamma(f64({0.5, 10, -0.5, 1, 0, -2})), {half_log_pi, std::log(362880.0), std::log(2 * std::sqrt(M_PI)), 0,
                                                           kInf, kInf}, 1e-14);
  // digamma: -inf at +0 and +inf at -0 as PyTorch's, NaN at the negative integers.
  expect_near_all(digamma(f64({1, 0.5, 0.0, -0.0, -2, -2.5})),
                  {-kEulerGamma, -kEulerGamma - 2 * M_LN2, -kInf, kInf, NAN, 1.1031566406452432}, 1e-14);
  // polygamma(n, 1) = (-1)^(n+1) n! zeta(n + 1): pi^2 / 6, -2 zeta(3), pi^4 / 15.
  expect_near_all(polygamma(1, f64({1})), {M_PI * M_PI / 6}, 1e-14);
  expect_near_all(f64({1}).polygamma(2), {-2.4041138063191886}, 1e-14);
  expect_near_all(polygamma(3, f64({1})), {std::pow(M_PI, 4) / 15}, 1e-14);
  EXPECT_EQ(values(polygamma(0, f64({0.5}))), values(digamma(f64({0.5}))));
  expect_error([] { polygamma(-1, f64({1})); }, {"polygamma", "-1"});
  // mvlgamma(x, p) = sum over i < p of lgamma(x - i / 2) + p (p - 1) / 4 log(pi).
  expect_near_all(mvlgamma(f64({2.5}), 2), {std::lgamma(2.5) + std::lgamma(2.0) + 0.5 * std::log(M_PI)}, 1e-14);
  expect_near_all(f64({3.0}).mvlgamma(1), {std::log(2.0)}, 1e-14);
  expect_error([] { mvlgamma(f64({2.0, 0.9}), 3); }, {"mvlgamma", "(p - 1) / 2", "0.9"});
  manual_seed(3);
  const Tensor positive = rand({5}, kFloat64) * 4 + 0.3;
  GradcheckResult r = gradcheck([](auto& in) { return lgamma(in[0]); }, {positive.clone().requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return digamma(in[0]); }, {positive.clone().requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return polygamma(2, in[0]); }, {positive.clone().requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return mvlgamma(in[0], 3); }, {(positive + 1).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(SpecialMath, HypotCopysignSignbit) {
  expect_near_all(hypot(f64({3, 1e200, 0, 1e-200}), f64({4, 1e200, 0, 1e-200})),
                  {5, 1.4142135623730951e200, 0, 1.4142135623730951e-200}, 1e-15);
  EXPECT_EQ(tensor({3}, kInt64).hypot(tensor({4}, kInt64)).dtype(), kFloat32);
  const double neg_nan = -std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(values(copysign(f64({2, -3, 4, 5}), f64({-0.0, 1, neg_nan, 0.0}))), (D{-2, 3, -4, 5}));
  EXPECT_EQ(values(f64({-2, 2}).copysign(-1)), (D{-2, -2}));
  const Tensor bits = signbit(f64({-0.0, 0.0, -1, 2, neg_nan, -kInf}));
  EXPECT_EQ(bits.dtype(), kBool);
  EXPECT_EQ(values(bits), (D{1, 0, 1, 0, 1, 1}));
  EXPECT_EQ(values(tensor({-1, 0, 3}, kInt64).signbit()), (D{1, 0, 0}));
  // The gradient of copysign reaches a only, as the sign it was given (0 where a is 0).
  Tensor a = f64({2, -3, 0}).requires_grad_(), b = f64({-1, -1, -1}).requires_grad_();
  copysign(a, b).sum().backward();
  EXPECT_EQ(values(a.grad()), (D{-1, 1, 0}));
  EXPECT_EQ(values(b.grad()), (D{0, 0, 0}));
  manual_seed(4);
  GradcheckResult r = gradcheck([](auto& in) { return hypot(in[0], in[1]); },
                                {randn({2, 3}, kFloat64).requires_grad_(), randn({3}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return copysign(in[0], in[1]); },
                {randn({4}, kFloat64).requires_grad_(), randn({4}, kFloat64)});
  EXPECT_TRUE(r) << r.message;
}

TEST(SpecialMath, BesselNdtriAndTheSpecialNamespace) {
  const Tensor x = f64({0, 1, -2, 100, -1});
  expect_near_all(i0(x), {1, 1.2660658777520082, 2.2795853023360668, 1.0737517071310738e+42, 1.2660658777520082}, 1e-14);
  expect_near_all(special::i0e(x), {1, 0.46575960759364043, 0.308508322553671, 0.03994437929909668, 0.46575960759364043},
                  1e-14);
  expect_near_all(special::i1(x), {0, 0.56515910399248515, -1.5906368546373295, 1.0683693903381625e+42,
                                   -0.56515910399248515}, 1e-14);
  expect_near_all(special::i1e(x), {0, 0.2079104153497085, -0.21526928924893771, 0.039744153025130249,
                                    -0.2079104153497085}, 1e-14);
  expect_near_all(ndtri(f64({0.5, 0.975, 0, 1, 1e-20})), {0, 1.959963984540054, -kInf, kInf, -9.2623400897984087}, 1e-14);
  // torch::special's names: the lower tail of ndtr keeps its precision (7.6e-24 at -10).
  expect_near_all(special::ndtr(f64({0, 3})), {0.5, 0.9986501019683699}, 1e-15);
  EXPECT_NEAR(values(special::ndtr(f64({-10})))[0], 7.6198530241605269e-24, 1e-36);
  expect_near_all(special::entr(f64({0, 1, 0.5, -1})), {0, 0, 0.34657359027997264, -kInf}, 1e-15);
  expect_near_all(special::xlog1py(f64({0, 2, 0}), f64({-1, M_E - 1, NAN})), {0, 2, NAN}, 1e-15);
  EXPECT_EQ(values(special::gammaln(f64({4}))), values(lgamma(f64({4}))));
  EXPECT_EQ(values(special::expit(f64({0.5}))), values(sigmoid(f64({0.5}))));
  EXPECT_EQ(values(special::multigammaln(f64({3}), 2)), values(mvlgamma(f64({3}), 2)));
  manual_seed(6);
  const Tensor r = randn({6}, kFloat64);
  for (auto fn : {+[](const Tensor& t) { return i0(t); }, +[](const Tensor& t) { return special::i0e(t); },
                  +[](const Tensor& t) { return special::i1(t); }, +[](const Tensor& t) { return special::i1e(t); }}) {
    GradcheckResult g = gradcheck([fn](auto& in) { return fn(in[0]); }, {r.clone().requires_grad_()});
    EXPECT_TRUE(g) << g.message;
  }
  GradcheckResult g = gradcheck([](auto& in) { return ndtri(in[0]); }, {(sigmoid(r) * 0.9 + 0.05).requires_grad_()});
  EXPECT_TRUE(g) << g.message;
  g = gradcheck([](auto& in) { return special::xlog1py(in[0], in[1]); }, {r.clone().requires_grad_(),
                                                                        (r.abs() + 0.1).requires_grad_()});
  EXPECT_TRUE(g) << g.message;
  g = gradcheck([](auto& in) { return special::entr(in[0]); }, {(r.abs() + 0.1).requires_grad_()});
  EXPECT_TRUE(g) << g.message;
}

TEST(SpecialMath, IntegersAndFloatingPointBits) {
  EXPECT_EQ(values(gcd(tensor({12, -18, 0, 7}, kInt64), tensor({18, 12, 0, 0}, kInt64))), (D{6, 6, 0, 7}));
  EXPECT_EQ(values(tensor({4, -6, 0}, kInt64).lcm(tensor({6, 4, 5}, kInt64))), (D{12, 12, 0}));
  EXPECT_EQ(gcd(tensor({4}, kInt32), tensor({6}, kInt32)).dtype(), kInt32);
  expect_error([] { gcd(f64({4}), f64({6})); }, {"gcd", "integral", "float64"});
  // One ulp up or down, and the smallest subnormal after 0.
  EXPECT_EQ(values(nextafter(f64({1, 1, 0}), f64({2, 0, 1}))),
            (D{1 + std::ldexp(1.0, -52), 1 - std::ldexp(1.0, -53), std::numeric_limits<double>::denorm_min()}));
  EXPECT_EQ(tensor({1.0}).nextafter(tensor({0.0})).item<float>(), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_EQ(values(ldexp(f64({1, 3, 1}), tensor({2, -1, 1000}, kInt64))), (D{4, 1.5, std::ldexp(1.0, 1000)}));
  // frexp: C's, exactly, around powers of two and at both ends of float64's range.
  const double below_one = 1 - std::ldexp(1.0, -53), tiny = std::numeric_limits<double>::denorm_min();
  auto [m, e] = frexp(f64({8, 0.3, -5, 0, kInf, below_one, tiny, 1.5 * std::ldexp(1.0, 1023)}));
  EXPECT_EQ(values(m), (D{0.5, 0.3 * 2, -0.625, 0, kInf, below_one, 0.5, 0.75}));
  EXPECT_EQ(e.dtype(), kInt32);
  EXPECT_EQ(values(e), (D{4, -1, 3, 0, 0, 0, -1073, 1024}));
  auto [m32, e32] = tensor({3.0, -0.046875}).frexp();
  EXPECT_EQ(m32.dtype(), kFloat32);
  EXPECT_EQ(values(m32), (D{0.75, -0.75}));
  EXPECT_EQ(values(e32), (D{2, -4}));
  expect_error([] { frexp(tensor({1, 2}, kInt64)); }, {"frexp", "floating", "int64"});
  EXPECT_EQ(values(tensor({1, 2}, kInt64).repeat_interleave(2)), (D{1, 1, 2, 2}));
}

TEST(CudaSpecialMath, MatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(5);
  for (DType dtype : {kFloat32, kFloat64}) {
    const double rtol = dtype == kFloat32 ? 2e-5 : 1e-12;
    const Tensor x = (randn({64}, kFloat64) * 3).to(dtype), y = randn({64}, dtype);
    const Tensor positive = x.abs() + 0.1, unit = tanh(x);
    const Tensor xc = x.cuda(), yc = y.cuda(), pc = positive.cuda(), uc = unit.cuda();
    EXPECT_TRUE(allclose(asinh(xc).cpu(), asinh(x), rtol, rtol));
    EXPECT_TRUE(allclose(acosh(pc + 1).cpu(), acosh(positive + 1), rtol, rtol));
    EXPECT_TRUE(allclose(atanh(uc).cpu(), atanh(unit), rtol, rtol));
    EXPECT_TRUE(allclose(erfc(xc).cpu(), erfc(x), rtol, 1e-30));
    EXPECT_TRUE(allclose(erfinv(uc).cpu(), erfinv(unit), rtol, rtol));
    EXPECT_TRUE(allclose(lgamma(xc).cpu(), lgamma(x), rtol, rtol));
    EXPECT_TRUE(allclose(digamma(xc).cpu(), digamma(x), 100 * rtol, 100 * rtol));  // near the poles
    EXPECT_TRUE(allclose(polygamma(2, pc).cpu(), polygamma(2, positive), rtol, rtol));
    EXPECT_TRUE(allclose(hypot(xc, yc).cpu(), hypot(x, y), rtol, 0));
    EXPECT_TRUE(equal(copysign(xc, yc).cpu(), copysign(x, y)));
    EXPECT_TRUE(equal(signbit(yc).cpu(), signbit(y)));
    EXPECT_TRUE(allclose(i0(xc).cpu(), i0(x), rtol, 0));
    EXPECT_TRUE(allclose(special::i1e(xc).cpu(), special::i1e(x), rtol, 1e-30));
    EXPECT_TRUE(allclose(ndtri(uc.abs()).cpu(), ndtri(unit.abs()), rtol, rtol));
    EXPECT_TRUE(equal(nextafter(xc, yc).cpu(), nextafter(x, y)));
    auto [m, e] = frexp(xc);
    auto [m_cpu, e_cpu] = frexp(x);
    EXPECT_TRUE(equal(m.cpu(), m_cpu));
    EXPECT_TRUE(equal(e.cpu(), e_cpu));
  }
  const Tensor a = randint(-50, 50, {100}), b = randint(-50, 50, {100});
  EXPECT_TRUE(equal(gcd(a.cuda(), b.cuda()).cpu(), gcd(a, b)));
  EXPECT_TRUE(equal(digamma(tensor({0.0, -0.0, -3.0}).cuda()).isnan().cpu(), tensor({0, 0, 1}, kInt64).to(kBool)));
  EXPECT_EQ(values(digamma(tensor({0.0, -0.0}).cuda()).cpu()), (D{-kInf, kInf}));
}

}  // namespace

}  // namespace minidl::special_math_test
