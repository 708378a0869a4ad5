// max_pool2d: values and indices against a direct loop, gradients against central differences,
// gradient routing where windows overlap, and the errors for bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include "minidl.h"
#include "test_util.h"

namespace minidl::max_pool2d_test {

using minidl::testing::error_of;

namespace {

struct Pool {
  int64_t n, c, h, w, kh, kw;
  std::optional<Size2> stride;
  int64_t ph, pw;
  int64_t sh() const { return stride ? stride->h : kh; }
  int64_t sw() const { return stride ? stride->w : kw; }
  int64_t out_h() const { return (h + 2 * ph - kh) / sh() + 1; }
  int64_t out_w() const { return (w + 2 * pw - kw) / sw() + 1; }
  Tensor run(const Tensor& x) const { return max_pool2d(x, {kh, kw}, stride, {ph, pw}); }
};

std::ostream& operator<<(std::ostream& os, const Pool& p) {
  return os << "x [" << p.n << ", " << p.c << ", " << p.h << ", " << p.w << "] kernel " << p.kh << "x" << p.kw
            << " stride " << p.sh() << "x" << p.sw() << (p.stride ? "" : " (default)") << " padding " << p.ph << "x"
            << p.pw;
}

const std::vector<Pool> kPools = {
    {1, 1, 4, 4, 2, 2, std::nullopt, 0, 0},        // batch 1, the classic 2x2 with default stride
    {2, 3, 7, 5, 2, 2, std::nullopt, 0, 0},        // odd, non-square: the last row and column are dropped
    {2, 2, 7, 5, 3, 3, Size2(2), 1, 1},            // kernel 3, stride 2, padding 1
    {1, 2, 6, 7, 3, 3, Size2(1), 1, 1},            // stride 1: overlapping windows, padding 1
    {2, 1, 5, 6, 2, 2, Size2(1), 0, 0},            // kernel 2, stride 1
    {2, 2, 7, 9, 3, 2, Size2(2, 1), 1, 0},         // non-square kernel and stride, padding (1, 0)
    {1, 1, 3, 3, 3, 3, std::nullopt, 1, 1},        // default stride 3 with padding 1
};

// Values 0, 1, ..., numel-1 shuffled and scaled: no ties, so the maximum (and its gradient) is unique.
Tensor distinct(const Shape& shape, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (double& e : v) e = e * 0.1 - 1.0;
  return Tensor::from_vector(v, shape);
}

struct Expected {
  std::vector<double> values;
  std::vector<int64_t> indices;
};

Expected reference_pool(const Pool& p, const std::vector<double>& x) {
  Expected e;
  for (int64_t plane = 0; plane < p.n * p.c; ++plane)
    for (int64_t y = 0; y < p.out_h(); ++y)
      for (int64_t xx = 0; xx < p.out_w(); ++xx) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t ki = 0; ki < p.kh; ++ki)
          for (int64_t kj = 0; kj < p.kw; ++kj) {
            int64_t ih = y * p.sh() - p.ph + ki, iw = xx * p.sw() - p.pw + kj;
            if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
            double v = x[plane * p.h * p.w + ih * p.w + iw];
            if (v > best) {
              best = v;
              at = ih * p.w + iw;
            }
          }
        e.values.push_back(best);
        e.indices.push_back(at);
      }
  return e;
}

}  // namespace

TEST(MaxPool2d, ForwardMatchesLoops) {
  uint32_t seed = 1;
  for (const Pool& p : kPools) {
    Tensor x = distinct({p.n, p.c, p.h, p.w}, seed++);
    Expected want = reference_pool(p, x.to_vector<double>());
    Tensor out = p.run(x);
    ASSERT_EQ(out.shape(), (Shape{p.n, p.c, p.out_h(), p.out_w()})) << p;
    EXPECT_EQ(out.to_vector<double>(), want.values) << p;
    std::vector<float> out32 = p.run(x.to(kFloat32)).to_vector<float>();
    EXPECT_EQ(out32, Tensor::from_vector(want.values).to(kFloat32).to_vector<float>()) << p;
  }
}

TEST(MaxPool2d, LargeEnoughToRunInParallel) {
  // The kernels split planes across threads only past a size threshold; this shape crosses it.
  Pool p{4, 8, 33, 35, 3, 3, Size2(2), 1, 1};
  Tensor x = distinct({p.n, p.c, p.h, p.w}, 99).requires_grad_();
  ASSERT_GT(x.numel(), 1 << 15);
  Expected want = reference_pool(p, x.to_vector<double>());
  Tensor out = p.run(x);
  EXPECT_EQ(out.to_vector<double>(), want.values);
  out.sum().backward();
  std::vector<double> expected(static_cast<size_t>(x.numel()), 0.0);
  const int64_t plane_out = p.out_h() * p.out_w();
  for (size_t j = 0; j < want.indices.size(); ++j)
    expected[static_cast<int64_t>(j) / plane_out * p.h * p.w + want.indices[j]] += 1.0;
  EXPECT_EQ(x.grad().to_vector<double>(), expected);
}

TEST(MaxPool2d, IndicesPointAtTheMaximum) {
  // The backward routes each gradient to its index: a one-hot seed at one output shows it.
  uint32_t seed = 11;
  for (const Pool& p : kPools) {
    Tensor x = distinct({p.n, p.c, p.h, p.w}, seed++).requires_grad_();
    Expected want = reference_pool(p, x.to_vector<double>());
    Tensor out = p.run(x);
    // Seed output j with j+1: every input then receives the sum of (j+1) over the outputs it won.
    std::vector<double> seed_values(want.values.size());
    std::iota(seed_values.begin(), seed_values.end(), 1.0);
    out.backward(Tensor::from_vector(seed_values, out.shape()));
    std::vector<double> expected(static_cast<size_t>(x.numel()), 0.0);
    const int64_t plane_out = p.out_h() * p.out_w();
    for (size_t j = 0; j < want.indices.size(); ++j) {
      int64_t plane = static_cast<int64_t>(j) / plane_out;
      expected[plane * p.h * p.w + want.indices[j]] += seed_values[j];
    }
    EXPECT_EQ(x.grad().to_vector<double>(), expected) << p;
  }
}

TEST(MaxPool2d, OverlappingWindowsAccumulate) {
  // The centre of a 3x3 image is the maximum of all four 2x2 stride-1 windows.
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 9, 5, 6, 7, 8}, {1, 1, 3, 3}).requires_grad_();
  Tensor out = max_pool2d(x, 2, 1);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{9, 9, 9, 9}));
  out.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 4, 0, 0, 0, 0}));
}

TEST(MaxPool2d, PaddingIsNeverTheMaximum) {
  // All-negative input: a zero-padded border would win; -infinity padding never does.
  Tensor x = full({1, 1, 2, 2}, -5.0, kFloat64);
  EXPECT_EQ(max_pool2d(x, 3, 1, 1).to_vector<double>(), (std::vector<double>(4, -5.0)));
}

TEST(MaxPool2d, NanPropagates) {
  Tensor x = Tensor::from_vector<float>({1, NAN, 3, 4}, {1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(x, 2).item<float>()));
}

TEST(MaxPool2d, Gradcheck) {
  uint32_t seed = 21;
  for (const Pool& p : kPools) {
    Tensor x = distinct({p.n, p.c, p.h, p.w}, seed++).requires_grad_();
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return p.run(in[0]); }, {x});
    EXPECT_TRUE(r) << p << ": " << r.message;
  }
}

TEST(MaxPool2d, Errors) {
  Tensor x = zeros({1, 2, 5, 5});
  std::string rank = error_of([&] { max_pool2d(zeros({2, 5, 5}), 2); });
  EXPECT_NE(rank.find("expected x of shape [N, C, H, W] (4-D), got shape [2, 5, 5]"), std::string::npos) << rank;
  std::string pad = error_of([&] { max_pool2d(x, 2, 2, 2); });
  EXPECT_NE(pad.find("padding must be between 0 and half the kernel size (1x1 for a 2x2 kernel), got 2x2"),
            std::string::npos) << pad;
  EXPECT_NE(error_of([&] { max_pool2d(x, 3, 1, {0, 2}); }).find("got 0x2"), std::string::npos);
  std::string big = error_of([&] { max_pool2d(x, 6); });
  EXPECT_NE(big.find("the kernel 6x6"), std::string::npos) << big;
  EXPECT_NE(big.find("larger than the input 5x5"), std::string::npos) << big;
  EXPECT_NE(error_of([&] { max_pool2d(x, 2, 0); }).find("positive stride"), std::string::npos);
  EXPECT_NE(error_of([&] { max_pool2d(x, 0); }).find("positive kernel"), std::string::npos);
  EXPECT_NE(error_of([&] { max_pool2d(zeros({1, 1, 2, 2}, kInt64), 2); }).find("floating"), std::string::npos);
}

}  // namespace minidl::max_pool2d_test
