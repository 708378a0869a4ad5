// conv_transpose2d and nn::ConvTranspose2d: output sizes, a hand-computed example, values against a
// direct scatter loop, the adjoint identity with conv2d, gradients against central differences,
// PyTorch's initialization and output_size, and the errors for bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "minidl.h"
#include "test_util.h"
#include "nn/nn.h"

namespace minidl::conv_transpose2d_test {

using minidl::testing::error_of;

namespace {

struct Geometry {
  int64_t n, c_in, h, w, c_out, kh, kw, sh, sw, ph, pw, oph, opw, groups, dh, dw;
  bool bias;
  int64_t out_h() const { return (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1; }
  int64_t out_w() const { return (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1; }
  Shape weight_shape() const { return {c_in, c_out / groups, kh, kw}; }
  Tensor run(const Tensor& x, const Tensor& wt, const Tensor& b) const {
    return conv_transpose2d(x, wt, bias ? b : Tensor(), {sh, sw}, {ph, pw}, {oph, opw}, groups, {dh, dw});
  }
};

std::ostream& operator<<(std::ostream& os, const Geometry& g) {
  return os << "x [" << g.n << ", " << g.c_in << ", " << g.h << ", " << g.w << "] -> " << g.c_out
            << " channels, kernel " << g.kh << "x" << g.kw << " stride " << g.sh << "x" << g.sw << " padding " << g.ph << "x" << g.pw
            << " output_padding " << g.oph << "x" << g.opw << " groups " << g.groups << " dilation " << g.dh << "x"
            << g.dw << (g.bias ? " with bias" : "");
}

const std::vector<Geometry> kGeometries = {
    {1, 1, 2, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 1, false},  // the smallest: 2x2 -> 3x3
    {2, 3, 4, 3, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, true},   // stride 2, padding 1, output_padding 1
    {1, 2, 3, 5, 4, 3, 2, 2, 1, 0, 1, 1, 0, 1, 1, 1, true},   // non-square everything
    {2, 4, 3, 3, 6, 3, 3, 1, 1, 1, 1, 0, 0, 2, 1, 1, true},   // groups 2
    {1, 2, 4, 4, 3, 2, 3, 1, 2, 0, 1, 0, 1, 1, 2, 2, false},  // dilation 2 with stride (1, 2)
    {2, 1, 3, 2, 2, 2, 2, 1, 1, 0, 0, 1, 1, 1, 2, 2, true},   // output_padding 1 >= stride 1, allowed by dilation 2
    {1, 6, 2, 3, 3, 1, 1, 3, 2, 0, 0, 2, 1, 3, 1, 1, true},   // 1x1 kernel, groups 3, stride > kernel
};

// out[n][g*Co + o][ih*s - p + ki*d][iw*s - p + kj*d] += x[n][g*Ci + i][ih][iw] * w[g*Ci + i][o][ki][kj].
std::vector<double> reference(const Geometry& g, const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>& b) {
  const int64_t OH = g.out_h(), OW = g.out_w(), ci = g.c_in / g.groups, co = g.c_out / g.groups;
  std::vector<double> out(static_cast<size_t>(g.n * g.c_out * OH * OW), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c_out; ++c)
      for (int64_t i = 0; i < OH * OW; ++i) out[(n * g.c_out + c) * OH * OW + i] = g.bias ? b[c] : 0.0;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      for (int64_t i = 0; i < ci; ++i)
        for (int64_t o = 0; o < co; ++o)
          for (int64_t ih = 0; ih < g.h; ++ih)
            for (int64_t iw = 0; iw < g.w; ++iw)
              for (int64_t ki = 0; ki < g.kh; ++ki)
                for (int64_t kj = 0; kj < g.kw; ++kj) {
                  const int64_t oh = ih * g.sh - g.ph + ki * g.dh, ow = iw * g.sw - g.pw + kj * g.dw;
                  if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                  const int64_t cin = grp * ci + i, cout = grp * co + o;
                  out[((n * g.c_out + cout) * OH + oh) * OW + ow] +=
                      x[((n * g.c_in + cin) * g.h + ih) * g.w + iw] * w[((cin * co + o) * g.kh + ki) * g.kw + kj];
                }
  return out;
}

double inner_product(const Tensor& a, const Tensor& b) { return (a * b).sum().item<double>(); }

}  // namespace

TEST(ConvTranspose2d, OutputSizes) {
  // (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1, per axis.
  struct Case {
    int64_t in, k, s, p, op, d, want;
  };
  const std::vector<Case> cases = {
      {5, 3, 1, 0, 0, 1, 7},  {5, 3, 2, 0, 0, 1, 11}, {5, 3, 2, 1, 0, 1, 9},  {5, 3, 2, 1, 1, 1, 10},
      {4, 4, 2, 1, 0, 1, 8},  {6, 3, 3, 1, 2, 1, 18}, {3, 2, 1, 0, 1, 2, 6},  {1, 1, 1, 0, 0, 1, 1},
      {7, 5, 1, 2, 0, 1, 7},  {2, 3, 2, 2, 1, 1, 2},
  };
  for (const Case& c : cases) {
    Tensor out = conv_transpose2d(zeros({1, 1, c.in, 3}), zeros({1, 1, c.k, 1}), Tensor(), {c.s, 1}, {c.p, 0},
                                  {c.op, 0}, 1, {c.d, 1});
    EXPECT_EQ(out.shape(), (Shape{1, 1, c.want, 3})) << "in " << c.in << " k " << c.k << " stride " << c.s
                                                      << " padding " << c.p << " output_padding " << c.op
                                                      << " dilation " << c.d;
  }
  // PyTorch's documented example: ConvTranspose2d(16, 33, 3, stride=2) on 50x100 gives 101x201.
  nn::ConvTranspose2d m(nn::ConvTranspose2dOptions(2, 3, 3).stride(2));
  EXPECT_EQ(m(zeros({1, 2, 50, 100})).shape(), (Shape{1, 3, 101, 201}));
}

TEST(ConvTranspose2d, HandComputed) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
  // Stride 1, a 2x2 kernel of ones: each input adds itself to a 2x2 block.
  Tensor out = conv_transpose2d(x, ones({1, 1, 2, 2}, kFloat64));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 3, 2, 4, 10, 6, 3, 7, 4}));
  // Padding 1 crops a border: the centre remains.
  EXPECT_EQ(conv_transpose2d(x, ones({1, 1, 2, 2}, kFloat64), Tensor(), 1, 1).to_vector<double>(),
            (std::vector<double>{10}));
  // Stride 2 with kernel [[1, 2], [3, 4]] and bias 0.5: the blocks do not overlap.
  Tensor w = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor b = Tensor::from_vector<double>({0.5}, {1});
  EXPECT_EQ(conv_transpose2d(x, w, b, 2).to_vector<double>(),
            (std::vector<double>{1.5, 2.5, 2.5, 4.5, 3.5, 4.5, 6.5, 8.5, 3.5, 6.5, 4.5, 8.5, 9.5, 12.5, 12.5, 16.5}));
  // output_padding adds a last row and column that no window reaches: only the bias.
  std::vector<double> padded = conv_transpose2d(x, w, b, 2, 0, 1).to_vector<double>();
  ASSERT_EQ(padded.size(), 25u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(padded[4 * 5 + i], 0.5);
    EXPECT_EQ(padded[i * 5 + 4], 0.5);
  }
}

TEST(ConvTranspose2d, ForwardMatchesLoops) {
  manual_seed(11);
  for (const Geometry& g : kGeometries) {
    Tensor x = randn({g.n, g.c_in, g.h, g.w}, kFloat64), w = randn(g.weight_shape(), kFloat64),
           b = randn({g.c_out}, kFloat64);
    Tensor out = g.run(x, w, b);
    ASSERT_EQ(out.shape(), (Shape{g.n, g.c_out, g.out_h(), g.out_w()})) << g;
    std::vector<double> want = reference(g, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>());
    std::vector<double> got = out.to_vector<double>(), got32 = g.run(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32))
                                                                   .to(kFloat64)
                                                                   .to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-12) << g << " element " << i;
      EXPECT_NEAR(got32[i], want[i], 1e-4) << g << " element " << i << " (float32)";
    }
  }
}

TEST(ConvTranspose2d, IsTheAdjointOfConv2d) {
  // <conv2d(x, w), y> == <x, conv_transpose2d(y, w)>, with output_padding chosen to give x's size.
  manual_seed(12);
  struct Case {
    Shape x;
    int64_t o, k;
    Size2 stride, padding, dilation;
  };
  const std::vector<Case> cases = {
      {{2, 3, 7, 6}, 4, 3, 1, 0, 1}, {{1, 2, 8, 7}, 3, 3, 2, 1, 1},   {{2, 2, 9, 8}, 2, 2, {3, 2}, {1, 0}, 1},
      {{1, 3, 9, 9}, 2, 3, 2, 2, 2}, {{2, 1, 6, 5}, 3, 1, {2, 3}, 0, 1},
  };
  for (const Case& c : cases) {
    Tensor x = randn(c.x, kFloat64), w = randn({c.o, c.x[1], c.k, c.k}, kFloat64);
    Tensor cx = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation);
    Tensor y = randn(cx.shape(), kFloat64);
    const Size2 span{c.dilation.h * (c.k - 1) + 1, c.dilation.w * (c.k - 1) + 1};
    const Size2 op{(c.x[2] + 2 * c.padding.h - span.h) % c.stride.h, (c.x[3] + 2 * c.padding.w - span.w) % c.stride.w};
    Tensor ty = conv_transpose2d(y, w, Tensor(), c.stride, c.padding, op, 1, c.dilation);
    ASSERT_EQ(ty.shape(), x.shape());
    EXPECT_NEAR(inner_product(cx, y), inner_product(x, ty), 1e-10 * (1 + std::abs(inner_product(cx, y))));
    // And the other way round: the input gradient of conv2d is conv_transpose2d of the output gradient.
    Tensor xl = x.clone().requires_grad_();
    conv2d(xl, w, Tensor(), c.stride, c.padding, c.dilation).backward(y);
    std::vector<double> gx = xl.grad().to_vector<double>(), t = ty.to_vector<double>();
    for (size_t i = 0; i < gx.size(); ++i) EXPECT_NEAR(gx[i], t[i], 1e-10);
  }
}

TEST(ConvTranspose2d, Gradcheck) {
  manual_seed(13);
  for (const Geometry& g : kGeometries) {
    Tensor x = randn({g.n, g.c_in, g.h, g.w}, kFloat64).requires_grad_();
    Tensor w = randn(g.weight_shape(), kFloat64).requires_grad_();
    Tensor b = randn({g.c_out}, kFloat64).requires_grad_();
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return g.run(in[0], in[1], in[2]); }, {x, w, b});
    EXPECT_TRUE(r) << g << ": " << r.message;
  }
  // Only some inputs wanting a gradient.
  const Geometry& g = kGeometries[1];
  Tensor x = randn({g.n, g.c_in, g.h, g.w}, kFloat64), w = randn(g.weight_shape(), kFloat64).requires_grad_();
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return g.run(x, in[0], Tensor()); }, {w});
  EXPECT_TRUE(r) << r.message;
}

TEST(ConvTranspose2d, ModuleInitAndOutputSize) {
  manual_seed(14);
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(4, 6, 3).stride(2).padding(1).groups(2));
  EXPECT_EQ(up->weight.shape(), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(up->bias.shape(), (Shape{6}));
  // PyTorch: kaiming_uniform_(a=sqrt(5)) over fan_in = weight.size(1) * kh * kw = 27, so |w| and |b|
  // stay below 1 / sqrt(27).
  const double bound = 1.0 / std::sqrt(27.0);
  for (double v : up->weight.to(kFloat64).to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  for (double v : up->bias.to(kFloat64).to_vector<double>()) EXPECT_LE(std::abs(v), bound);
  // PyTorch's doc example: a stride-2 conv takes 12x12 to 6x6; the transposed conv given
  // output_size returns to 12x12 (without it, 11x11).
  nn::Conv2d down(nn::Conv2dOptions(4, 4, 3).stride(2).padding(1));
  Tensor h = down(randn({1, 4, 12, 12}));
  ASSERT_EQ(h.shape(), (Shape{1, 4, 6, 6}));
  EXPECT_EQ(up(h).shape(), (Shape{1, 6, 11, 11}));
  EXPECT_EQ(up->forward(h, {12, 12}).shape(), (Shape{1, 6, 12, 12}));
  std::string far = error_of([&] { up->forward(h, {13, 12}); });
  EXPECT_NE(far.find("requested output size 13x12 is not reachable"), std::string::npos) << far;
  EXPECT_NE(far.find("between 11x11 and 12x12"), std::string::npos) << far;

  std::ostringstream os;
  os << *up;
  EXPECT_EQ(os.str(), "ConvTranspose2d(4, 6, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], groups=2)");
  std::ostringstream os2;
  os2 << *nn::ConvTranspose2d(
      nn::ConvTranspose2dOptions(1, 2, {2, 3}).output_padding({0, 1}).stride(2).dilation(1).bias(false));
  EXPECT_EQ(os2.str(), "ConvTranspose2d(1, 2, kernel_size=[2, 3], stride=[2, 2], output_padding=[0, 1], bias=false)");
  // A training step moves the weights.
  Tensor before = up->weight.clone();
  up(h).sum().backward();
  ASSERT_TRUE(up->weight.grad().defined());
  ASSERT_TRUE(up->bias.grad().defined());
  EXPECT_EQ(up->bias.grad().to_vector<float>(), std::vector<float>(6, 121.0f));  // one per output pixel
}

TEST(ConvTranspose2d, Errors) {
  Tensor x = zeros({1, 2, 4, 4}), w = zeros({2, 3, 3, 3});
  std::string rank = error_of([&] { conv_transpose2d(zeros({2, 4, 4}), w); });
  EXPECT_NE(rank.find("conv_transpose2d: expected x of shape [N, C_in, H, W] (4-D), got shape [2, 4, 4]"),
            std::string::npos)
      << rank;
  std::string wrank = error_of([&] { conv_transpose2d(x, zeros({2, 3, 3})); });
  EXPECT_NE(wrank.find("expected weight of shape [C_in, C_out / groups, kh, kw] (4-D), got shape [2, 3, 3]"),
            std::string::npos)
      << wrank;
  std::string channels = error_of([&] { conv_transpose2d(zeros({1, 3, 4, 4}), w); });
  EXPECT_NE(channels.find("weight of shape [2, 3, 3, 3] expects 2 input channels (its first dim), but x of shape "
                          "[1, 3, 4, 4] has 3 channels"),
            std::string::npos)
      << channels;
  std::string op = error_of([&] { conv_transpose2d(x, w, Tensor(), 2, 0, 2); });
  EXPECT_NE(op.find("output_padding must be non-negative and smaller than either the stride or the dilation, got "
                    "output_padding 2x2 with stride 2x2 and dilation 1x1"),
            std::string::npos)
      << op;
  EXPECT_NE(error_of([&] { conv_transpose2d(x, w, Tensor(), 1, 0, 1); }).find("output_padding"), std::string::npos);
  EXPECT_EQ(error_of([&] { conv_transpose2d(x, w, Tensor(), 1, 0, 1, 1, 2); }), "(no error)");  // 1 < dilation 2
  std::string small = error_of([&] { conv_transpose2d(zeros({1, 2, 1, 1}), w, Tensor(), 1, 2); });
  EXPECT_NE(small.find("the output would be -1x-1"), std::string::npos) << small;
  EXPECT_NE(small.find("expected a positive size"), std::string::npos) << small;
  std::string bias = error_of([&] { conv_transpose2d(x, w, zeros({2})); });
  EXPECT_NE(bias.find("expected bias of shape [3]"), std::string::npos) << bias;
  std::string groups =
      error_of([&] { conv_transpose2d(zeros({1, 3, 4, 4}), zeros({3, 1, 3, 3}), Tensor(), 1, 0, 0, 2); });
  EXPECT_NE(groups.find("expected the 3 input channels to divide into 2 groups"), std::string::npos) << groups;
  EXPECT_NE(error_of([&] { conv_transpose2d(x, w, Tensor(), 0); }).find("positive stride"), std::string::npos);
  EXPECT_NE(error_of([&] { conv_transpose2d(x, zeros({2, 3, 3, 3}, kFloat64)); }).find("dtype"), std::string::npos);
  EXPECT_NE(error_of([] { nn::ConvTranspose2d(nn::ConvTranspose2dOptions(3, 4, 3).groups(2)); }).find("divide"),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::ConvTranspose2d(nn::ConvTranspose2dOptions(2, 4, 3).output_padding(1)); })
                .find("output_padding"),
            std::string::npos);
}

}  // namespace minidl::conv_transpose2d_test
