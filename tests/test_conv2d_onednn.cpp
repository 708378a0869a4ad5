// The CPU convolutions' oneDNN path (ops/cpu/onednn_conv.cpp): the forward and both gradients equal
// the im2col path's within float32 rounding for strides, padding, dilation, odd sizes and one
// image; the results do not depend on the thread count; and the float64 convolutions and the small
// windows stay on im2col.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/threads.h"
#include "minidl.h"
#include "ops/backend_setting.h"

namespace minidl::conv2d_onednn_test {

namespace {

struct Case {
  std::string name;
  Shape x, w;
  Size2 stride, padding, dilation;
};

const std::vector<Case> kCases = {
    {"mnist conv2", {4, 32, 26, 26}, {64, 32, 3, 3}, 1, 0, 1},
    {"strided padded", {3, 16, 11, 9}, {8, 16, 3, 3}, 2, 1, 1},
    {"dilated, non-square kernel", {2, 12, 13, 10}, {5, 12, 3, 2}, 1, {2, 1}, {2, 1}},
    {"one image, 1x1 kernel", {1, 80, 5, 7}, {6, 80, 1, 1}, 1, 0, 1},
};

struct Result {
  Tensor out, gx, gw;
};

// Forward and backward of conv2d with `backend`, the upstream gradient fixed by the seed.
Result run(const Case& c, ConvBackend backend) {
  set_conv_backend(backend);
  manual_seed(5);
  Tensor x = randn(c.x).requires_grad_(), w = randn(c.w).requires_grad_();
  Tensor out = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation);
  (out * randn(out.shape())).sum().backward();
  set_conv_backend(ConvBackend::Auto);
  return {out.detach(), x.grad(), w.grad()};
}

// max |a - b| / (1 + max |b|): float32 sums of a few hundred products in different orders.
double relative_difference(const Tensor& a, const Tensor& b) {
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(av[i] - bv[i])));
    scale = std::max(scale, static_cast<double>(std::abs(bv[i])));
  }
  return diff / (1 + scale);
}

bool same_bits(const Tensor& a, const Tensor& b) { return a.to_vector<float>() == b.to_vector<float>(); }

}  // namespace

TEST(Conv2dOnednn, MatchesTheIm2colPath) {
  if (!onednn_available()) GTEST_SKIP() << "built without oneDNN (cmake/onednn.cmake): every convolution is im2col";
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Result library = run(c, ConvBackend::Auto), im2col = run(c, ConvBackend::Im2col);
    ASSERT_EQ(library.out.shape(), im2col.out.shape());
    EXPECT_LT(relative_difference(library.out, im2col.out), 1e-5);
    EXPECT_LT(relative_difference(library.gx, im2col.gx), 1e-5);
    EXPECT_LT(relative_difference(library.gw, im2col.gw), 1e-5);
  }
}

TEST(Conv2dOnednn, TheSameBitsOnOneToFourThreads) {
  if (!onednn_available()) GTEST_SKIP() << "built without oneDNN (cmake/onednn.cmake)";
  const int threads = get_num_threads();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    set_num_threads(1);
    const Result one = run(c, ConvBackend::Auto);
    for (int t = 2; t <= 4; ++t) {
      set_num_threads(t);
      const Result more = run(c, ConvBackend::Auto);
      EXPECT_TRUE(same_bits(one.out, more.out)) << t << " threads";
      EXPECT_TRUE(same_bits(one.gx, more.gx)) << t << " threads";
      EXPECT_TRUE(same_bits(one.gw, more.gw)) << t << " threads";
    }
  }
  set_num_threads(threads);
}

// float64 has no oneDNN path, and a 3x3 window over one channel (9 products per output) is left to
// im2col: both give exactly the im2col path's bits.
TEST(Conv2dOnednn, Float64AndSmallWindowsStayOnIm2col) {
  const Case small{"one channel 3x3", {2, 1, 9, 9}, {4, 1, 3, 3}, 1, 0, 1};
  const Result a = run(small, ConvBackend::Auto), b = run(small, ConvBackend::Im2col);
  EXPECT_TRUE(same_bits(a.out, b.out));
  EXPECT_TRUE(same_bits(a.gx, b.gx));
  set_conv_backend(ConvBackend::Auto);
  manual_seed(3);
  Tensor x = randn({2, 16, 6, 6}, kFloat64), w = randn({3, 16, 3, 3}, kFloat64);
  Tensor auto_out = conv2d(x, w, Tensor());
  set_conv_backend(ConvBackend::Im2col);
  Tensor im2col_out = conv2d(x, w, Tensor());
  set_conv_backend(ConvBackend::Auto);
  EXPECT_EQ(auto_out.to_vector<double>(), im2col_out.to_vector<double>());
}

}  // namespace minidl::conv2d_onednn_test
