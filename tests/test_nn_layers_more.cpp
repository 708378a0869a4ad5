// Unflatten, the padding layers, PixelShuffle / PixelUnshuffle, Threshold, Softmax2d,
// InstanceNorm1d/2d, LocalResponseNorm, Bilinear, ParameterList and ParameterDict: values against
// plain loops over doubles, float64 gradchecks, running statistics, printing as PyTorch's, the F::
// forms and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "float64_util.h"
#include "minidl.h"
#include "nn/functional_more.h"
#include "nn/layers_more.h"
#include "nn/normalization_more.h"
#include "nn/padding.h"
#include "nn/parameter_containers.h"
#include "test_util.h"

namespace minidl::nn_layers_more_test {

using minidl::testing::expect_error;
using minidl::testing::expect_gradcheck;
using minidl::testing::f64;
using minidl::testing::leaf;
using minidl::testing::values;

namespace {

const GradcheckOptions kTight{1e-6, 1e-8, 1e-6};

template <class T>
std::string printed(const T& module) {
  std::ostringstream os;
  os << module;
  return os.str();
}

void expect_values(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  const std::vector<double> v = values(got);
  ASSERT_EQ(v.size(), want.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
}

// The source index along a dim of `size` for padded position i (i - left), in each mode.
int64_t source(const std::string& mode, int64_t i, int64_t size) {
  if (i >= 0 && i < size) return i;
  if (mode == "reflect") return i < 0 ? -i : 2 * (size - 1) - i;
  if (mode == "replicate") return i < 0 ? 0 : size - 1;
  return -1;  // constant
}

// Pads the last two dims of x [P, H, W] (P planes) by loops: {left, right, top, bottom}.
std::vector<double> padded_2d(const std::vector<double>& x, int64_t planes, int64_t h, int64_t w,
                              const std::vector<int64_t>& p, const std::string& mode, double value) {
  const int64_t oh = h + p[2] + p[3], ow = w + p[0] + p[1];
  std::vector<double> out;
  for (int64_t q = 0; q < planes; ++q)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t si = source(mode, i - p[2], h), sj = source(mode, j - p[0], w);
        out.push_back(si < 0 || sj < 0 ? value : x[(q * h + si) * w + sj]);
      }
  return out;
}

}  // namespace

TEST(LayersMore, Unflatten) {
  Tensor x = randn({2, 10, 3}, kFloat64);
  nn::Unflatten un(1, std::vector<int64_t>{2, 5});
  Tensor y = un(x);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 5, 3}));
  EXPECT_EQ(values(y), values(x));  // the same elements in the same order
  EXPECT_EQ(nn::Unflatten(nn::UnflattenOptions(-1, {3, -1}))(randn({2, 6})).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(printed(un), "Unflatten(dim=1, unflattened_size=[2, 5])");
  EXPECT_THROW(un(randn({2, 9})), Error);
}

TEST(LayersMore, PaddingLayersMatchLoops) {
  const int64_t n = 2, c = 3, h = 4, w = 5;
  Tensor x = randn({n, c, h, w}, kFloat64);
  const std::vector<double> xv = values(x);
  const std::vector<int64_t> p2 = {1, 2, 3, 0};
  expect_values(nn::ZeroPad2d(nn::ZeroPad2dOptions({1, 2, 3, 0}))(x), padded_2d(xv, n * c, h, w, p2, "constant", 0));
  expect_values(nn::ConstantPad2d(nn::ConstantPad2dOptions({1, 2, 3, 0}, 3.5))(x),
                padded_2d(xv, n * c, h, w, p2, "constant", 3.5));
  expect_values(nn::ReflectionPad2d(nn::ReflectionPad2dOptions({1, 2, 3, 0}))(x),
                padded_2d(xv, n * c, h, w, p2, "reflect", 0));
  expect_values(nn::ReplicationPad2d(nn::ReplicationPad2dOptions({1, 2, 3, 0}))(x),
                padded_2d(xv, n * c, h, w, p2, "replicate", 0));
  EXPECT_EQ(nn::ReflectionPad2d(2)(x).shape(), (Shape{n, c, h + 4, w + 4}));
  EXPECT_EQ(nn::ReplicationPad2d(2)(x[0]).shape(), (Shape{c, h + 4, w + 4}));  // unbatched
  // The 1d layers: the last dim alone ([N * C planes of 1 x W]).
  Tensor s = randn({n, c, w}, kFloat64);
  const std::vector<double> sv = values(s);
  const std::vector<int64_t> p1 = {3, 1, 0, 0};
  expect_values(nn::ZeroPad1d(nn::ZeroPad1dOptions({3, 1}))(s), padded_2d(sv, n * c, 1, w, p1, "constant", 0));
  expect_values(nn::ConstantPad1d(nn::ConstantPad1dOptions({3, 1}, -2.0))(s), padded_2d(sv, n * c, 1, w, p1, "constant", -2));
  expect_values(nn::ReflectionPad1d(nn::ReflectionPad1dOptions({3, 1}))(s), padded_2d(sv, n * c, 1, w, p1, "reflect", 0));
  expect_values(nn::ReplicationPad1d(nn::ReplicationPad1dOptions({3, 1}))(s), padded_2d(sv, n * c, 1, w, p1, "replicate", 0));
  expect_values(nn::ReplicationPad1d(2)(s[0]), padded_2d(values(s[0]), c, 1, w, {2, 2, 0, 0}, "replicate", 0));
  // Gradients: each copy of an edge element adds back into it.
  expect_gradcheck("ReflectionPad2d", [](auto& in) { return nn::ReflectionPad2d(nn::ReflectionPad2dOptions({2, 1, 0, 3}))(in[0]); },
                   {leaf({1, 2, 4, 4})}, kTight);
  expect_gradcheck("ReplicationPad1d", [](auto& in) { return nn::ReplicationPad1d(nn::ReplicationPad1dOptions({3, 2}))(in[0]); },
                   {leaf({2, 3})}, kTight);
  expect_gradcheck("ConstantPad2d", [](auto& in) { return nn::ConstantPad2d(nn::ConstantPad2dOptions(1, 0.5))(in[0]); },
                   {leaf({1, 1, 2, 3})}, kTight);
  Tensor g = ones({1, 1, 3}, kFloat64).requires_grad_();
  sum(nn::ReplicationPad1d(nn::ReplicationPad1dOptions({2, 1}))(g)).backward();
  EXPECT_EQ(values(g.grad()), (std::vector<double>{3, 1, 2}));
}

TEST(LayersMore, PaddingLayersPrintAndCheck) {
  EXPECT_EQ(printed(nn::ZeroPad2d(nn::ZeroPad2dOptions({1, 1, 2, 0}))), "ZeroPad2d(padding=[1, 1, 2, 0])");
  EXPECT_EQ(printed(nn::ZeroPad1d(2)), "ZeroPad1d(padding=[2, 2])");
  EXPECT_EQ(printed(nn::ConstantPad1d(nn::ConstantPad1dOptions({3, 1}, 3.5))), "ConstantPad1d(padding=[3, 1], value=3.5)");
  EXPECT_EQ(printed(nn::ConstantPad2d(nn::ConstantPad2dOptions(1, 0.0))), "ConstantPad2d(padding=[1, 1, 1, 1], value=0)");
  EXPECT_EQ(printed(nn::ReflectionPad1d(nn::ReflectionPad1dOptions({3, 1}))), "ReflectionPad1d(padding=[3, 1])");
  EXPECT_EQ(printed(nn::ReflectionPad2d(1)), "ReflectionPad2d(padding=[1, 1, 1, 1])");
  EXPECT_EQ(printed(nn::ReplicationPad1d(2)), "ReplicationPad1d(padding=[2, 2])");
  EXPECT_EQ(printed(nn::ReplicationPad2d(nn::ReplicationPad2dOptions({1, 0, 2, 3}))), "ReplicationPad2d(padding=[1, 0, 2, 3])");
  expect_error([] { nn::ReflectionPad2d(nn::ReflectionPad2dOptions({1, 1})); },
               {"ReflectionPad2d", "expected 4 pads", "{left, right, top, bottom}", "[1, 1]"});
  expect_error([] { nn::ReflectionPad1d(1)(randn({2, 3, 4, 5})); }, {"ReflectionPad1d", "2D or 3D", "[2, 3, 4, 5]"});
  expect_error([] { nn::ReplicationPad2d(1)(randn({4, 5})); }, {"ReplicationPad2d", "3D or 4D", "[4, 5]"});
  expect_error([] { nn::ZeroPad2d(1)(randn({5})); }, {"ZeroPad2d", "at least 2 dims", "[5]"});
  expect_error([] { nn::ReflectionPad1d(3)(randn({1, 2, 3})); }, {"pad"});  // reflect needs pad < size
  auto copy = nn::ConstantPad1d(nn::ConstantPad1dOptions({1, 2}, 7.0))->clone();
  EXPECT_EQ(printed(*copy), "ConstantPad1d(padding=[1, 2], value=7)");
}

TEST(LayersMore, PixelShuffleAndUnshuffle) {
  const int64_t n = 2, c = 3, r = 2, h = 3, w = 4;
  Tensor x = randn({n, c * r * r, h, w}, kFloat64);
  const std::vector<double> xv = values(x);
  std::vector<double> want(static_cast<size_t>(n * c * h * r * w * r));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < h * r; ++i)
        for (int64_t j = 0; j < w * r; ++j)
          want[((b * c + k) * h * r + i) * w * r + j] =
              xv[((b * c * r * r + k * r * r + (i % r) * r + (j % r)) * h + i / r) * w + j / r];
  nn::PixelShuffle shuffle(r);
  Tensor y = shuffle(x);
  EXPECT_EQ(y.shape(), (Shape{n, c, h * r, w * r}));
  expect_values(y, want, 0);
  nn::PixelUnshuffle unshuffle(r);
  EXPECT_EQ(values(unshuffle(y)), xv);  // the inverse
  // More leading dims, and none.
  Tensor five = randn({2, 2, 9, 2, 2}, kFloat64);
  EXPECT_EQ(pixel_shuffle(five, 3).shape(), (Shape{2, 2, 1, 6, 6}));
  EXPECT_EQ(values(pixel_unshuffle(pixel_shuffle(five, 3), 3)), values(five));
  EXPECT_EQ(values(pixel_shuffle(x[0], r)), values(y[0]));
  expect_gradcheck("pixel_shuffle", [](auto& in) { return pixel_shuffle(in[0], 2); }, {leaf({1, 8, 2, 3})}, kTight);
  expect_gradcheck("pixel_unshuffle", [](auto& in) { return pixel_unshuffle(in[0], 3); }, {leaf({1, 2, 3, 6})}, kTight);
  EXPECT_EQ(printed(shuffle), "PixelShuffle(upscale_factor=2)");
  EXPECT_EQ(printed(unshuffle), "PixelUnshuffle(downscale_factor=2)");
  namespace F = nn::functional;
  EXPECT_EQ(values(F::pixel_shuffle(x, F::PixelShuffleFuncOptions(2))), values(y));
  EXPECT_EQ(values(F::pixel_unshuffle(y, F::PixelUnshuffleFuncOptions(2))), xv);
  expect_error([] { pixel_shuffle(randn({1, 6, 2, 2}), 2); }, {"pixel_shuffle", "divisible", "4", "[1, 6, 2, 2]"});
  expect_error([] { pixel_shuffle(randn({6, 2}), 2); }, {"pixel_shuffle", "at least 3 dims", "[6, 2]"});
  expect_error([] { pixel_unshuffle(randn({1, 1, 4, 5}), 2); }, {"pixel_unshuffle", "divisible", "2", "[1, 1, 4, 5]"});
  expect_error([] { nn::PixelShuffle(0); }, {"PixelShuffle", "positive", "0"});
}

TEST(LayersMore, ThresholdAndSoftmax2d) {
  Tensor x = f64({-1, 0.1, 0.2, 3, NAN});
  nn::Threshold th(0.1, 20.0);
  const std::vector<double> y = values(th(x));
  EXPECT_EQ(std::vector<double>(y.begin(), y.end() - 1), (std::vector<double>{20, 20, 0.2, 3}));
  EXPECT_TRUE(std::isnan(y.back()));  // kept, as PyTorch's
  EXPECT_EQ(printed(th), "Threshold(threshold=0.1, value=20)");
  namespace F = nn::functional;
  EXPECT_EQ(values(F::threshold(narrow(x, 0, 0, 4), F::ThresholdFuncOptions(0.1, 20))), (std::vector<double>{20, 20, 0.2, 3}));
  expect_gradcheck("threshold", [](auto& in) { return threshold(in[0], 0.3, -2.0); }, {leaf({3, 4})}, kTight);

  const int64_t n = 2, c = 3, hw = 4;
  Tensor s = randn({n, c, 2, 2}, kFloat64);
  const std::vector<double> sv = values(s);
  std::vector<double> want(sv.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < hw; ++p) {
      double total = 0;
      for (int64_t k = 0; k < c; ++k) total += std::exp(sv[(b * c + k) * hw + p]);
      for (int64_t k = 0; k < c; ++k) want[(b * c + k) * hw + p] = std::exp(sv[(b * c + k) * hw + p]) / total;
    }
  nn::Softmax2d sm;
  expect_values(sm(s), want);
  expect_values(sm(s[1]), std::vector<double>(want.begin() + c * hw, want.end()));
  EXPECT_EQ(printed(sm), "Softmax2d()");
  expect_error([&] { sm(randn({3, 4})); }, {"Softmax2d", "3D or 4D", "2D", "[3, 4]"});
}

TEST(LayersMore, InstanceNormMatchesLoops) {
  const int64_t n = 2, c = 3, l = 5;
  Tensor x = randn({n, c, l}, kFloat64) * 2.0 + 1.0;
  const std::vector<double> xv = values(x);
  std::vector<double> mean(n * c), var(n * c), unbiased(n * c);
  for (int64_t i = 0; i < n * c; ++i) {
    double s = 0, q = 0;
    for (int64_t k = 0; k < l; ++k) s += xv[i * l + k];
    mean[i] = s / l;
    for (int64_t k = 0; k < l; ++k) q += (xv[i * l + k] - mean[i]) * (xv[i * l + k] - mean[i]);
    var[i] = q / l;
    unbiased[i] = q / (l - 1);
  }
  Tensor gamma = f64({0.5, 2, -1}), beta = f64({0, 1, 3});
  std::vector<double> want, want_affine;
  for (int64_t i = 0; i < n * c; ++i)
    for (int64_t k = 0; k < l; ++k) {
      const double z = (xv[i * l + k] - mean[i]) / std::sqrt(var[i] + 1e-5);
      want.push_back(z);
      want_affine.push_back(z * values(gamma)[i % c] + values(beta)[i % c]);
    }
  nn::InstanceNorm1d plain(c);
  EXPECT_EQ(plain->parameters().size(), 0u);  // affine = false, track_running_stats = false by default
  EXPECT_EQ(plain->buffers().size(), 0u);
  expect_values(plain(x), want, 1e-10);
  plain->eval();  // without running statistics, eval() uses the input's too
  expect_values(plain(x), want, 1e-10);
  expect_values(plain(x[1]), std::vector<double>(want.begin() + c * l, want.end()), 1e-10);  // unbatched [C, L]
  expect_values(instance_norm(x, {}, {}, gamma, beta), want_affine, 1e-10);
  namespace F = nn::functional;
  expect_values(F::instance_norm(x, F::InstanceNormFuncOptions().weight(gamma).bias(beta)), want_affine, 1e-10);

  // Running statistics: each instance's mean and unbiased variance, averaged over the batch, as PyTorch's.
  nn::InstanceNorm1d tracked(nn::InstanceNorm1dOptions(c).track_running_stats(true).momentum(0.3).affine(true));
  tracked->to(kFloat64);
  EXPECT_EQ(tracked->named_buffers().keys(),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  tracked(x);
  std::vector<double> rm(c), rv(c);
  for (int64_t k = 0; k < c; ++k) {
    double m = 0, v = 0;
    for (int64_t b = 0; b < n; ++b) {
      m += mean[b * c + k] / n;
      v += unbiased[b * c + k] / n;
    }
    rm[k] = 0.7 * 0 + 0.3 * m;
    rv[k] = 0.7 * 1 + 0.3 * v;
  }
  expect_values(tracked->running_mean, rm);
  expect_values(tracked->running_var, rv);
  EXPECT_EQ(tracked->num_batches_tracked.item<int64_t>(), 0);  // not counted, as PyTorch's instance norm
  tracked->eval();
  std::vector<double> want_eval;
  for (int64_t i = 0; i < n * c; ++i)
    for (int64_t k = 0; k < l; ++k) want_eval.push_back((xv[i * l + k] - rm[i % c]) / std::sqrt(rv[i % c] + 1e-5));
  expect_values(tracked(x), want_eval, 1e-10);
  expect_values(tracked->running_mean, rm);  // eval() leaves them

  expect_gradcheck("instance_norm", [](auto& in) { return instance_norm(in[0], {}, {}, in[1], in[2]); },
                   {leaf({2, 3, 2, 3}), leaf({3}), leaf({3})}, kTight);
  expect_gradcheck("instance_norm eval",
                   [&](auto& in) { return instance_norm(in[0], f64({0.1, 0.2, -0.3}), f64({1, 2, 0.5}), in[1], {}, false); },
                   {leaf({2, 3, 4}), leaf({3})}, kTight);
}

TEST(LayersMore, InstanceNormPrintsAndChecks) {
  EXPECT_EQ(printed(nn::InstanceNorm2d(3)), "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=false, track_running_stats=false)");
  EXPECT_EQ(printed(nn::InstanceNorm1d(nn::InstanceNorm1dOptions(8).affine(true).track_running_stats(true).eps(1e-3))),
            "InstanceNorm1d(8, eps=0.001, momentum=0.1, affine=true, track_running_stats=true)");
  nn::InstanceNorm2d norm(nn::InstanceNorm2dOptions(3).affine(true));
  EXPECT_EQ(norm(randn({2, 3, 4, 4})).shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(norm(randn({3, 4, 4})).shape(), (Shape{3, 4, 4}));
  expect_error([&] { norm(randn({3, 4})); }, {"InstanceNorm2d", "3D or 4D", "[3, 4]"});
  expect_error([&] { norm(randn({2, 3, 4})); }, {"InstanceNorm2d", "dim 0", "num_features (3)", "[2, 3, 4]"});
  expect_error([&] { norm(randn({2, 5, 4, 4})); }, {"InstanceNorm2d", "num_features (3)", "[2, 5, 4, 4]"});
  expect_error([] { nn::InstanceNorm1d(3)(randn({2, 3, 1})); }, {"instance_norm", "more than 1 spatial element", "[2, 3, 1]"});
  expect_error([] { instance_norm(randn({2, 3, 4}), {}, {}, {}, {}, false); }, {"instance_norm", "running_mean"});
  expect_error([] { instance_norm(randn({2, 3, 4}), {}, {}, ones({4})); }, {"instance_norm", "weight of shape [3]", "[4]"});
  auto copy = norm->clone();
  EXPECT_EQ(printed(*copy), printed(norm));
}

TEST(LayersMore, LocalResponseNorm) {
  const int64_t n = 2, c = 5, sp = 3, size = 4;  // even: the window is lopsided
  const double alpha = 0.2, beta = 0.75, k = 2.0;
  Tensor x = randn({n, c, sp}, kFloat64);
  const std::vector<double> xv = values(x);
  std::vector<double> want;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < sp; ++p) {
        double s = 0;
        for (int64_t q = ch - size / 2; q <= ch + (size - 1) / 2; ++q)
          if (q >= 0 && q < c) s += xv[(b * c + q) * sp + p] * xv[(b * c + q) * sp + p];
        want.push_back(xv[(b * c + ch) * sp + p] / std::pow(k + alpha / size * s, beta));
      }
  nn::LocalResponseNorm lrn(nn::LocalResponseNormOptions(size).alpha(alpha).beta(beta).k(k));
  expect_values(lrn(x), want);
  expect_values(lrn(reshape(x, {n, c, 1, sp})), want);  // 4-D: the same across the spatial dims
  namespace F = nn::functional;
  expect_values(F::local_response_norm(x, F::LocalResponseNormFuncOptions(size).alpha(alpha).k(k)), want);
  // An even size: the window is [c - size / 2, c + (size - 1) / 2].
  expect_gradcheck("local_response_norm", [](auto& in) { return local_response_norm(in[0], 2, 0.5, 0.75, 1.0); },
                   {leaf({2, 4, 2, 3})}, kTight);
  EXPECT_EQ(printed(nn::LocalResponseNorm(2)), "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1)");
  expect_error([] { local_response_norm(randn({2, 3}), 2); }, {"local_response_norm", "3 or more dims", "[2, 3]"});
  expect_error([] { nn::LocalResponseNorm(0); }, {"LocalResponseNorm", "size > 0", "0"});
}

TEST(LayersMore, Bilinear) {
  manual_seed(11);
  const int64_t n = 3, in1 = 4, in2 = 2, out = 5;
  nn::Bilinear bl(in1, in2, out);
  const double bound = 1 / std::sqrt(static_cast<double>(in1));
  double largest = 0;
  for (double v : values(bl->weight)) largest = std::max(largest, std::abs(v));
  for (double v : values(bl->bias)) EXPECT_LE(std::abs(v), bound);
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.9 * bound);  // uniform over the whole range
  EXPECT_EQ(bl->weight.shape(), (Shape{out, in1, in2}));
  bl->to(kFloat64);
  Tensor a = randn({n, in1}, kFloat64), b = randn({n, in2}, kFloat64);
  const std::vector<double> av = values(a), bv = values(b), wv = values(bl->weight), biv = values(bl->bias);
  std::vector<double> want;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = biv[o];
      for (int64_t i = 0; i < in1; ++i)
        for (int64_t j = 0; j < in2; ++j) s += av[r * in1 + i] * wv[(o * in1 + i) * in2 + j] * bv[r * in2 + j];
      want.push_back(s);
    }
  expect_values(bl(a, b), want);
  expect_values(bl(reshape(a, {1, n, in1}), reshape(b, {1, n, in2})), want);  // leading dims kept
  EXPECT_EQ(bl(reshape(a, {1, n, in1}), reshape(b, {1, n, in2})).shape(), (Shape{1, n, out}));
  expect_gradcheck("bilinear", [](auto& in) { return bilinear(in[0], in[1], in[2], in[3]); },
                   {leaf({n, in1}), leaf({n, in2}), leaf({out, in1, in2}), leaf({out})}, kTight);
  nn::Bilinear no_bias(nn::BilinearOptions(in1, in2, out).bias(false));
  EXPECT_EQ(no_bias->parameters().size(), 1u);
  EXPECT_EQ(printed(bl), "Bilinear(in1_features=4, in2_features=2, out_features=5, bias=true)");
  EXPECT_EQ(printed(no_bias), "Bilinear(in1_features=4, in2_features=2, out_features=5, bias=false)");
  expect_error([&] { bl(a, randn({n, 3}, kFloat64)); }, {"bilinear", "input2's last dim 3", "in2 = 2"});
  expect_error([&] { bl(a, randn({n + 1, in2}, kFloat64)); }, {"bilinear", "same leading dims", "[3, 4]", "[4, 2]"});
  expect_error([&] { bilinear(a, b, randn({out, in1, in2}, kFloat64), ones({2}, kFloat64)); },
               {"bilinear", "bias of shape [5]", "[2]"});
}

TEST(LayersMore, ParameterList) {
  nn::ParameterList list(randn({3, 4}), zeros({2}));
  list->append(ones({5}).requires_grad_(false));
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list->named_parameters().keys(), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_FALSE(list[0].requires_grad());  // each tensor keeps its own, as libtorch's
  list->extend(std::vector<Tensor>{randn({1}).requires_grad_(), randn({2, 2})});
  EXPECT_EQ(list->size(), 5u);
  EXPECT_TRUE(list[3].requires_grad());
  EXPECT_EQ(list->at(4).shape(), (Shape{2, 2}));
  EXPECT_EQ(list->parameters().size(), 5u);
  // The entries share the registered tensors.
  EXPECT_EQ(list[2].data_ptr<float>(), list->named_parameters()["2"].data_ptr<float>());
  int64_t count = 0;
  for (auto& item : *list) count += item.value().numel();
  EXPECT_EQ(count, 12 + 2 + 5 + 1 + 4);
  EXPECT_EQ(printed(nn::ParameterList(zeros({3, 4}), zeros({2}, kFloat64))),
            "ParameterList(\n"
            "  (0): Parameter containing: [float32 of size 3x4]\n"
            "  (1): Parameter containing: [float64 of size 2]\n"
            ")");
  // Inside a model: "params.0", and printed one level deeper.
  struct Net : nn::Module {
    Net() { params = register_module("params", nn::ParameterList(ones({2}).requires_grad_())); }
    nn::ParameterList params{nullptr};
  } net;
  EXPECT_EQ(net.named_parameters().keys(), (std::vector<std::string>{"params.0"}));
  EXPECT_EQ(printed(net),
            "Net(\n"
            "  (params): ParameterList(\n"
            "    (0): Parameter containing: [float32 of size 2]\n"
            "  )\n"
            ")");
  auto copy = std::dynamic_pointer_cast<nn::ParameterListImpl>(list->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->size(), 5u);
  EXPECT_EQ(values(copy->at(0)), values(list[0]));
  EXPECT_NE(copy->at(0).data_ptr<float>(), list[0].data_ptr<float>());
  EXPECT_TRUE(copy->at(3).requires_grad());
  EXPECT_FALSE(copy->at(0).requires_grad());
  expect_error([&] { list->at(7); }, {"ParameterList", "index 7", "5 parameters"});
}

TEST(LayersMore, ParameterDict) {
  OrderedDict<std::string, Tensor> init;
  init.insert("scale", ones({4}).requires_grad_());
  init.insert("shift", zeros({4}).requires_grad_());
  nn::ParameterDict dict(init);
  EXPECT_EQ(dict->size(), 2u);
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"scale", "shift"}));
  EXPECT_TRUE(dict->contains("scale"));
  EXPECT_FALSE(dict->contains("bias"));
  dict->insert("temperature", full({1}, 2.0));
  EXPECT_EQ(dict->named_parameters().keys(), (std::vector<std::string>{"scale", "shift", "temperature"}));
  EXPECT_EQ(dict["temperature"].item<float>(), 2.0f);
  EXPECT_EQ(dict->values().size(), 3u);
  EXPECT_EQ(dict->items()[1].key(), "shift");
  // Inserting a key again replaces that parameter, in place in the order.
  dict->insert("shift", full({4}, 5.0).requires_grad_());
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"scale", "shift", "temperature"}));
  EXPECT_EQ(dict->get("shift").sum().item<float>(), 20.0f);
  EXPECT_EQ(dict->named_parameters()["shift"].sum().item<float>(), 20.0f);
  Tensor popped = dict->pop("scale");
  EXPECT_EQ(popped.shape(), (Shape{4}));
  EXPECT_EQ(dict->named_parameters().keys(), (std::vector<std::string>{"shift", "temperature"}));
  std::map<std::string, Tensor> more{{"a", zeros({1})}, {"b", zeros({2})}};
  dict->update(more);
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"shift", "temperature", "a", "b"}));
  EXPECT_EQ(printed(dict),
            "ParameterDict(\n"
            "  (shift): Parameter containing: [float32 of size 4]\n"
            "  (temperature): Parameter containing: [float32 of size 1]\n"
            "  (a): Parameter containing: [float32 of size 1]\n"
            "  (b): Parameter containing: [float32 of size 2]\n"
            ")");
  auto copy = std::dynamic_pointer_cast<nn::ParameterDictImpl>(dict->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->keys(), dict->keys());
  EXPECT_TRUE(copy->get("shift").requires_grad());
  dict->to(kFloat64);
  EXPECT_EQ(dict["shift"].dtype(), kFloat64);  // the entries are the registered tensors
  expect_error([&] { dict->get("missing"); }, {"ParameterDict", "\"missing\"", "shift, temperature, a, b"});
  expect_error([&] { dict->insert("a.b", zeros({1})); }, {"ParameterDict", "invalid key", "a.b"});
  dict->clear();
  EXPECT_TRUE(dict->empty());
  EXPECT_EQ(dict->parameters().size(), 0u);
  EXPECT_EQ(printed(dict), "ParameterDict()");
}

}  // namespace minidl::nn_layers_more_test
