// The BLAS-named products of ops/mm.h: addmm, baddbmm, addbmm, addmv, addr, mv, dot and outer.
// Forward against a float64 reference built element by element, gradients and second derivatives
// against central differences in float64, PyTorch's beta = 0 rule, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "higher_order_util.h"
#include "minidl.h"
#include "ops/gradcheck.h"
#include "test_util.h"

namespace minidl::blas_products_test {

using minidl::testing::expect_error;
using minidl::testing::gradgradcheck;

namespace {

std::vector<double> values(const Tensor& t) { return t.detach().to(kFloat64).to_vector<double>(); }

// Row-major index of output position `pos` (of shape `out`) in a tensor of shape `in` broadcast to it.
int64_t broadcast_index(const Shape& in, const Shape& out, int64_t pos) {
  int64_t index = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(out.size()) - 1, i = static_cast<int64_t>(in.size()) - 1; d >= 0; --d, --i) {
    const int64_t coord = pos % out[d];
    pos /= out[d];
    if (i >= 0) {
      if (in[i] != 1) index += coord * stride;
      stride *= in[i];
    }
  }
  return index;
}

// beta * input + alpha * product, element by element; beta == 0 reads nothing of input.
std::vector<double> add_reference(const Tensor& input, const std::vector<double>& product, const Shape& out,
                                  double beta, double alpha) {
  std::vector<double> in = values(input), r(product.size());
  for (size_t p = 0; p < r.size(); ++p)
    r[p] = alpha * product[p] + (beta == 0 ? 0.0 : beta * in[broadcast_index(input.shape(), out, p)]);
  return r;
}

// [B, n, m] @ [B, m, p] (B = 1 for 2-D operands), optionally summed over the batch.
std::vector<double> product_reference(const Tensor& a, const Tensor& b, bool sum_batch = false) {
  const int64_t batch = a.dim() == 3 ? a.size(0) : 1, n = a.size(-2), m = a.size(-1), p = b.size(-1);
  std::vector<double> av = values(a), bv = values(b), out(static_cast<size_t>((sum_batch ? 1 : batch) * n * p), 0.0);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < p; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < m; ++q) acc += av[(s * n + i) * m + q] * bv[(s * m + q) * p + j];
        out[((sum_batch ? 0 : s) * n + i) * p + j] += acc;
      }
  return out;
}

void expect_close(const std::vector<double>& expected, const Tensor& got, double tol) {
  std::vector<double> g = values(got);
  ASSERT_EQ(expected.size(), g.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], expected[i], tol * (1 + std::abs(expected[i]))) << "element " << i;
}

double tolerance(DType dtype) { return dtype == kFloat64 ? 1e-12 : 1e-5; }

struct Coefficients {
  double beta, alpha;
};
const Coefficients kCoefficients[] = {{1, 1}, {0.5, -2}, {0, 1.5}, {-1, 0}};

std::string trace(const Shape& input, const Coefficients& c, DType dtype) {
  std::ostringstream os;
  os << "input " << input << " beta " << c.beta << " alpha " << c.alpha << " " << dtype_name(dtype);
  return os.str();
}

}  // namespace

TEST(BlasProducts, AddmmMatchesTheReference) {
  manual_seed(11);
  for (DType dtype : {kFloat32, kFloat64})
    for (const Shape& input_shape : {Shape{5, 3}, Shape{3}, Shape{1, 3}, Shape{5, 1}, Shape{}})
      for (const Coefficients& c : kCoefficients) {
        SCOPED_TRACE(trace(input_shape, c, dtype));
        const Tensor input = randn(input_shape, dtype), a = randn({5, 4}, dtype), b = randn({3, 4}, dtype).t();
        const Tensor out = addmm(input, a, b, c.beta, c.alpha);
        EXPECT_EQ(out.shape(), (Shape{5, 3}));
        EXPECT_EQ(out.dtype(), dtype);
        expect_close(add_reference(input, product_reference(a, b), {5, 3}, c.beta, c.alpha), out, tolerance(dtype));
        expect_close(values(out), input.addmm(a, b, c.beta, c.alpha), 0);  // the method is the function
      }
}

TEST(BlasProducts, AddmmOfABiasRowIsLinear) {
  manual_seed(12);
  const Tensor x = randn({6, 4}, kFloat64), w = randn({3, 4}, kFloat64), bias = randn({3}, kFloat64);
  expect_close(values(linear(x, w, bias)), addmm(bias, x, w.t()), 0);
  expect_close(add_reference(bias, product_reference(x, w.t()), {6, 3}, 1, 1), addmm(bias, x, w.t()), 1e-12);
}

TEST(BlasProducts, BaddbmmMatchesTheReference) {
  manual_seed(13);
  for (DType dtype : {kFloat32, kFloat64})
    for (const Shape& input_shape : {Shape{2, 5, 3}, Shape{5, 3}, Shape{1, 5, 3}, Shape{2, 1, 3}, Shape{3}, Shape{}})
      for (const Coefficients& c : kCoefficients) {
        SCOPED_TRACE(trace(input_shape, c, dtype));
        // batch2 as attention passes it: keys transposed, a view.
        const Tensor input = randn(input_shape, dtype), q = randn({2, 5, 4}, dtype), k = randn({2, 3, 4}, dtype);
        const Tensor out = baddbmm(input, q, k.transpose(1, 2), c.beta, c.alpha);
        EXPECT_EQ(out.shape(), (Shape{2, 5, 3}));
        expect_close(add_reference(input, product_reference(q, k.transpose(1, 2)), {2, 5, 3}, c.beta, c.alpha), out,
                     tolerance(dtype));
        expect_close(values(out), input.baddbmm(q, k.transpose(1, 2), c.beta, c.alpha), 0);
      }
}

TEST(BlasProducts, AddbmmSumsOverTheBatch) {
  manual_seed(14);
  for (DType dtype : {kFloat32, kFloat64})
    for (const Shape& input_shape : {Shape{5, 3}, Shape{3}, Shape{5, 1}})
      for (const Coefficients& c : kCoefficients) {
        SCOPED_TRACE(trace(input_shape, c, dtype));
        const Tensor input = randn(input_shape, dtype), a = randn({4, 5, 2}, dtype), b = randn({4, 2, 3}, dtype);
        const Tensor out = addbmm(input, a, b, c.beta, c.alpha);
        EXPECT_EQ(out.shape(), (Shape{5, 3}));
        expect_close(add_reference(input, product_reference(a, b, true), {5, 3}, c.beta, c.alpha), out,
                     tolerance(dtype));
        expect_close(values(out), input.addbmm(a, b, c.beta, c.alpha), 0);
      }
}

TEST(BlasProducts, AddmvAndAddrMatchTheReference) {
  manual_seed(15);
  for (DType dtype : {kFloat32, kFloat64})
    for (const Coefficients& c : kCoefficients) {
      SCOPED_TRACE(trace({}, c, dtype));
      const Tensor mat = randn({5, 4}, dtype), vec = randn({4}, dtype);
      for (const Shape& input_shape : {Shape{5}, Shape{1}, Shape{}}) {
        const Tensor input = randn(input_shape, dtype);
        const Tensor out = addmv(input, mat, vec, c.beta, c.alpha);
        EXPECT_EQ(out.shape(), (Shape{5}));
        expect_close(add_reference(input, product_reference(mat, vec.reshape({4, 1})), {5}, c.beta, c.alpha), out,
                     tolerance(dtype));
        expect_close(values(out), input.addmv(mat, vec, c.beta, c.alpha), 0);
      }
      const Tensor u = randn({5}, dtype), v = randn({3}, dtype);
      for (const Shape& input_shape : {Shape{5, 3}, Shape{3}, Shape{5, 1}}) {
        const Tensor input = randn(input_shape, dtype);
        const Tensor out = addr(input, u, v, c.beta, c.alpha);
        EXPECT_EQ(out.shape(), (Shape{5, 3}));
        expect_close(add_reference(input, product_reference(u.reshape({5, 1}), v.reshape({1, 3})), {5, 3}, c.beta,
                                   c.alpha),
                     out, tolerance(dtype));
        expect_close(values(out), input.addr(u, v, c.beta, c.alpha), 0);
      }
    }
  // Integers: addr is elementwise, so it takes them (with integer coefficients), as PyTorch's does.
  const Tensor ints = Tensor::from_vector<int64_t>({1, 2}, {2}), grid = zeros({2, 2}, kInt64).add(1);
  const Tensor out = addr(grid, ints, ints, 2, 3);
  EXPECT_EQ(out.dtype(), kInt64);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{5, 8, 8, 14}));
}

TEST(BlasProducts, MvDotAndOuter) {
  manual_seed(16);
  const Tensor mat = randn({5, 4}, kFloat64), vec = randn({4}, kFloat64), other = randn({4}, kFloat64);
  expect_close(product_reference(mat, vec.reshape({4, 1})), mat.mv(vec), 1e-12);
  EXPECT_EQ(mv(mat, vec).shape(), (Shape{5}));
  const Tensor d = dot(vec, other);
  EXPECT_EQ(d.dim(), 0);
  expect_close(product_reference(vec.reshape({1, 4}), other.reshape({4, 1})), vec.dot(other), 1e-12);
  EXPECT_EQ(d.item<double>(), vec.dot(other).item<double>());
  const Tensor o = outer(vec, randn({3}, kFloat64));
  EXPECT_EQ(o.shape(), (Shape{4, 3}));
  // outer promotes as mul does: int64 x float32 -> float32.
  const Tensor promoted = outer(Tensor::from_vector<int64_t>({1, 2}, {2}), Tensor::from_vector<float>({0.5f, 3}, {2}));
  EXPECT_EQ(promoted.dtype(), kFloat32);
  EXPECT_EQ(promoted.to_vector<float>(), (std::vector<float>{0.5f, 3, 1, 6}));
  EXPECT_EQ(Tensor::from_vector<int64_t>({1, 2}, {2}).outer(Tensor::from_vector<int64_t>({3}, {1})).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 6}));
}

TEST(BlasProducts, BetaZeroIgnoresNaNAndInfinityInTheInput) {
  manual_seed(17);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto poisoned = [&](const Shape& shape) {
    Tensor t = full(shape, nan, kFloat64);
    if (t.numel() > 1) t.reshape({-1}).narrow(0, 0, 1).fill_(inf);
    return t;
  };
  const Tensor a = randn({5, 4}, kFloat64), b = randn({4, 3}, kFloat64);
  const Tensor ba = randn({2, 5, 4}, kFloat64), bb = randn({2, 4, 3}, kFloat64);
  const Tensor vec = randn({4}, kFloat64), u = randn({5}, kFloat64), v = randn({3}, kFloat64);
  const std::vector<std::pair<const char*, Tensor>> results = {
      {"addmm", addmm(poisoned({5, 3}), a, b, 0, 2)},
      {"addmm (bias row)", addmm(poisoned({3}), a, b, 0)},
      {"baddbmm", baddbmm(poisoned({2, 5, 3}), ba, bb, 0)},
      {"addbmm", addbmm(poisoned({5, 3}), ba, bb, 0)},
      {"addmv", addmv(poisoned({5}), a, vec, 0)},
      {"addr", addr(poisoned({5, 3}), u, v, 0)},
  };
  for (const auto& [name, out] : results) {
    SCOPED_TRACE(name);
    for (double x : values(out)) EXPECT_TRUE(std::isfinite(x));
  }
  expect_close(product_reference(a, b), addmm(poisoned({5, 3}), a, b, 0), 1e-12);
  // beta != 0 reads it: NaN propagates.
  EXPECT_TRUE(std::isnan(values(addmm(poisoned({5, 3}), a, b, 1e-3))[1]));
}

TEST(BlasProducts, AnEmptyInnerDimensionLeavesBetaTimesInput) {
  const Tensor input = arange(6, kFloat32).reshape({2, 3}), a = empty({2, 0}, kFloat32), b = empty({0, 3}, kFloat32);
  EXPECT_EQ(addmm(input, a, b, 2, 5).to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(addmm(input, a, b, 0, 5).to_vector<float>(), (std::vector<float>(6, 0)));
  EXPECT_EQ(addbmm(input, empty({0, 2, 4}, kFloat32), empty({0, 4, 3}, kFloat32), 0.5).to_vector<float>(),
            (std::vector<float>{0, 0.5, 1, 1.5, 2, 2.5}));
  EXPECT_EQ(baddbmm(input, empty({4, 2, 0}, kFloat32), empty({4, 0, 3}, kFloat32)).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(addmm(empty({0, 3}, kFloat32), empty({0, 4}, kFloat32), randn({4, 3})).shape(), (Shape{0, 3}));
}

TEST(BlasProducts, Gradcheck) {
  manual_seed(18);
  auto leaf = [](const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); };
  struct GradCase {
    const char* name;
    std::function<Tensor(const std::vector<Tensor>&)> f;
    std::vector<Tensor> inputs;
  };
  const std::vector<GradCase> cases = {
      {"addmm", [](auto& t) { return addmm(t[0], t[1], t[2], 0.5, -1.5); }, {leaf({4, 3}), leaf({4, 5}), leaf({5, 3})}},
      {"addmm broadcast input, transposed mat2",
       [](auto& t) { return addmm(t[0], t[1], t[2].t(), 2, 1); }, {leaf({4, 1}), leaf({4, 5}), leaf({3, 5})}},
      {"addmm bias row", [](auto& t) { return addmm(t[0], t[1], t[2].t()); }, {leaf({3}), leaf({4, 5}), leaf({3, 5})}},
      {"addmm beta 0", [](auto& t) { return addmm(t[0], t[1], t[2], 0, 3); }, {leaf({4, 3}), leaf({4, 5}), leaf({5, 3})}},
      {"baddbmm", [](auto& t) { return baddbmm(t[0], t[1], t[2].transpose(1, 2), -0.5, 0.25); },
       {leaf({2, 4, 3}), leaf({2, 4, 5}), leaf({2, 3, 5})}},
      {"baddbmm broadcast input", [](auto& t) { return baddbmm(t[0], t[1], t[2]); },
       {leaf({4, 1}), leaf({2, 4, 5}), leaf({2, 5, 3})}},
      {"addbmm", [](auto& t) { return addbmm(t[0], t[1], t[2], 1.5, 0.5); },
       {leaf({5}), leaf({3, 4, 2}), leaf({3, 2, 5})}},
      {"addmv", [](auto& t) { return addmv(t[0], t[1], t[2], 2, -1); }, {leaf({4}), leaf({4, 3}), leaf({3})}},
      {"addmv 0-d input", [](auto& t) { return addmv(t[0], t[1], t[2]); }, {leaf({}), leaf({4, 3}), leaf({3})}},
      {"addr", [](auto& t) { return addr(t[0], t[1], t[2], 0.5, 2); }, {leaf({4, 1}), leaf({4}), leaf({3})}},
      {"mv", [](auto& t) { return mv(t[0], t[1]); }, {leaf({4, 3}), leaf({3})}},
      {"dot", [](auto& t) { return dot(t[0], t[1]); }, {leaf({6}), leaf({6})}},
      {"outer", [](auto& t) { return outer(t[0], t[1]); }, {leaf({4}), leaf({3})}},
  };
  for (const GradCase& c : cases) {
    SCOPED_TRACE(c.name);
    const GradcheckResult r = gradcheck(c.f, c.inputs);
    EXPECT_TRUE(r) << r.message;
  }
}

TEST(BlasProducts, SecondDerivatives) {
  manual_seed(19);
  auto leaf = [](const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); };
  GradcheckResult r = gradgradcheck([](auto& t) { return addmm(t[0], t[1], t[2], 0.5, -2); },
                                    {leaf({3, 2}), leaf({3, 4}), leaf({4, 2})});
  EXPECT_TRUE(r) << r.message;
  r = gradgradcheck([](auto& t) { return baddbmm(t[0], t[1], t[2], 2, 0.5); },
                    {leaf({2}), leaf({2, 3, 4}), leaf({2, 4, 2})});
  EXPECT_TRUE(r) << r.message;
}

TEST(BlasProducts, AnOperandChangedInPlaceStopsTheBackward) {
  manual_seed(20);
  const Tensor input = randn({4, 3}, kFloat64).requires_grad_(), a = randn({4, 5}, kFloat64).requires_grad_();
  Tensor b = randn({5, 3}, kFloat64);
  Tensor out = baddbmm(input.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), 1, 2);
  b.add_(1.0);  // a's gradient needs b as it was
  expect_error([&] { out.sum().backward(); }, {"baddbmm", "modified by an inplace operation"});
}

TEST(BlasProducts, ErrorsSayWhatWasExpected) {
  const Tensor m23 = randn({2, 3}), m34 = randn({3, 4}), m24 = randn({2, 4});
  expect_error([&] { (void)addmm(m24, m23, m23); }, {"addmm", "cannot be multiplied", "2x3 and 2x3"});
  expect_error([&] { (void)addmm(m24, m23.unsqueeze(0), m34); }, {"addmm", "mat1", "2-D", "3-d"});
  expect_error([&] { (void)addmm(randn({3, 4}), m23, m34); }, {"addmm", "input of shape [3, 4]", "[2, 4]"});
  expect_error([&] { (void)addmm(randn({5, 2, 4}), m23, m34); }, {"addmm", "does not broadcast"});
  expect_error([&] { (void)addmm(m24, m23, m34.to(kFloat64)); }, {"addmm", "one dtype", "float32", "float64"});
  expect_error([&] { (void)addmm(m24.to(kInt64), m23.to(kInt64), m34.to(kInt64)); }, {"addmm", "floating", "int64"});
  expect_error([&] { (void)baddbmm(randn({2, 2, 4}), randn({2, 2, 3}), randn({3, 3, 4})); },
               {"baddbmm", "batch size", "2 and 3"});
  expect_error([&] { (void)baddbmm(randn({2, 2, 4}), randn({2, 2, 3}), randn({2, 4, 4})); },
               {"baddbmm", "size 1 (4)", "size 2 (3)"});
  expect_error([&] { (void)baddbmm(m24, m23, m34); }, {"baddbmm", "3-D"});
  expect_error([&] { (void)addbmm(randn({3, 4}), randn({2, 2, 3}), randn({2, 3, 4})); },
               {"addbmm", "input of shape [3, 4]", "[2, 4]"});
  expect_error([&] { (void)addmv(randn({2}), m23, randn({4})); }, {"addmv", "size mismatch", "[2, 3]", "4 elements"});
  expect_error([&] { (void)addmv(randn({3}), m23, randn({3})); }, {"addmv", "input of shape [3]", "[2]"});
  expect_error([&] { (void)mv(m23, m23); }, {"mv", "2-D matrix and a 1-D vector", "[2, 3]"});
  expect_error([&] { (void)dot(randn({3}), randn({4})); }, {"dot", "one size", "3 and 4"});
  expect_error([&] { (void)dot(randn({3}), randn({3}, kFloat64)); }, {"dot", "one dtype", "float32", "float64"});
  expect_error([&] { (void)dot(m23, m23); }, {"dot", "1-D", "[2, 3]"});
  expect_error([&] { (void)outer(m23, randn({3})); }, {"outer", "1-D"});
  expect_error([&] { (void)addr(randn({2, 3}), randn({2}), randn({4})); }, {"addr", "input of shape [2, 3]", "[2, 4]"});
  const Tensor ints = zeros({2}, kInt64);
  expect_error([&] { (void)addr(zeros({2, 2}, kInt64), ints, ints, 1, 0.5); }, {"addr", "integers", "0.5"});
}

}  // namespace minidl::blas_products_test
