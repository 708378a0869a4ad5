// conv2d, im2col and col2im: values against direct loops, gradients against central differences,
// the im2col / col2im adjoint identity, and the errors for bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "minidl.h"
#include "test_util.h"

namespace minidl::conv2d_test {

using minidl::testing::error_of;

namespace {

struct Geometry {
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
  bool bias;
  int64_t out_h() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t out_w() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
};

std::ostream& operator<<(std::ostream& os, const Geometry& g) {
  return os << "x [" << g.n << ", " << g.c << ", " << g.h << ", " << g.w << "] weight [" << g.o << ", " << g.c << ", "
            << g.kh << ", " << g.kw << "] stride " << g.sh << "x" << g.sw << " padding " << g.ph << "x" << g.pw
            << " dilation " << g.dh << "x" << g.dw << (g.bias ? " with bias" : " without bias");
}

// Every shape feature the convolution must get right, alone and mixed.
const std::vector<Geometry> kGeometries = {
    {1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1, 1, true},   // batch 1, C=1, O=1
    {2, 3, 7, 5, 4, 3, 2, 1, 1, 1, 1, 1, 1, true},   // odd non-square image, non-square kernel, padding 1
    {2, 3, 7, 5, 4, 3, 3, 2, 2, 0, 0, 1, 1, false},  // stride 2, no bias
    {1, 3, 8, 6, 4, 2, 3, 2, 1, 0, 2, 1, 1, true},   // stride (2, 1), padding (0, 2)
    {2, 1, 9, 7, 4, 3, 3, 1, 1, 2, 2, 2, 2, true},   // dilation 2
    {3, 3, 6, 7, 1, 1, 1, 1, 1, 0, 0, 1, 1, true},   // 1x1 kernel
    {2, 3, 7, 5, 4, 3, 2, 2, 1, 1, 0, 2, 1, false},  // stride, padding and dilation together
    {1, 2, 3, 3, 2, 5, 5, 1, 1, 1, 1, 1, 1, true},   // kernel as large as the padded input: 1x1 output
    {2, 1, 4, 4, 3, 2, 2, 3, 3, 1, 1, 1, 1, true},   // stride larger than the kernel
};

// out[n][o][y][x] = bias[o] + sum over c, ki, kj of x[n][c][y*sh - ph + ki*dh][x*sw - pw + kj*dw] * w[o][c][ki][kj].
template <class T>
std::vector<double> reference_conv(const Geometry& g, const std::vector<T>& x, const std::vector<T>& w,
                                   const std::vector<T>& b) {
  const int64_t oh = g.out_h(), ow = g.out_w();
  std::vector<double> out(static_cast<size_t>(g.n * g.o * oh * ow));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double s = g.bias ? b[o] : 0.0;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t ki = 0; ki < g.kh; ++ki)
              for (int64_t kj = 0; kj < g.kw; ++kj) {
                int64_t ih = y * g.sh - g.ph + ki * g.dh, iw = xx * g.sw - g.pw + kj * g.dw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                s += double(x[((n * g.c + c) * g.h + ih) * g.w + iw]) * double(w[((o * g.c + c) * g.kh + ki) * g.kw + kj]);
              }
          out[((n * g.o + o) * oh + y) * ow + xx] = s;
        }
  return out;
}

// cols[n][(c*kh + ki)*kw + kj][y*out_w + x] = x[n][c][ih][iw], or 0 on padding.
std::vector<double> reference_im2col(const Geometry& g, const std::vector<double>& x) {
  const int64_t oh = g.out_h(), ow = g.out_w(), k = g.c * g.kh * g.kw, l = oh * ow;
  std::vector<double> cols(static_cast<size_t>(g.n * k * l), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t xx = 0; xx < ow; ++xx) {
              int64_t ih = y * g.sh - g.ph + ki * g.dh, iw = xx * g.sw - g.pw + kj * g.dw;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              int64_t row = (c * g.kh + ki) * g.kw + kj;
              cols[(n * k + row) * l + y * ow + xx] = x[((n * g.c + c) * g.h + ih) * g.w + iw];
            }
  return cols;
}

Tensor conv(const Geometry& g, const Tensor& x, const Tensor& w, const Tensor& b) {
  return conv2d(x, w, g.bias ? b : Tensor(), {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw});
}

template <class T>
void check_forward(const Geometry& g, DType dtype, double tol) {
  Tensor x = randn({g.n, g.c, g.h, g.w}, dtype);
  Tensor w = randn({g.o, g.c, g.kh, g.kw}, dtype);
  Tensor b = randn({g.o}, dtype);
  Tensor out = conv(g, x, w, b);
  ASSERT_EQ(out.shape(), (Shape{g.n, g.o, g.out_h(), g.out_w()})) << g;
  std::vector<double> want = reference_conv(g, x.to_vector<T>(), w.to_vector<T>(), b.to_vector<T>());
  std::vector<T> got = out.to_vector<T>();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << g << " at element " << i;
  }
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "expected \"" << part << "\" in: " << message;
}

}  // namespace

TEST(Conv2d, ForwardMatchesDirectLoopsFloat32) {
  manual_seed(1);
  for (const Geometry& g : kGeometries) check_forward<float>(g, kFloat32, 1e-5);
}

TEST(Conv2d, ForwardMatchesDirectLoopsFloat64) {
  manual_seed(2);
  for (const Geometry& g : kGeometries) check_forward<double>(g, kFloat64, 1e-12);
}

TEST(Conv2d, NonContiguousInput) {
  manual_seed(3);
  Geometry g{2, 3, 5, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, true};
  Tensor xt = randn({g.n, g.c, g.w, g.h}, kFloat64);
  Tensor x = xt.transpose(2, 3);  // [N, C, H, W] with swapped strides
  ASSERT_FALSE(x.is_contiguous());
  Tensor w = randn({g.o, g.c, g.kh, g.kw}, kFloat64), b = randn({g.o}, kFloat64);
  EXPECT_EQ(conv(g, x, w, b).to_vector<double>(), conv(g, x.contiguous(), w, b).to_vector<double>());
}

TEST(Conv2d, GradcheckAllInputs) {
  manual_seed(4);
  const std::vector<Geometry> cases = {
      {2, 2, 5, 4, 3, 3, 2, 1, 1, 0, 0, 1, 1, true},  // plain, non-square
      {2, 2, 5, 6, 2, 3, 3, 2, 2, 1, 1, 1, 1, true},  // stride 2, padding 1
      {1, 2, 6, 5, 2, 2, 3, 2, 1, 0, 2, 1, 1, true},  // batch 1, stride (2, 1), padding (0, 2)
      {2, 1, 7, 6, 2, 3, 2, 1, 2, 1, 0, 2, 2, true},  // dilation 2 with stride and padding
  };
  for (const Geometry& g : cases) {
    Tensor x = randn({g.n, g.c, g.h, g.w}, kFloat64).requires_grad_();
    Tensor w = randn({g.o, g.c, g.kh, g.kw}, kFloat64).requires_grad_();
    Tensor b = randn({g.o}, kFloat64).requires_grad_();
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return conv(g, in[0], in[1], in[2]); }, {x, w, b});
    EXPECT_TRUE(r) << g << ": " << r.message;
  }
}

TEST(Conv2d, GradcheckOneInputAtATime) {
  // Backward computes only what is asked for; each gradient must be right on its own.
  manual_seed(5);
  Geometry g{2, 2, 5, 5, 3, 3, 3, 2, 1, 1, 0, 1, 2, false};
  Tensor x = randn({g.n, g.c, g.h, g.w}, kFloat64);
  Tensor w = randn({g.o, g.c, g.kh, g.kw}, kFloat64);
  auto f = [&](const std::vector<Tensor>& in) { return conv(g, in[0], in[1], Tensor()); };
  auto rx = gradcheck(f, {x.clone().requires_grad_(), w});
  EXPECT_TRUE(rx) << "x only: " << rx.message;
  auto rw = gradcheck(f, {x, w.clone().requires_grad_()});
  EXPECT_TRUE(rw) << "weight only: " << rw.message;
}

TEST(Conv2d, Float32GradientsMatchFloat64) {
  manual_seed(6);
  Geometry g{4, 3, 9, 8, 5, 3, 3, 1, 2, 1, 1, 1, 1, true};
  Tensor x64 = randn({g.n, g.c, g.h, g.w}, kFloat64), w64 = randn({g.o, g.c, g.kh, g.kw}, kFloat64);
  Tensor b64 = randn({g.o}, kFloat64), seed64 = randn({g.n, g.o, g.out_h(), g.out_w()}, kFloat64);
  std::vector<Tensor> grads[2];
  for (DType dtype : {kFloat64, kFloat32}) {
    // Fresh leaves per dtype: to() returns the same handle when the dtype already matches.
    Tensor x = x64.to(dtype).detach().requires_grad_(), w = w64.to(dtype).detach().requires_grad_();
    Tensor b = b64.to(dtype).detach().requires_grad_();
    conv(g, x, w, b).backward(seed64.to(dtype));
    grads[dtype == kFloat32] = {x.grad().to(kFloat64), w.grad().to(kFloat64), b.grad().to(kFloat64)};
  }
  for (size_t k = 0; k < 3; ++k) {
    std::vector<double> want = grads[0][k].to_vector<double>(), got = grads[1][k].to_vector<double>();
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << k << " " << i;
  }
}

TEST(Im2col, MatchesReference) {
  manual_seed(7);
  for (const Geometry& g : kGeometries) {
    Tensor x = randn({g.n, g.c, g.h, g.w}, kFloat64);
    Tensor cols = im2col(x, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw});
    ASSERT_EQ(cols.shape(), (Shape{g.n, g.c * g.kh * g.kw, g.out_h() * g.out_w()})) << g;
    EXPECT_EQ(cols.to_vector<double>(), reference_im2col(g, x.to_vector<double>())) << g;
    // float32 runs its own instantiation of the kernel; values are copied, so they match exactly.
    std::vector<float> cols32 = im2col(x.to(kFloat32), {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw})
                                    .to_vector<float>();
    EXPECT_EQ(cols32, cols.to(kFloat32).to_vector<float>()) << g;
  }
}

TEST(Im2col, LargeEnoughToRunInParallel) {
  // The kernels split planes across threads only past a size threshold; this shape crosses it.
  manual_seed(10);
  Geometry g{3, 8, 30, 29, 1, 3, 3, 1, 2, 1, 1, 1, 1, false};
  Tensor x = randn({g.n, g.c, g.h, g.w}, kFloat64);
  Tensor cols = im2col(x, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw});
  ASSERT_GT(cols.numel(), 1 << 15);
  EXPECT_EQ(cols.to_vector<double>(), reference_im2col(g, x.to_vector<double>()));
  Tensor y = randn(cols.shape(), kFloat64);
  double lhs = (cols * y).sum().item<double>();
  double rhs = (x * col2im(y, {g.h, g.w}, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw})).sum().item<double>();
  EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::abs(lhs)));
}

TEST(Im2col, Col2imIsTheAdjoint) {
  // <im2col(x), y> == <x, col2im(y)> for every x, y: col2im is exactly im2col's transpose.
  manual_seed(8);
  for (const Geometry& g : kGeometries) {
    Tensor x = randn({g.n, g.c, g.h, g.w}, kFloat64);
    Tensor y = randn({g.n, g.c * g.kh * g.kw, g.out_h() * g.out_w()}, kFloat64);
    double lhs = (im2col(x, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw}) * y).sum().item<double>();
    Tensor back = col2im(y, {g.h, g.w}, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw});
    ASSERT_EQ(back.shape(), x.shape()) << g;
    double rhs = (x * back).sum().item<double>();
    EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(lhs))) << g;
  }
}

TEST(Im2col, Col2imCountsOverlaps) {
  // col2im of all-ones counts how many windows cover each pixel: 3x3 kernel, stride 1, padding 1
  // over 4x4 gives 4 at corners, 6 on edges, 9 inside.
  Tensor cols = ones({1, 9, 16}, kFloat64);
  std::vector<double> counts = col2im(cols, 4, 3, 1, 1).to_vector<double>();
  std::vector<double> want = {4, 6, 6, 4, 6, 9, 9, 6, 6, 9, 9, 6, 4, 6, 6, 4};
  EXPECT_EQ(counts, want);
  // Writes overwrite: a second call into fresh memory gives the same, not double.
  EXPECT_EQ(col2im(cols, 4, 3, 1, 1).to_vector<double>(), want);
}

TEST(Im2col, Gradcheck) {
  manual_seed(9);
  Geometry g{2, 2, 5, 4, 1, 3, 2, 2, 1, 1, 1, 2, 1, false};
  Tensor x = randn({g.n, g.c, g.h, g.w}, kFloat64).requires_grad_();
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return im2col(in[0], {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw}); },
                     {x});
  EXPECT_TRUE(r) << "im2col: " << r.message;
  Tensor y = randn({g.n, g.c * g.kh * g.kw, g.out_h() * g.out_w()}, kFloat64).requires_grad_();
  auto r2 = gradcheck(
      [&](const std::vector<Tensor>& in) { return col2im(in[0], {g.h, g.w}, {g.kh, g.kw}, {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw}); },
      {y});
  EXPECT_TRUE(r2) << "col2im: " << r2.message;
}

TEST(Conv2d, BadInputErrors) {
  Tensor x = zeros({1, 3, 5, 5});
  Tensor w = zeros({4, 3, 3, 3});
  expect_contains(error_of([&] { conv2d(zeros({3, 5, 5}), w); }), "expected x of shape [N, C, H, W] (4-D), got shape [3, 5, 5]");
  expect_contains(error_of([&] { conv2d(x, zeros({4, 3, 3})); }), "expected weight of shape [O, C, kh, kw] (4-D), got shape [4, 3, 3]");
  std::string mismatch = error_of([&] { conv2d(x, zeros({4, 2, 3, 3})); });
  expect_contains(mismatch, "[4, 2, 3, 3]");
  expect_contains(mismatch, "[1, 3, 5, 5]");
  expect_contains(mismatch, "channels");
  expect_contains(error_of([&] { conv2d(x, w, zeros({3})); }), "expected bias of shape [4]");
  expect_contains(error_of([&] { conv2d(x, w, zeros({4, 1})); }), "expected bias of shape [4]");
  expect_contains(error_of([&] { conv2d(x, zeros({4, 3, 3, 3}, kFloat64)); }), "dtype");
  expect_contains(error_of([&] { conv2d(x, w, Tensor(), 0); }), "positive stride");
  expect_contains(error_of([&] { conv2d(x, w, Tensor(), 1, -1); }), "non-negative padding");
  expect_contains(error_of([&] { conv2d(x, w, Tensor(), 1, 0, 0); }), "positive dilation");
  // A 7x7 kernel over 5x5 with padding 0: no output position; also through dilation (3x3 at 3 spans 7).
  std::string big = error_of([&] { conv2d(x, zeros({4, 3, 7, 7})); });
  expect_contains(big, "larger than the input 5x5");
  expect_contains(big, "padding 0x0");
  expect_contains(error_of([&] { conv2d(x, w, Tensor(), 1, 0, 3); }), "dilation 3x3 spans 7x7");
  EXPECT_NO_THROW(conv2d(x, zeros({4, 3, 7, 7}), Tensor(), 1, 1));  // padding 1 makes it fit
  expect_contains(error_of([&] { im2col(zeros({5, 5}), 3); }), "4-D");
  expect_contains(error_of([&] { col2im(zeros({1, 8, 9}), 5, 3); }), "not a multiple");
  expect_contains(error_of([&] { col2im(zeros({1, 9, 8}), 5, 3); }), "expected 9 columns");
}

}  // namespace minidl::conv2d_test
