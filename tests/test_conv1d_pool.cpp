// conv1d (and nn::Conv1d), max_pool1d / avg_pool1d (and their modules), adaptive_max_pool2d (and
// nn::AdaptiveMaxPool2d): values by loops or by hand, float64 gradchecks, and the errors.
#include <gtest/gtest.h>

#include "minidl.h"
#include "nn/nn.h"
#include "ops/adaptive_max_pool2d.h"
#include "ops/conv1d.h"
#include "float64_util.h"
#include "test_util.h"

namespace minidl::conv1d_pool_test {

using minidl::testing::expect_error;
using minidl::testing::f64;
using minidl::testing::values;
using minidl::testing::leaf;
using minidl::testing::expect_gradcheck;

namespace {

// The definition, by loops: x [N, C, L], w [O, C / groups, K].
std::vector<double> conv1d_loops(const Tensor& x, const Tensor& w, const Tensor& b, int64_t s, int64_t p, int64_t d,
                                 int64_t groups, int64_t out_len) {
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2), O = w.size(0), K = w.size(2), Cg = C / groups;
  std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>(O, 0.0);
  std::vector<double> out(static_cast<size_t>(N * O * out_len));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t l = 0; l < out_len; ++l) {
        double s_ = bv[o];
        const int64_t g = o / (O / groups);
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t at = l * s - p + k * d;
            if (at >= 0 && at < L) s_ += xv[(n * C + g * Cg + c) * L + at] * wv[(o * Cg + c) * K + k];
          }
        out[(n * O + o) * out_len + l] = s_;
      }
  return out;
}

}  // namespace

TEST(Conv1d, MatchesLoops) {
  struct Case {
    int64_t stride, padding, dilation, groups;
  };
  for (Case c : {Case{1, 0, 1, 1}, Case{2, 1, 1, 1}, Case{1, 2, 2, 1}, Case{3, 1, 1, 2}}) {
    SCOPED_TRACE(::testing::Message() << "stride " << c.stride << " padding " << c.padding << " dilation " << c.dilation
                                    << " groups " << c.groups);
    Tensor x = randn({2, 4, 9}, kFloat64), w = randn({6, 4 / c.groups, 3}, kFloat64), b = randn({6}, kFloat64);
    Tensor y = conv1d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    const int64_t out_len = (9 + 2 * c.padding - c.dilation * 2 - 1) / c.stride + 1;
    ASSERT_EQ(y.shape(), (Shape{2, 6, out_len}));
    std::vector<double> want = conv1d_loops(x, w, b, c.stride, c.padding, c.dilation, c.groups, out_len);
    std::vector<double> got = values(y);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  }
  // [C, L] without a batch.
  Tensor x = randn({4, 7}, kFloat64), w = randn({2, 4, 3}, kFloat64);
  Tensor y = conv1d(x, w);
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  std::vector<double> want = conv1d_loops(unsqueeze(x, 0), w, Tensor(), 1, 0, 1, 1, 5);
  std::vector<double> got = values(y);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
  expect_gradcheck("conv1d", [](auto& in) { return conv1d(in[0], in[1], in[2], 2, 1, 2); },
                   {leaf({2, 3, 8}), leaf({4, 3, 3}), leaf({4})});
  expect_gradcheck("conv1d groups", [](auto& in) { return conv1d(in[0], in[1], in[2], 1, 1, 1, 2); },
                   {leaf({1, 4, 5}), leaf({2, 2, 2}), leaf({2})});
}

TEST(Conv1d, Module) {
  nn::Conv1d conv(nn::Conv1dOptions(4, 6, 3).padding(1).groups(2));
  EXPECT_EQ(conv->weight.shape(), (Shape{6, 2, 3}));
  EXPECT_EQ(conv->parameters().size(), 2u);
  EXPECT_EQ(conv->forward(randn({2, 4, 10})).shape(), (Shape{2, 6, 10}));
  nn::Conv1d plain(3, 5, 2);
  EXPECT_FALSE(plain->extra_repr().empty());
  EXPECT_EQ(plain->forward(randn({3, 4})).shape(), (Shape{5, 3}));
  nn::Conv1d no_bias(nn::Conv1dOptions(3, 5, 2).bias(false));
  EXPECT_EQ(no_bias->parameters().size(), 1u);
}

TEST(Pool1d, ValuesAndGradients) {
  Tensor x = f64({1, 5, 2, 4, 3, 0, 7}, {1, 1, 7});
  EXPECT_EQ(values(max_pool1d(x, 2)), (std::vector<double>{5, 4, 3}));
  EXPECT_EQ(values(max_pool1d(x, 3, 2, 1)), (std::vector<double>{5, 5, 4, 7}));
  EXPECT_EQ(values(max_pool1d(x, 2, 2, 0, 1, /*ceil_mode=*/true)), (std::vector<double>{5, 4, 3, 7}));
  EXPECT_EQ(values(avg_pool1d(x, 2)), (std::vector<double>{3, 3, 1.5}));
  EXPECT_EQ(values(avg_pool1d(x, 3, 2, 1)), (std::vector<double>{2, 11.0 / 3, 7.0 / 3, 7.0 / 3}));
  EXPECT_EQ(values(avg_pool1d(x, 3, 2, 1, false, /*count_include_pad=*/false)),
            (std::vector<double>{3, 11.0 / 3, 7.0 / 3, 3.5}));
  EXPECT_EQ(max_pool1d(zeros({3, 8}), 2).shape(), (Shape{3, 4}));  // [C, L]
  expect_gradcheck("max_pool1d", [](auto& in) { return max_pool1d(in[0], 3, 2, 1, 2); }, {leaf({2, 3, 9})});
  expect_gradcheck("avg_pool1d", [](auto& in) { return avg_pool1d(in[0], 3, 2, 1, true, false); }, {leaf({2, 3, 8})});
  nn::MaxPool1d mp(nn::MaxPool1dOptions(3).stride(2).padding(1));
  nn::AvgPool1d ap(nn::AvgPool1dOptions(2));
  EXPECT_EQ(values(mp->forward(x)), (std::vector<double>{5, 5, 4, 7}));
  EXPECT_EQ(values(ap->forward(x)), (std::vector<double>{3, 3, 1.5}));
  EXPECT_EQ(mp->name(), "MaxPool1d");
}

TEST(AdaptiveMaxPool2d, ValuesIndicesGradients) {
  // 3 x 5 to 2 x 3: rows [0, 2) and [1, 3); columns [0, 2), [1, 4), [3, 5).
  Tensor x = f64({1, 9, 2, 0, 3,  //
                  4, 5, 8, 6, 1,  //
                  7, 2, 3, 4, 5},
                 {1, 1, 3, 5});
  auto [v, i] = adaptive_max_pool2d(x, {2, 3});
  EXPECT_EQ(v.shape(), (Shape{1, 1, 2, 3}));
  EXPECT_EQ(values(v), (std::vector<double>{9, 9, 6, 7, 8, 6}));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 8, 10, 7, 8}));
  // Overlapping windows that pick one element add their gradients there.
  Tensor xl = x.detach().requires_grad_();
  sum(std::get<0>(adaptive_max_pool2d(xl, {2, 3}))).backward();
  std::vector<double> g = values(xl.grad());
  EXPECT_EQ(g[1], 2.0);
  EXPECT_EQ(g[8], 2.0);
  EXPECT_EQ(g[10], 1.0);
  EXPECT_EQ(g[7], 1.0);
  EXPECT_EQ(sum(xl.grad()).item<double>(), 6.0);
  // Global max pooling, and [C, H, W].
  EXPECT_EQ(values(std::get<0>(adaptive_max_pool2d(x, 1))), (std::vector<double>{9}));
  EXPECT_EQ(std::get<0>(adaptive_max_pool2d(zeros({2, 6, 6}), {3, 2})).shape(), (Shape{2, 3, 2}));
  expect_gradcheck("adaptive_max_pool2d", [](auto& in) { return std::get<0>(adaptive_max_pool2d(in[0], {3, 4})); },
                   {leaf({2, 2, 5, 7})});
  expect_gradcheck("upsampling", [](auto& in) { return std::get<0>(adaptive_max_pool2d(in[0], {4, 3})); },
                   {leaf({1, 2, 3, 2})});
  nn::AdaptiveMaxPool2d pool(nn::AdaptiveMaxPool2dOptions({2, 3}));
  EXPECT_EQ(values(pool->forward(x)), values(v));
  EXPECT_EQ(std::get<1>(pool->forward_with_indices(x)).to_vector<int64_t>(), i.to_vector<int64_t>());
}

TEST(Conv1dPool, Errors) {
  expect_error([&] { conv1d(zeros({1, 2, 3, 4}), zeros({1, 2, 3})); }, {"conv1d", "[N, C, L]", "[1, 2, 3, 4]"});
  expect_error([&] { conv1d(zeros({1, 4, 5}), zeros({2, 3, 2})); }, {"conv1d", "[2, 3, 2]"});
  expect_error([&] { conv1d(zeros({1, 4, 5}), zeros({3, 2, 2}), Tensor(), 1, 0, 1, 2); }, {"conv1d", "groups"});
  expect_error([&] { max_pool1d(zeros({5}), 2); }, {"max_pool1d", "[N, C, L]", "[5]"});
  expect_error([&] { avg_pool1d(zeros({1, 1, 1, 5}), 2); }, {"avg_pool1d", "[1, 1, 1, 5]"});
  expect_error([&] { adaptive_max_pool2d(zeros({5, 5}), 2); }, {"adaptive_max_pool2d", "[5, 5]"});
  expect_error([&] { adaptive_max_pool2d(zeros({1, 1, 5, 5}), {0, 2}); }, {"adaptive_max_pool2d", "positive"});
  expect_error([&] { adaptive_max_pool2d(zeros({1, 1, 5, 5}, kInt64), 2); }, {"adaptive_max_pool2d", "int64"});
  expect_error([&] { nn::Conv1d(nn::Conv1dOptions(3, 4, 2).groups(2)); }, {"Conv1d", "groups"});
}

}  // namespace minidl::conv1d_pool_test
