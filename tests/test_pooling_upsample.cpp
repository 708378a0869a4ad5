// avg_pool2d, adaptive_avg_pool2d and nearest upsampling (with the modules and the max_pool2d
// options ceil_mode and dilation): values against direct loops and hand-computed PyTorch results,
// gradients against central differences, and the errors for bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <sstream>
#include <string>

#include "minidl.h"
#include "test_util.h"
#include "nn/nn.h"

namespace minidl::pooling_upsample_test {

using minidl::testing::error_of;

namespace {

// 0, 1, 2, ... in [1, 1, h, w], as torch.arange(h * w).view(1, 1, h, w).
Tensor arange_image(int64_t h, int64_t w) { return arange(static_cast<double>(h * w), kFloat64).view({1, 1, h, w}); }

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  std::vector<double> got = t.to(kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

struct AvgPool {
  int64_t n, c, h, w, kh, kw;
  std::optional<Size2> stride;
  int64_t ph, pw;
  bool ceil_mode, count_include_pad;
  int64_t sh() const { return stride ? stride->h : kh; }
  int64_t sw() const { return stride ? stride->w : kw; }
  static int64_t out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
    int64_t o = ceil_mode ? (in + 2 * p - k + s - 1) / s + 1 : (in + 2 * p - k) / s + 1;
    if (ceil_mode && (o - 1) * s >= in + p) --o;
    return o;
  }
  int64_t out_h() const { return out(h, kh, sh(), ph, ceil_mode); }
  int64_t out_w() const { return out(w, kw, sw(), pw, ceil_mode); }
  Tensor run(const Tensor& x) const { return avg_pool2d(x, {kh, kw}, stride, {ph, pw}, ceil_mode, count_include_pad); }
};

std::ostream& operator<<(std::ostream& os, const AvgPool& p) {
  return os << "x [" << p.n << ", " << p.c << ", " << p.h << ", " << p.w << "] kernel " << p.kh << "x" << p.kw
            << " stride " << p.sh() << "x" << p.sw() << " padding " << p.ph << "x" << p.pw
            << (p.ceil_mode ? " ceil_mode" : "") << (p.count_include_pad ? "" : " count_include_pad=false");
}

const std::vector<AvgPool> kAvgPools = {
    {1, 1, 4, 4, 2, 2, std::nullopt, 0, 0, false, true},  // batch 1, the classic 2x2
    {2, 3, 7, 5, 2, 2, std::nullopt, 0, 0, false, true},  // odd sizes: the last row and column are dropped
    {2, 3, 7, 5, 2, 2, std::nullopt, 0, 0, true, true},   // ... and kept, as partial windows, with ceil_mode
    {2, 2, 7, 5, 3, 3, Size2(2), 1, 1, false, true},      // padding counted in the divisor
    {2, 2, 7, 5, 3, 3, Size2(2), 1, 1, false, false},     // padding not counted
    {1, 2, 6, 7, 3, 3, Size2(2), 1, 1, true, true},       // ceil_mode windows past the padding
    {1, 2, 6, 7, 3, 3, Size2(2), 1, 1, true, false},
    {2, 1, 5, 6, 3, 2, Size2(1, 2), 1, 0, false, false},  // non-square kernel and stride, overlapping rows
};

// The mean of each window, with PyTorch's divisor, by direct loops.
std::vector<double> reference_avg_pool(const AvgPool& p, const std::vector<double>& x) {
  std::vector<double> out;
  for (int64_t plane = 0; plane < p.n * p.c; ++plane)
    for (int64_t y = 0; y < p.out_h(); ++y)
      for (int64_t xx = 0; xx < p.out_w(); ++xx) {
        const int64_t h0 = y * p.sh() - p.ph, w0 = xx * p.sw() - p.pw;
        const int64_t h1 = std::min(h0 + p.kh, p.h + p.ph), w1 = std::min(w0 + p.kw, p.w + p.pw);
        double s = 0;
        int64_t count = 0;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h1, p.h); ++ih)
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w1, p.w); ++iw, ++count)
            s += x[plane * p.h * p.w + ih * p.w + iw];
        out.push_back(s / static_cast<double>(p.count_include_pad ? (h1 - h0) * (w1 - w0) : count));
      }
  return out;
}

}  // namespace

TEST(AvgPool2d, ForwardMatchesLoops) {
  manual_seed(1);
  for (const AvgPool& p : kAvgPools) {
    Tensor x = randn({p.n, p.c, p.h, p.w}, kFloat64);
    Tensor out = p.run(x);
    ASSERT_EQ(out.shape(), (Shape{p.n, p.c, p.out_h(), p.out_w()})) << p;
    expect_values(out, reference_avg_pool(p, x.to_vector<double>()));
    expect_values(p.run(x.to(kFloat32)), reference_avg_pool(p, x.to_vector<double>()), 1e-5);
  }
}

TEST(AvgPool2d, HandComputedPaddingBothWays) {
  // torch.nn.functional.avg_pool2d(torch.arange(16.).view(1, 1, 4, 4), 3, 2, 1): the corner window
  // holds 0, 1, 4, 5 and five zeros of padding.
  Tensor x = arange_image(4, 4);
  expect_values(avg_pool2d(x, 3, 2, 1), {10.0 / 9, 24.0 / 9, 51.0 / 9, 90.0 / 9});
  expect_values(avg_pool2d(x, 3, 2, 1, false, /*count_include_pad=*/false), {10.0 / 4, 24.0 / 6, 51.0 / 6, 90.0 / 9});
  // ceil_mode adds a third window starting at row 3; it reaches past the padded image (rows 3..5 of
  // a padded height 5), so with count_include_pad its divisor counts rows 3..4 only: x[3][3] / 4.
  Tensor c = avg_pool2d(x, 3, 2, 1, /*ceil_mode=*/true);
  ASSERT_EQ(c.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_NEAR(c.to_vector<double>()[8], 15.0 / 4, 1e-12);
  EXPECT_NEAR(avg_pool2d(x, 3, 2, 1, true, false).to_vector<double>()[8], 15.0, 1e-12);
}

TEST(AvgPool2d, CeilModeKeepsPartialWindows) {
  // F.avg_pool2d(torch.arange(25.).view(1, 1, 5, 5), 2, ceil_mode=True)
  expect_values(avg_pool2d(arange_image(5, 5), 2, std::nullopt, 0, /*ceil_mode=*/true),
                {3, 5, 6.5, 13, 15, 16.5, 20.5, 22.5, 24});
}

TEST(AvgPool2d, BackwardSpreadsEachGradientOverItsWindow) {
  // Overlapping 2x2 windows of stride 1 over 3x3: the centre is in all four, a corner in one.
  Tensor x = zeros({1, 1, 3, 3}, kFloat64).requires_grad_();
  avg_pool2d(x, 2, 1).sum().backward();
  expect_values(x.grad(), {0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25});
}

TEST(AvgPool2d, Gradcheck) {
  manual_seed(2);
  for (const AvgPool& p : kAvgPools) {
    Tensor x = randn({p.n, p.c, p.h, p.w}, kFloat64).requires_grad_();
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return p.run(in[0]); }, {x});
    EXPECT_TRUE(r) << p << ": " << r.message;
  }
}

TEST(AvgPool2d, LargeEnoughToRunInParallel) {
  AvgPool p{4, 8, 33, 35, 3, 3, Size2(2), 1, 1, true, false};
  manual_seed(3);
  Tensor x = randn({p.n, p.c, p.h, p.w}, kFloat64).requires_grad_();
  ASSERT_GT(x.numel(), 1 << 15);
  expect_values(p.run(x), reference_avg_pool(p, x.to_vector<double>()));
  // The gradient of the sum: each element gets 1 / divisor from every window holding it.
  p.run(x).sum().backward();
  std::vector<double> want(static_cast<size_t>(x.numel()), 0.0);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane)
    for (int64_t y = 0; y < p.out_h(); ++y)
      for (int64_t xx = 0; xx < p.out_w(); ++xx) {
        const int64_t h0 = y * 2 - 1, w0 = xx * 2 - 1;
        int64_t count = 0;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + 3, p.h); ++ih)
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + 3, p.w); ++iw) ++count;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + 3, p.h); ++ih)
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + 3, p.w); ++iw)
            want[plane * p.h * p.w + ih * p.w + iw] += 1.0 / count;
      }
  expect_values(x.grad(), want);
}

TEST(AvgPool2d, Errors) {
  Tensor x = zeros({1, 2, 5, 5});
  std::string rank = error_of([&] { avg_pool2d(zeros({2, 5, 5}), 2); });
  EXPECT_NE(rank.find("avg_pool2d: expected x of shape [N, C, H, W] (4-D), got shape [2, 5, 5]"), std::string::npos)
      << rank;
  std::string pad = error_of([&] { avg_pool2d(x, 2, 2, 2); });
  EXPECT_NE(pad.find("avg_pool2d: padding must be between 0 and half the kernel size (1x1 for a 2x2 kernel), got 2x2"),
            std::string::npos)
      << pad;
  std::string big = error_of([&] { avg_pool2d(x, 6); });
  EXPECT_NE(big.find("larger than the input 5x5"), std::string::npos) << big;
  EXPECT_NE(error_of([&] { avg_pool2d(x, 2, 0); }).find("positive stride"), std::string::npos);
  EXPECT_NE(error_of([&] { avg_pool2d(zeros({1, 1, 2, 2}, kInt64), 2); }).find("floating"), std::string::npos);
}

// ---- adaptive_avg_pool2d ----

namespace {

std::vector<double> reference_adaptive(const Tensor& x, int64_t oh, int64_t ow) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  std::vector<double> v = x.to(kFloat64).to_vector<double>(), out;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t h0 = i * H / oh, h1 = ((i + 1) * H + oh - 1) / oh;
        const int64_t w0 = j * W / ow, w1 = ((j + 1) * W + ow - 1) / ow;
        double s = 0;
        for (int64_t a = h0; a < h1; ++a)
          for (int64_t b = w0; b < w1; ++b) s += v[p * H * W + a * W + b];
        out.push_back(s / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  return out;
}

}  // namespace

TEST(AdaptiveAvgPool2d, ForwardMatchesLoops) {
  manual_seed(4);
  const std::vector<std::pair<Shape, Size2>> cases = {
      {{2, 3, 7, 5}, {3, 2}},  // windows of unequal size that overlap
      {{1, 2, 6, 6}, {3, 3}},  // windows that tile exactly
      {{2, 1, 3, 4}, {5, 7}},  // output larger than the input: elements repeat
      {{2, 3, 5, 7}, {1, 1}},  // global average pooling
      {{1, 2, 4, 6}, {1, 3}},
      {{2, 2, 5, 5}, {5, 5}},  // identity
  };
  for (const auto& [shape, size] : cases) {
    Tensor x = randn(shape, kFloat64);
    Tensor out = adaptive_avg_pool2d(x, size);
    ASSERT_EQ(out.shape(), (Shape{shape[0], shape[1], size.h, size.w}));
    expect_values(out, reference_adaptive(x, size.h, size.w));
    expect_values(adaptive_avg_pool2d(x.to(kFloat32), size), reference_adaptive(x, size.h, size.w), 1e-5);
  }
}

TEST(AdaptiveAvgPool2d, HandComputed) {
  // F.adaptive_avg_pool2d(torch.arange(5.).view(1, 1, 1, 5), (1, 3)): windows [0, 2), [1, 4), [3, 5).
  expect_values(adaptive_avg_pool2d(arange_image(1, 5), {1, 3}), {0.5, 2.0, 3.5});
  // Global pooling is the mean of each plane.
  expect_values(adaptive_avg_pool2d(arange_image(3, 4), 1), {5.5});
}

TEST(AdaptiveAvgPool2d, GlobalPoolingIsTheMeanOverHW) {
  manual_seed(5);
  Tensor x = randn({3, 4, 5, 6}, kFloat64).requires_grad_();
  Tensor out = adaptive_avg_pool2d(x, 1);
  ASSERT_EQ(out.shape(), (Shape{3, 4, 1, 1}));
  expect_values(out, mean(x.detach(), {2, 3}, true).to_vector<double>());
  out.sum().backward();
  expect_values(x.grad(), std::vector<double>(static_cast<size_t>(x.numel()), 1.0 / 30));
}

TEST(AdaptiveAvgPool2d, Gradcheck) {
  manual_seed(6);
  const std::vector<std::pair<Shape, Size2>> cases = {
      {{2, 2, 7, 5}, {3, 2}}, {{1, 2, 3, 4}, {5, 7}}, {{2, 3, 5, 4}, {1, 1}}, {{1, 1, 6, 5}, {4, 1}}};
  for (const auto& [shape, size] : cases) {
    Tensor x = randn(shape, kFloat64).requires_grad_();
    auto r = gradcheck([size = size](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], size); }, {x});
    EXPECT_TRUE(r) << "output " << size.h << "x" << size.w << ": " << r.message;
  }
}

TEST(AdaptiveAvgPool2d, Errors) {
  std::string rank = error_of([] { adaptive_avg_pool2d(zeros({3, 4}), 1); });
  EXPECT_NE(rank.find("adaptive_avg_pool2d: expected x of shape [N, C, H, W] (4-D), got shape [3, 4]"),
            std::string::npos)
      << rank;
  std::string size = error_of([] { adaptive_avg_pool2d(zeros({1, 1, 3, 3}), {0, 2}); });
  EXPECT_NE(size.find("expected a positive output size, got 0x2"), std::string::npos) << size;
  EXPECT_NE(error_of([] { nn::AdaptiveAvgPool2d(-1); }).find("positive output size"), std::string::npos);
}

// ---- upsample_nearest2d / interpolate ----

namespace {

// All elements, row-major, as doubles.
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

InterpolateOptions by_size(Size2 s) { return InterpolateOptions().size(s); }
InterpolateOptions by_scale(Scale2 s) { return InterpolateOptions().scale_factor(s); }

}  // namespace

TEST(Upsample, ScaleTwoRepeatsEachPixel) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor out = interpolate(x, by_scale(2));
  ASSERT_EQ(out.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(values(out), (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Upsample, PicksThePyTorchSources) {
  // F.interpolate(x, size=...) with mode "nearest": source = floor(dst * in / out).
  Tensor row5 = arange_image(1, 5), row2 = arange_image(1, 2), row4 = arange_image(1, 4);
  EXPECT_EQ(values(interpolate(row2, by_size({1, 3}))), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(values(interpolate(row5, by_size({1, 3}))), (std::vector<double>{0, 1, 3}));  // downsampling
  EXPECT_EQ(values(interpolate(row5, by_size({1, 7}))), (std::vector<double>{0, 0, 1, 2, 2, 3, 4}));
  // With scale_factor the factor places the samples: 4 * 1.5 = 6 outputs reading floor(dst / 1.5).
  EXPECT_EQ(values(interpolate(row4, by_scale({1, 1.5}))), (std::vector<double>{0, 0, 1, 2, 2, 3}));
  // A factor that keeps the size reads the input unchanged (PyTorch's nearest_idx).
  Tensor row10 = arange_image(1, 10);
  EXPECT_EQ(values(interpolate(row10, by_scale({1, 1.05}))), values(row10));
  // recompute_scale_factor uses in / out instead: 5 -> floor(5 * 1.7) = 8 outputs.
  EXPECT_EQ(values(interpolate(row5, by_scale({1, 1.7}).recompute_scale_factor(true))),
            (std::vector<double>{0, 0, 1, 1, 2, 3, 3, 4}));
  EXPECT_EQ(values(interpolate(row5, by_scale({1, 1.7}))), (std::vector<double>{0, 0, 1, 1, 2, 2, 3, 4}));
}

TEST(Upsample, ForwardMatchesLoopsAndBackwardSumsTheCopies) {
  manual_seed(7);
  const std::vector<std::pair<Shape, Size2>> cases = {
      {{2, 3, 4, 5}, {8, 10}}, {{1, 2, 3, 3}, {7, 5}}, {{2, 1, 6, 5}, {4, 3}}, {{1, 1, 1, 1}, {3, 2}}};
  for (const auto& [shape, size] : cases) {
    Tensor x = randn(shape, kFloat64).requires_grad_();
    Tensor out = upsample_nearest2d(x, size);
    ASSERT_EQ(out.shape(), (Shape{shape[0], shape[1], size.h, size.w}));
    const int64_t H = shape[2], W = shape[3];
    std::vector<double> v = values(x.detach()), want, grad_want(v.size(), 0.0);
    std::vector<double> seed(static_cast<size_t>(out.numel()));
    for (size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<double>(i % 7) + 1;
    size_t k = 0;
    for (int64_t p = 0; p < shape[0] * shape[1]; ++p)
      for (int64_t i = 0; i < size.h; ++i)
        for (int64_t j = 0; j < size.w; ++j, ++k) {
          const int64_t si = std::min(static_cast<int64_t>(std::floor(float(i) * (float(H) / float(size.h)))), H - 1);
          const int64_t sj = std::min(static_cast<int64_t>(std::floor(float(j) * (float(W) / float(size.w)))), W - 1);
          want.push_back(v[p * H * W + si * W + sj]);
          grad_want[p * H * W + si * W + sj] += seed[k];
        }
    EXPECT_EQ(values(out), want);
    out.backward(Tensor::from_vector(seed, out.shape()));
    EXPECT_EQ(values(x.grad()), grad_want);
  }
}

TEST(Upsample, Gradcheck) {
  manual_seed(8);
  auto check = [](const Shape& shape, const InterpolateOptions& options) {
    Tensor x = randn(shape, kFloat64).requires_grad_();
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return interpolate(in[0], options); }, {x});
    EXPECT_TRUE(r) << r.message;
  };
  check({2, 2, 3, 4}, by_scale(2));
  check({1, 2, 5, 3}, by_scale({1.5, 2.5}));
  check({2, 1, 5, 6}, by_size({3, 4}));
  check({1, 1, 2, 3}, by_size({5, 7}));
}

TEST(Upsample, Errors) {
  Tensor x = zeros({1, 1, 2, 2});
  std::string neither = error_of([&] { interpolate(x, InterpolateOptions()); });
  EXPECT_NE(neither.find("interpolate: expected exactly one of size and scale_factor, got neither"), std::string::npos)
      << neither;
  EXPECT_NE(error_of([&] { interpolate(x, by_size(3).scale_factor(2)); }).find("got both"), std::string::npos);
  std::string mode = error_of([&] { interpolate(x, by_scale(2).mode("bilinear")); });
  EXPECT_NE(mode.find("mode \"bilinear\" is not supported; expected \"nearest\""), std::string::npos) << mode;
  EXPECT_NE(error_of([&] { interpolate(zeros({2, 2}), by_scale(2)); }).find("(4-D), got shape [2, 2]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { interpolate(x, by_scale(0.2)); }).find("expected a non-empty output"), std::string::npos);
  EXPECT_NE(error_of([&] { interpolate(x, by_scale(-1)); }).find("positive scale factors"), std::string::npos);
  EXPECT_NE(error_of([&] { upsample_nearest2d(x, {0, 3}); }).find("positive output size, got 0x3"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Upsample{nn::UpsampleOptions()}; }).find("exactly one of size and scale_factor"),
            std::string::npos);
}

// ---- max_pool2d's ceil_mode and dilation ----

TEST(MaxPool2dOptions, CeilModeAndDilation) {
  // F.max_pool2d(torch.arange(25.).view(1, 1, 5, 5), 2, ceil_mode=True): the partial windows of the
  // last row and column are kept.
  Tensor x = arange_image(5, 5).requires_grad_();
  Tensor c = max_pool2d(x, 2, std::nullopt, 0, 1, /*ceil_mode=*/true);
  EXPECT_EQ(values(c), (std::vector<double>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
  c.sum().backward();
  EXPECT_EQ(values(x.grad())[24], 1.0);
  // Dilation 2, kernel 2: window taps (0, 2) x (0, 2) from each start.
  EXPECT_EQ(values(max_pool2d(arange_image(5, 5), 2, 1, 0, 2)),
            (std::vector<double>{12, 13, 14, 17, 18, 19, 22, 23, 24}));
  manual_seed(9);
  Tensor y = randn({2, 2, 7, 6}, kFloat64).requires_grad_();
  auto r = gradcheck([](const std::vector<Tensor>& in) { return max_pool2d(in[0], 3, 2, 1, 1, true); }, {y});
  EXPECT_TRUE(r) << r.message;
  auto d = gradcheck([](const std::vector<Tensor>& in) { return max_pool2d(in[0], {2, 3}, 1, {1, 1}, {2, 2}); }, {y});
  EXPECT_TRUE(d) << d.message;
}

TEST(MaxPool2dOptions, DilatedWindowsOfPaddingOnlyPassNoGradient) {
  // Kernel 2, dilation 3, padding 1 over width 2: the window from -1 taps -1 and 2, both padding.
  Tensor x = Tensor::from_vector<double>({1, 2}, {1, 1, 1, 2}).requires_grad_();
  Tensor out = max_pool2d(x, {1, 2}, 1, {0, 1}, {1, 3});
  ASSERT_EQ(out.shape(), (Shape{1, 1, 1, 1}));
  EXPECT_TRUE(std::isinf(out.item<double>()));
  out.sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0}));
}

// ---- modules ----

TEST(PoolingModules, ForwardAndPrint) {
  auto printed = [](const nn::Module& m) {
    std::ostringstream os;
    os << m;
    return os.str();
  };
  nn::AvgPool2d avg(nn::AvgPool2dOptions(3).stride(2).padding(1).count_include_pad(false));
  EXPECT_EQ(printed(*avg), "AvgPool2d(kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], count_include_pad=false)");
  Tensor x = arange_image(4, 4);
  expect_values(avg(x), {10.0 / 4, 24.0 / 6, 51.0 / 6, 90.0 / 9});
  EXPECT_EQ(printed(*nn::AvgPool2d(2)), "AvgPool2d(kernel_size=[2, 2], stride=[2, 2], padding=[0, 0])");
  EXPECT_EQ(printed(*nn::AvgPool2d(nn::AvgPool2dOptions(2).ceil_mode(true))),
            "AvgPool2d(kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], ceil_mode=true)");

  nn::AdaptiveAvgPool2d gap(1);
  EXPECT_EQ(printed(*gap), "AdaptiveAvgPool2d(output_size=[1, 1])");
  EXPECT_EQ(gap(zeros({2, 3, 5, 5})).shape(), (Shape{2, 3, 1, 1}));

  nn::Upsample up(nn::UpsampleOptions().scale_factor(2));
  EXPECT_EQ(printed(*up), "Upsample(scale_factor=[2, 2], mode='nearest')");
  EXPECT_EQ(up(zeros({1, 2, 3, 4})).shape(), (Shape{1, 2, 6, 8}));
  nn::Upsample to_size(nn::UpsampleOptions().size(Size2(7, 9)));
  EXPECT_EQ(printed(*to_size), "Upsample(size=[7, 9], mode='nearest')");
  EXPECT_EQ(to_size(zeros({1, 2, 3, 4})).shape(), (Shape{1, 2, 7, 9}));

  nn::MaxPool2d mp(nn::MaxPool2dOptions(3).stride(2).dilation(2).ceil_mode(true));
  EXPECT_EQ(printed(*mp),
            "MaxPool2d(kernel_size=[3, 3], stride=[2, 2], padding=[0, 0], dilation=[2, 2], ceil_mode=true)");
  EXPECT_EQ(mp(zeros({1, 1, 8, 8})).shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(nn::functional::adaptive_avg_pool2d(x, 2).shape(), (Shape{1, 1, 2, 2}));  // as F:: in PyTorch
}

}  // namespace minidl::pooling_upsample_test
