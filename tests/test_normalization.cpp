// batch_norm, layer_norm, rms_norm, group_norm and their modules: forward against direct loops, hand-computed
// values for the semantics people trip on (the biased variance normalizes, the unbiased one enters
// running_var, eval() uses the running statistics), float64 gradient checks for x, weight and bias,
// the modules' buffers, modes and printing, and the errors for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "minidl.h"
#include "test_util.h"
#include "nn/nn.h"

namespace minidl::normalization_test {

using minidl::testing::error_of;

namespace {

#define EXPECT_ERROR(statement, text)                                                       \
  do {                                                                                      \
    const std::string minidl_msg_ = error_of([&] { statement; });                           \
    EXPECT_NE(minidl_msg_.find(text), std::string::npos) << "message: " << minidl_msg_;     \
  } while (0)

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }
Tensor positive_leaf(const Shape& shape) { return uniform(shape, 0.5, 2.0, kFloat64).requires_grad_(); }


void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " at " << i;
}

// Statistics of x viewed as [n, c, l], where (sample i, channel ch) uses statistic key(i, ch).
struct Moments {
  std::vector<double> mean, var;  // biased
  std::vector<int64_t> count;
};

Moments moments_ref(const std::vector<double>& x, int64_t n, int64_t c, int64_t l, int64_t stats,
                    const std::function<int64_t(int64_t, int64_t)>& key) {
  Moments m{std::vector<double>(stats, 0.0), std::vector<double>(stats, 0.0), std::vector<int64_t>(stats, 0)};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < l; ++j) {
        m.mean[key(i, ch)] += x[(i * c + ch) * l + j];
        ++m.count[key(i, ch)];
      }
  for (int64_t s = 0; s < stats; ++s) m.mean[s] /= static_cast<double>(m.count[s]);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < l; ++j) {
        const double d = x[(i * c + ch) * l + j] - m.mean[key(i, ch)];
        m.var[key(i, ch)] += d * d;
      }
  for (int64_t s = 0; s < stats; ++s) m.var[s] /= static_cast<double>(m.count[s]);
  return m;
}

// (x - mean) / sqrt(var + eps) * w[ch] + b[ch]; empty w or b: 1 or 0.
std::vector<double> normalize_ref(const std::vector<double>& x, int64_t n, int64_t c, int64_t l,
                                  const std::vector<double>& mean, const std::vector<double>& var,
                                  const std::function<int64_t(int64_t, int64_t)>& key, const std::vector<double>& w,
                                  const std::vector<double>& b, double eps) {
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < l; ++j) {
        const int64_t at = (i * c + ch) * l + j, s = key(i, ch);
        out[at] = (x[at] - mean[s]) / std::sqrt(var[s] + eps) * (w.empty() ? 1.0 : w[ch]) + (b.empty() ? 0.0 : b[ch]);
      }
  return out;
}

std::vector<double> values(const Tensor& t) { return t.defined() ? t.to_vector<double>() : std::vector<double>{}; }

int64_t trailing(const Shape& s, size_t from) {
  int64_t n = 1;
  for (size_t d = from; d < s.size(); ++d) n *= s[d];
  return n;
}

const std::vector<Shape> kBatchShapes = {
    {5, 3},        // BatchNorm1d on [N, C]
    {4, 3, 7},     // BatchNorm1d on [N, C, L]
    {2, 3, 5, 4},  // BatchNorm2d, non-square
    {1, 2, 3, 3},  // batch of one image: still 9 values per channel
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// batch_norm

TEST(BatchNorm, HandComputedTrainingStep) {
  // Channel 0 holds 1, 2, 3, 4: mean 2.5, biased variance 1.25, unbiased 5/3.
  // Channel 1 holds 10, 20, 30, 40: mean 25, biased variance 125, unbiased 500/3.
  Tensor x = Tensor::from_vector<double>({1, 10, 2, 20, 3, 30, 4, 40}, {4, 2});
  Tensor running_mean = zeros({2}, kFloat64), running_var = ones({2}, kFloat64);
  Tensor w = Tensor::from_vector<double>({2, 0.5}), b = Tensor::from_vector<double>({1, -1});
  Tensor out = batch_norm(x, running_mean, running_var, w, b, /*training=*/true, /*momentum=*/0.1, 1e-5);
  const double s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(125 + 1e-5);
  expect_near_all(out.to_vector<double>(),
                  {(1 - 2.5) / s0 * 2 + 1, (10 - 25) / s1 * 0.5 - 1, (2 - 2.5) / s0 * 2 + 1, (20 - 25) / s1 * 0.5 - 1,
                   (3 - 2.5) / s0 * 2 + 1, (30 - 25) / s1 * 0.5 - 1, (4 - 2.5) / s0 * 2 + 1, (40 - 25) / s1 * 0.5 - 1},
                  1e-12, "out (biased variance)");
  // running = 0.9 * running + 0.1 * batch statistic, the variance unbiased.
  expect_near_all(running_mean.to_vector<double>(), {0.25, 2.5}, 1e-12, "running_mean");
  expect_near_all(running_var.to_vector<double>(), {0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.1 * 500.0 / 3.0}, 1e-12,
                  "running_var (unbiased)");
}

TEST(BatchNorm, EvalUsesRunningStatistics) {
  Tensor x = Tensor::from_vector<double>({1, 10, 2, 20, 3, 30}, {3, 2});
  Tensor running_mean = Tensor::from_vector<double>({1, -2}), running_var = Tensor::from_vector<double>({4, 0.25});
  Tensor w = Tensor::from_vector<double>({2, 0.5}), b = Tensor::from_vector<double>({1, -1});
  Tensor out = batch_norm(x, running_mean, running_var, w, b, /*training=*/false);
  const double s0 = std::sqrt(4 + 1e-5), s1 = std::sqrt(0.25 + 1e-5);
  expect_near_all(out.to_vector<double>(),
                  {(1 - 1) / s0 * 2 + 1, (10 + 2) / s1 * 0.5 - 1, (2 - 1) / s0 * 2 + 1, (20 + 2) / s1 * 0.5 - 1,
                   (3 - 1) / s0 * 2 + 1, (30 + 2) / s1 * 0.5 - 1},
                  1e-12, "eval out");
  EXPECT_EQ(running_mean.to_vector<double>(), (std::vector<double>{1, -2})) << "eval must not update";
  EXPECT_EQ(running_var.to_vector<double>(), (std::vector<double>{4, 0.25}));
  // One value per channel is fine in evaluation.
  EXPECT_EQ(batch_norm(zeros({1, 2}, kFloat64), running_mean, running_var).shape(), (Shape{1, 2}));
}

TEST(BatchNorm, ForwardAndRunningStatsMatchLoops) {
  manual_seed(1);
  std::vector<Shape> shapes = kBatchShapes;
  shapes.push_back({8, 70, 9});  // large enough to run in parallel, per channel
  shapes.push_back({600, 130});  // [N, C] in chunks of columns, in parallel
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const int64_t n = shape[0], c = shape[1], l = trailing(shape, 2);
    Tensor x = randn(shape, kFloat64) * scalar_like(3, randn({1}, kFloat64)) + scalar_like(5, randn({1}, kFloat64));
    Tensor w = randn({c}, kFloat64), b = randn({c}, kFloat64);
    Tensor rm = randn({c}, kFloat64), rv = uniform({c}, 0.5, 2, kFloat64);
    const std::vector<double> rm0 = rm.to_vector<double>(), rv0 = rv.to_vector<double>();
    const auto key = [](int64_t, int64_t ch) { return ch; };
    const std::vector<double> xv = x.to_vector<double>();
    const Moments m = moments_ref(xv, n, c, l, c, key);
    Tensor out = batch_norm(x, rm, rv, w, b, true, 0.3, 1e-4);
    expect_near_all(out.to_vector<double>(), normalize_ref(xv, n, c, l, m.mean, m.var, key, values(w), values(b), 1e-4),
                    1e-10, "training out");
    std::vector<double> want_rm(c), want_rv(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      const double cnt = static_cast<double>(n * l);
      want_rm[ch] = 0.7 * rm0[ch] + 0.3 * m.mean[ch];
      want_rv[ch] = 0.7 * rv0[ch] + 0.3 * m.var[ch] * cnt / (cnt - 1);
    }
    expect_near_all(rm.to_vector<double>(), want_rm, 1e-10, "running_mean");
    expect_near_all(rv.to_vector<double>(), want_rv, 1e-10, "running_var");
    Tensor eval_out = batch_norm(x, rm, rv, w, b, false, 0.3, 1e-4);
    expect_near_all(eval_out.to_vector<double>(), normalize_ref(xv, n, c, l, want_rm, want_rv, key, values(w), values(b), 1e-4),
                    1e-10, "eval out");
    // float32 agrees with float64, accumulating in double.
    Tensor out32 = batch_norm(x.to(kFloat32), Tensor(), Tensor(), w.to(kFloat32), b.to(kFloat32), true);
    expect_near_all(out32.to(kFloat64).to_vector<double>(),
                    normalize_ref(xv, n, c, l, m.mean, m.var, key, values(w), values(b), 1e-5), 1e-4, "float32");
  }
}

TEST(BatchNorm, NonContiguousInput) {
  manual_seed(2);
  Tensor base = randn({3, 4, 5}, kFloat64);
  Tensor x = base.transpose(0, 2);  // [5, 4, 3], not contiguous
  ASSERT_FALSE(x.is_contiguous());
  Tensor a = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  Tensor b = batch_norm(x.contiguous(), Tensor(), Tensor(), Tensor(), Tensor(), true);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
}

TEST(BatchNorm, Gradcheck) {
  manual_seed(3);
  for (const Shape& shape : kBatchShapes) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const int64_t c = shape[1];
    Tensor rm = zeros({c}, kFloat64), rv = ones({c}, kFloat64);
    auto training = gradcheck(
        [&](const std::vector<Tensor>& in) { return batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5); },
        {leaf(shape), positive_leaf({c}), leaf({c})});
    EXPECT_TRUE(training) << "training: " << training.message;
    auto no_stats = gradcheck([&](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), {}, {}, true); },
                              {leaf(shape)});
    EXPECT_TRUE(no_stats) << "training, no affine, no running stats: " << no_stats.message;
    Tensor erm = randn({c}, kFloat64), erv = uniform({c}, 0.5, 2, kFloat64);
    auto eval = gradcheck(
        [&](const std::vector<Tensor>& in) { return batch_norm(in[0], erm, erv, in[1], in[2], false); },
        {leaf(shape), positive_leaf({c}), leaf({c})});
    EXPECT_TRUE(eval) << "eval: " << eval.message;
    // Only the weight and bias want gradients (the input is data).
    Tensor data = randn(shape, kFloat64);
    auto params = gradcheck(
        [&](const std::vector<Tensor>& in) { return batch_norm(data, rm, rv, in[0], in[1], true); },
        {positive_leaf({c}), leaf({c})});
    EXPECT_TRUE(params) << "weight and bias only: " << params.message;
  }
}

TEST(BatchNorm, NoGradientReachesRunningStatistics) {
  manual_seed(4);
  Tensor x = leaf({4, 3});
  Tensor rm = zeros({3}, kFloat64), rv = ones({3}, kFloat64);
  Tensor out = batch_norm(x, rm, rv, Tensor(), Tensor(), true);
  EXPECT_FALSE(rm.requires_grad());
  (out * randn({4, 3}, kFloat64)).sum().backward();
  EXPECT_FALSE(rm.grad().defined());
  EXPECT_FALSE(rv.grad().defined());
  // With the statistics from the batch, the input's gradient sums to zero over each channel.
  for (double s : sum(x.grad(), {0}).to_vector<double>()) EXPECT_NEAR(s, 0.0, 1e-12);
}

TEST(BatchNorm, Errors) {
  Tensor rm = zeros({3}), rv = ones({3});
  EXPECT_ERROR(batch_norm(zeros({3}), rm, rv), "batch_norm: expected x of shape [N, C, *] (at least 2-D), got shape [3] (1-D)");
  EXPECT_ERROR(batch_norm(zeros({2, 4}), rm, rv),
               "batch_norm: expected running_mean of shape [4] (one per channel of x of shape [2, 4]), got shape [3]");
  EXPECT_ERROR(batch_norm(zeros({2, 3}), rm, rv, ones({4})),
               "expected weight of shape [3] (one per channel of x of shape [2, 3]), got shape [4]");
  EXPECT_ERROR(batch_norm(zeros({2, 3}), rm, rv, ones({3}), zeros({2})), "expected bias of shape [3]");
  EXPECT_ERROR(batch_norm(zeros({1, 3}), rm, rv, {}, {}, true),
               "batch_norm: Expected more than 1 value per channel when training, got input size [1, 3]");
  EXPECT_ERROR(batch_norm(zeros({1, 3, 1}), Tensor(), Tensor(), {}, {}, true), "Expected more than 1 value per channel");
  EXPECT_EQ(rm.to_vector<float>(), std::vector<float>(3, 0.f)) << "a refused batch must not update the running stats";
  EXPECT_ERROR(batch_norm(zeros({2, 3}), Tensor(), Tensor()), "running_mean and running_var are needed in evaluation");
  EXPECT_ERROR(batch_norm(zeros({2, 3}), rm, Tensor(), {}, {}, true), "both running_mean and running_var, or neither");
  EXPECT_ERROR(batch_norm(zeros({2, 3}, kFloat64), rm, rv), "expected running_mean of dtype float64 (as x), got float32");
  EXPECT_ERROR(batch_norm(zeros({2, 3}, kInt64), rm, rv), "floating");
}

// ---------------------------------------------------------------------------------------------
// layer_norm

TEST(LayerNorm, HandComputed) {
  // Row 0: 1, 2, 3 -> mean 2, biased variance 2/3. Row 1: -1, 0, 4 -> mean 1, variance 14/3.
  Tensor x = Tensor::from_vector<double>({1, 2, 3, -1, 0, 4}, {2, 3});
  Tensor w = Tensor::from_vector<double>({1, 2, 3}), b = Tensor::from_vector<double>({0, 1, -1});
  const double s0 = std::sqrt(2.0 / 3 + 1e-5), s1 = std::sqrt(14.0 / 3 + 1e-5);
  expect_near_all(layer_norm(x, {3}, w, b).to_vector<double>(),
                  {-1 / s0, 0 + 1, 1 / s0 * 3 - 1, -2 / s1, -1 / s1 * 2 + 1, 3 / s1 * 3 - 1}, 1e-12, "layer_norm");
  expect_near_all(layer_norm(x, {3}).to_vector<double>(), {-1 / s0, 0, 1 / s0, -2 / s1, -1 / s1, 3 / s1}, 1e-12,
                  "no affine");
}

TEST(LayerNorm, ForwardMatchesLoops) {
  manual_seed(5);
  struct Case {
    Shape x, normalized;
  };
  for (const Case& k : std::vector<Case>{{{3, 4, 5}, {5}}, {{3, 4, 5}, {4, 5}}, {{2, 3}, {2, 3}}, {{7}, {7}},
                                         {{300, 130}, {130}}}) {
    SCOPED_TRACE(::testing::PrintToString(k.x) + " over " + ::testing::PrintToString(k.normalized));
    const int64_t cols = shape_numel(k.normalized), rows = shape_numel(k.x) / cols;
    Tensor x = randn(k.x, kFloat64) * scalar_like(2, randn({1}, kFloat64)) + scalar_like(-3, randn({1}, kFloat64));
    Tensor w = randn(k.normalized, kFloat64), b = randn(k.normalized, kFloat64);
    const std::vector<double> xv = x.to_vector<double>();
    const auto key = [](int64_t i, int64_t) { return i; };
    const Moments m = moments_ref(xv, rows, cols, 1, rows, key);
    expect_near_all(layer_norm(x, k.normalized, w, b, 1e-3).to_vector<double>(),
                    normalize_ref(xv, rows, cols, 1, m.mean, m.var, key, values(w), values(b), 1e-3), 1e-10, "out");
  }
}

TEST(LayerNorm, Gradcheck) {
  manual_seed(6);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], {5}, in[1], in[2]); },
                     {leaf({3, 5}), positive_leaf({5}), leaf({5})});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], {3, 4}, in[1], in[2]); },
                {leaf({2, 3, 4}), positive_leaf({3, 4}), leaf({3, 4})});
  EXPECT_TRUE(r) << "two normalized dims: " << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], {6}); }, {leaf({1, 6})});
  EXPECT_TRUE(r) << "no affine, one row: " << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1]); },
                {leaf({2, 2, 4}), positive_leaf({4})});
  EXPECT_TRUE(r) << "weight without bias: " << r.message;
}

TEST(LayerNorm, Errors) {
  EXPECT_ERROR(layer_norm(zeros({2, 3}), {4}),
               "layer_norm: given normalized_shape=[4], expected x of shape [*, 4], but got shape [2, 3]");
  EXPECT_ERROR(layer_norm(zeros({3}), {2, 3}), "expected x of shape [*, 2, 3], but got shape [3]");
  EXPECT_ERROR(layer_norm(zeros({2, 3}), {3}, ones({2})),
               "layer_norm: expected weight of shape [3] (normalized_shape, the trailing dims of x of shape [2, 3]), "
               "got shape [2]");
  EXPECT_ERROR(layer_norm(zeros({2, 3}), {}), "at least one dim");
}

// ---------------------------------------------------------------------------------------------
// rms_norm and nn::RMSNorm

TEST(RmsNorm, HandComputed) {
  // Row 0: 1, 2, 2 -> mean square 3. Row 1: 0, -3, 4 -> 25/3.
  Tensor x = Tensor::from_vector<double>({1, 2, 2, 0, -3, 4}, {2, 3});
  Tensor w = Tensor::from_vector<double>({1, 2, 3});
  const double r0 = 1 / std::sqrt(3 + 1e-6), r1 = 1 / std::sqrt(25.0 / 3 + 1e-6);
  expect_near_all(rms_norm(x, {3}, w, 1e-6).to_vector<double>(), {r0, 4 * r0, 6 * r0, 0, -6 * r1, 12 * r1}, 1e-12,
                  "rms_norm");
  // The default eps is float64's machine epsilon for float64, float32's otherwise (as PyTorch's).
  const double e64 = std::numeric_limits<double>::epsilon(), e32 = std::numeric_limits<float>::epsilon();
  expect_near_all(rms_norm(x, {3}).to_vector<double>(), {1 / std::sqrt(3 + e64), 2 / std::sqrt(3 + e64),
                  2 / std::sqrt(3 + e64), 0, -3 / std::sqrt(25.0 / 3 + e64), 4 / std::sqrt(25.0 / 3 + e64)}, 1e-15,
                  "default eps, float64");
  const Tensor tiny = full({1, 2}, 1e-4, kFloat32);  // mean square 1e-8: eps is visible beside it
  EXPECT_NEAR(rms_norm(tiny, {2}).to(kFloat64).to_vector<double>()[0], 1e-4 / std::sqrt(1e-8 + e32), 1e-5);
  // Over two trailing dims: one statistic for each [2, 2] slice.
  Tensor x3 = Tensor::from_vector<double>({1, 1, 1, 1, 2, 0, 0, 0}, {2, 2, 2});
  expect_near_all(rms_norm(x3, {2, 2}, {}, 0.0).to_vector<double>(), {1, 1, 1, 1, 2 / std::sqrt(1.0), 0, 0, 0},
                  1e-12, "two dims");
}

TEST(RmsNorm, GradcheckAndSixteenBit) {
  manual_seed(7);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], {5}, in[1], 1e-5); },
                     {leaf({3, 5}), leaf({5})});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return rms_norm(in[0], {3, 4}); }, {leaf({2, 3, 4})});
  EXPECT_TRUE(r) << "two dims, no weight: " << r.message;
  // bfloat16 and float16 are normalized in float32, then rounded once: the float32 result, rounded.
  const Tensor x = randn({4, 64}), w = randn({64});
  for (DType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor low = rms_norm(x.to(dtype), {64}, w);
    EXPECT_EQ(low.dtype(), dtype);
    expect_near_all(values(low.to(kFloat64)), values(rms_norm(x.to(dtype).to(kFloat32), {64}, w).to(dtype).to(kFloat64)),
                    0, "rounded once");
  }
}

TEST(RmsNorm, ModuleAndErrors) {
  nn::RMSNorm norm(nn::RMSNormOptions({3}).eps(1e-6));
  EXPECT_EQ(norm->named_parameters().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(norm->weight.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  std::ostringstream os;
  os << *norm;
  EXPECT_EQ(os.str(), "RMSNorm([3], eps=1e-06, elementwise_affine=true)");
  nn::RMSNorm plain(nn::RMSNormOptions({3}).elementwise_affine(false));
  EXPECT_TRUE(plain->parameters().empty());
  const Tensor x = randn({2, 3});
  EXPECT_EQ(values(norm(x).to(kFloat64)), values(rms_norm(x, {3}, norm->weight, 1e-6).to(kFloat64)));
  EXPECT_ERROR(rms_norm(zeros({2, 3}), {4}), "rms_norm: given normalized_shape=[4], expected x of shape [*, 4]");
  EXPECT_ERROR(rms_norm(zeros({2, 3}), {3}, ones({2})), "rms_norm: expected weight of shape [3]");
  EXPECT_ERROR(rms_norm(zeros({2, 3}, kInt64), {3}), "rms_norm: expected a floating x, got int64");
  EXPECT_ERROR(nn::RMSNorm(nn::RMSNormOptions(Shape{})), "RMSNorm: expected a normalized_shape of at least one dim");
}

// ---------------------------------------------------------------------------------------------
// dropout_add_layer_norm

TEST(DropoutAddLayerNorm, SumIsResidualPlusDroppedBranchAndOutIsItsNorm) {
  manual_seed(3);
  const double p = 0.3;
  Tensor x = randn({4, 5, 8}, kFloat64), residual = randn({4, 5, 8}, kFloat64);
  Tensor w = randn({8}, kFloat64), b = randn({8}, kFloat64);
  auto [out, sum] = dropout_add_layer_norm(x, residual, w, b, p, true);
  // Each element of the branch is dropped (sum = residual) or kept and scaled by 1 / (1 - p).
  Tensor added = (sum - residual).contiguous(), xs = x.contiguous();
  int64_t dropped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double a = added.data<double>()[i], kept = xs.data<double>()[i] / (1 - p);
    if (a == 0) ++dropped;
    else EXPECT_NEAR(a, kept, 1e-12) << "element " << i;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, x.numel() / 2);
  EXPECT_TRUE(allclose(out, layer_norm(sum, {8}, w, b), 1e-12, 1e-12));
  // Not training: nothing is dropped.
  auto [eval_out, eval_sum] = dropout_add_layer_norm(x, residual, w, b, p, false);
  EXPECT_TRUE(allclose(eval_sum, residual + x, 0, 0));
  EXPECT_TRUE(allclose(eval_out, layer_norm(residual + x, {8}, w, b), 1e-12, 1e-12));
}

TEST(DropoutAddLayerNorm, SixteenBitBranchOnAFloatStream) {
  Tensor x = randn({3, 16}).to(kBFloat16), residual = randn({3, 16});
  auto [out, sum] = dropout_add_layer_norm(x, residual, ones({16}), zeros({16}), 0.0, true);
  EXPECT_EQ(out.dtype(), kBFloat16);
  EXPECT_EQ(sum.dtype(), kFloat32);
  EXPECT_TRUE(allclose(sum, residual + x.to(kFloat32), 0, 0));
  EXPECT_TRUE(allclose(out.to(kFloat32), layer_norm(sum, {16}).to(kBFloat16).to(kFloat32), 0, 0));
}

// Without a residual the stream starts at the op: sum = dropout(x), as dropout() draws it from the
// same seed, and out its norm, here given in bfloat16 from a float32 x (the embeddings' seam).
TEST(DropoutAddLayerNorm, WithoutAResidualTheSumIsTheDroppedBranch) {
  Tensor x = randn({6, 16}), w = randn({16}), b = randn({16});
  manual_seed(21);
  auto [out, sum] = dropout_add_layer_norm(x, Tensor(), w, b, 0.25, true, 1e-5, kBFloat16);
  manual_seed(21);
  const Tensor dropped = dropout(x, 0.25, true);
  EXPECT_EQ(sum.dtype(), kFloat32);
  EXPECT_EQ(out.dtype(), kBFloat16);
  EXPECT_TRUE(allclose(sum, dropped, 0, 0));
  EXPECT_FALSE(allclose(sum, x, 0, 0)) << "nothing was dropped";
  EXPECT_TRUE(allclose(out.to(kFloat32), layer_norm(dropped, {16}, w, b).to(kBFloat16).to(kFloat32), 0, 0));
  auto [eval_out, eval_sum] = dropout_add_layer_norm(x, Tensor(), w, b, 0.25, false);
  EXPECT_EQ(eval_out.dtype(), kFloat32);
  EXPECT_TRUE(allclose(eval_sum, x, 0, 0));
  EXPECT_TRUE(allclose(eval_out, layer_norm(x, {16}, w, b), 0, 0));
}

TEST(DropoutAddLayerNorm, Gradcheck) {
  // The dropout's mask is drawn again on each evaluation: a fixed seed makes it the same one.
  for (double p : {0.0, 0.4}) {
    auto f = [p](const std::vector<Tensor>& in) {
      manual_seed(11);
      auto [out, sum] = dropout_add_layer_norm(in[0], in[1], in[2], in[3], p, true);
      return out * 1.5 + sum * sum;  // both outputs' gradients at once
    };
    auto r = gradcheck(f, {leaf({3, 2, 6}), leaf({3, 2, 6}), positive_leaf({6}), leaf({6})});
    EXPECT_TRUE(r) << "p " << p << ": " << r.message;
    auto out_only = [p](const std::vector<Tensor>& in) {
      manual_seed(11);
      return std::get<0>(dropout_add_layer_norm(in[0], in[1], Tensor(), Tensor(), p, true));
    };
    r = gradcheck(out_only, {leaf({5, 4}), leaf({5, 4})});
    EXPECT_TRUE(r) << "p " << p << ", no weight: " << r.message;
    auto no_residual = [p](const std::vector<Tensor>& in) {
      manual_seed(11);
      auto [out, sum] = dropout_add_layer_norm(in[0], Tensor(), in[1], in[2], p, true);
      return out * 1.5 + sum * sum;
    };
    r = gradcheck(no_residual, {leaf({3, 2, 6}), positive_leaf({6}), leaf({6})});
    EXPECT_TRUE(r) << "p " << p << ", no residual: " << r.message;
  }
}

TEST(DropoutAddLayerNorm, Errors) {
  EXPECT_ERROR(dropout_add_layer_norm(zeros({2, 3}), zeros({2, 4})),
               "dropout_add_layer_norm: expected x and residual of one shape, got [2, 3] and [2, 4]");
  EXPECT_ERROR(dropout_add_layer_norm(zeros({2, 3}, kFloat64), zeros({2, 3})),
               "dropout_add_layer_norm: expected x in residual's dtype float32 or a 16-bit one, got float64");
  EXPECT_ERROR(dropout_add_layer_norm(zeros({2, 3}), zeros({2, 3}), ones({2})),
               "dropout_add_layer_norm: expected weight of shape [3] (the last dim of x of shape [2, 3]), "
               "got shape [2]");
  EXPECT_ERROR(dropout_add_layer_norm(zeros({2, 3}), zeros({2, 3}), {}, {}, 1.5), "expected a probability p in [0, 1]");
  EXPECT_ERROR(dropout_add_layer_norm(zeros({2, 3}).to(kBFloat16), zeros({2, 3}), {}, {}, 0.1, true, 1e-5, kFloat32),
               "dropout_add_layer_norm: expected out_dtype to be x's dtype bfloat16, got float32");
  EXPECT_ERROR(dropout_add_layer_norm(zeros({2, 3}), Tensor(), ones({2})),
               "dropout_add_layer_norm: expected weight of shape [3]");
}

// The embeddings' seam: embedding_sum then dropout_add_layer_norm, as one op.
TEST(EmbeddingDropoutLayerNorm, IsTheEmbeddingsSumThroughTheSeam) {
  const Tensor wte = randn({11, 8}), wpe = randn({5, 8}), w = randn({8}), b = randn({8});
  const Tensor ids = randint(11, {3, 5}), pos = arange(5, kInt64);
  manual_seed(4);
  auto [out, sum] = embedding_dropout_layer_norm(wte, ids, wpe, pos, w, b, 0.3, true, 1e-5, kBFloat16);
  manual_seed(4);
  auto [ref_out, ref_sum] = dropout_add_layer_norm(embedding_sum(wte, ids, wpe, pos), Tensor(), w, b, 0.3, true, 1e-5,
                                                   kBFloat16);
  EXPECT_EQ(out.shape(), (Shape{3, 5, 8}));
  EXPECT_EQ(out.dtype(), kBFloat16);
  EXPECT_TRUE(allclose(sum, ref_sum, 0, 0));
  EXPECT_TRUE(allclose(out.to(kFloat32), ref_out.to(kFloat32), 0, 0));
  auto f = [](const std::vector<Tensor>& in) {
    manual_seed(9);
    const Tensor tokens = Tensor::from_vector<int64_t>({3, 0, 3, 1, 2, 3}, {2, 3});
    auto [o, s] = embedding_dropout_layer_norm(in[0], tokens, in[1], arange(3, kInt64), in[2], in[3], 0.4, true);
    return o * 1.5 + s * s;
  };
  auto r = gradcheck(f, {leaf({4, 6}), leaf({3, 6}), positive_leaf({6}), leaf({6})});
  EXPECT_TRUE(r) << r.message;
  EXPECT_ERROR(embedding_dropout_layer_norm(wte, ids, wpe.to(kFloat64), pos),
               "embedding_dropout_layer_norm: expected two weights of one dtype and width");
  EXPECT_ERROR(embedding_dropout_layer_norm(wte, Tensor::from_vector<int64_t>({11}, {1}), wpe, arange(1, kInt64)),
               "out of range");
}

// ---------------------------------------------------------------------------------------------
// group_norm

TEST(GroupNorm, HandComputed) {
  // x [1, 4, 2] in 2 groups: channels 0-1 hold 1, 2, 3, 4 (mean 2.5, biased variance 1.25),
  // channels 2-3 hold 0, 0, 6, 6 (mean 3, variance 9). Weight and bias are per channel.
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 0, 0, 6, 6}, {1, 4, 2});
  Tensor w = Tensor::from_vector<double>({1, 2, 3, 4}), b = Tensor::from_vector<double>({0, 0, 1, -1});
  const double s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(9 + 1e-5);
  expect_near_all(group_norm(x, 2, w, b).to_vector<double>(),
                  {-1.5 / s0, -0.5 / s0, 0.5 / s0 * 2, 1.5 / s0 * 2, -3 / s1 * 3 + 1, -3 / s1 * 3 + 1, 3 / s1 * 4 - 1,
                   3 / s1 * 4 - 1},
                  1e-12, "group_norm");
}

TEST(GroupNorm, ForwardMatchesLoops) {
  manual_seed(7);
  struct Case {
    Shape x;
    int64_t groups;
  };
  for (const Case& k : std::vector<Case>{{{2, 6, 5}, 3}, {{2, 4, 3, 3}, 2}, {{3, 4}, 2}, {{2, 4, 3}, 1},
                                         {{2, 4, 3}, 4}, {{4, 64, 12, 12}, 8}}) {
    SCOPED_TRACE(::testing::PrintToString(k.x) + " in " + std::to_string(k.groups) + " groups");
    const int64_t n = k.x[0], c = k.x[1], l = trailing(k.x, 2), per = c / k.groups, g = k.groups;
    Tensor x = randn(k.x, kFloat64) * scalar_like(2, randn({1}, kFloat64)) + scalar_like(4, randn({1}, kFloat64));
    Tensor w = randn({c}, kFloat64), b = randn({c}, kFloat64);
    const std::vector<double> xv = x.to_vector<double>();
    const auto key = [=](int64_t i, int64_t ch) { return i * g + ch / per; };
    const Moments m = moments_ref(xv, n, c, l, n * g, key);
    expect_near_all(group_norm(x, g, w, b, 1e-4).to_vector<double>(),
                    normalize_ref(xv, n, c, l, m.mean, m.var, key, values(w), values(b), 1e-4), 1e-10, "out");
  }
}

TEST(GroupNorm, Gradcheck) {
  manual_seed(8);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return group_norm(in[0], 3, in[1], in[2]); },
                     {leaf({2, 6, 5}), positive_leaf({6}), leaf({6})});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return group_norm(in[0], 2, in[1], in[2]); },
                {leaf({2, 4, 3, 2}), positive_leaf({4}), leaf({4})});
  EXPECT_TRUE(r) << "images: " << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return group_norm(in[0], 2, in[1], in[2]); },
                {leaf({3, 4}), positive_leaf({4}), leaf({4})});
  EXPECT_TRUE(r) << "[N, C]: " << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return group_norm(in[0], 1); }, {leaf({1, 3, 4})});
  EXPECT_TRUE(r) << "one group, no affine, batch 1: " << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return group_norm(in[0], 4, in[1], in[2]); },
                {leaf({2, 4, 5}), positive_leaf({4}), leaf({4})});
  EXPECT_TRUE(r) << "a group per channel: " << r.message;
}

TEST(GroupNorm, Errors) {
  EXPECT_ERROR(group_norm(zeros({2, 6, 4}), 4),
               "group_norm: expected the channels of x to be divisible by num_groups, but got x of shape [2, 6, 4] "
               "(6 channels) and num_groups=4");
  EXPECT_ERROR(group_norm(zeros({6}), 2), "group_norm: expected x of shape [N, C, *] (at least 2-D), got shape [6] (1-D)");
  EXPECT_ERROR(group_norm(zeros({2, 6}), 0), "expected num_groups > 0, got 0");
  EXPECT_ERROR(group_norm(zeros({2, 6, 4}), 2, ones({3})),
               "group_norm: expected weight of shape [6] (one per channel of x of shape [2, 6, 4]), got shape [3]");
}

// ---------------------------------------------------------------------------------------------
// modules

TEST(NormalizationModules, BatchNormBuffersAndParameters) {
  nn::BatchNorm2d bn(3);
  std::vector<std::string> params, buffers;
  for (auto& [name, t] : bn->named_parameters()) params.push_back(name);
  for (auto& [name, t] : bn->named_buffers()) buffers.push_back(name);
  EXPECT_EQ(params, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(buffers, (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn->state_dict().size(), 5u);
  EXPECT_EQ(bn->weight.to_vector<float>(), std::vector<float>(3, 1.f));
  EXPECT_EQ(bn->bias.to_vector<float>(), std::vector<float>(3, 0.f));
  EXPECT_EQ(bn->running_mean.to_vector<float>(), std::vector<float>(3, 0.f));
  EXPECT_EQ(bn->running_var.to_vector<float>(), std::vector<float>(3, 1.f));
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 0);
  EXPECT_FALSE(bn->running_mean.requires_grad());

  nn::BatchNorm1d plain(nn::BatchNormOptions(4).affine(false).track_running_stats(false));
  EXPECT_TRUE(plain->named_parameters().empty());
  EXPECT_TRUE(plain->named_buffers().empty());
}

TEST(NormalizationModules, BatchNormTrainAndEval) {
  manual_seed(9);
  nn::BatchNorm1d bn(3);
  Tensor x = randn({6, 3, 4}, kFloat32) + scalar_like(2, zeros({}));
  Tensor out = bn(x);
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor want = batch_norm(x, rm, rv, Tensor(), Tensor(), true);
  EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(bn->running_mean.to_vector<float>(), rm.to_vector<float>());
  EXPECT_EQ(bn->running_var.to_vector<float>(), rv.to_vector<float>());
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  bn(x);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);

  // eval() reaches the layer through a container, uses the running statistics and updates nothing.
  nn::Sequential net(bn);
  net->eval();
  EXPECT_FALSE(bn->is_training());
  const std::vector<float> before = bn->running_mean.to_vector<float>();
  Tensor eval_out = net->forward(x);
  EXPECT_EQ(eval_out.to_vector<float>(),
            batch_norm(x, bn->running_mean, bn->running_var, bn->weight, bn->bias, false).to_vector<float>());
  EXPECT_EQ(bn->running_mean.to_vector<float>(), before);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
  // One sample per channel: refused in training, fine in eval.
  EXPECT_EQ(bn(zeros({1, 3})).shape(), (Shape{1, 3}));
  net->train();
  EXPECT_ERROR(bn(zeros({1, 3})), "Expected more than 1 value per channel when training, got input size [1, 3]");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2) << "a refused batch is not counted";
}

TEST(NormalizationModules, BatchNormCumulativeAverageWithoutMomentum) {
  manual_seed(10);
  nn::BatchNorm1d bn(nn::BatchNormOptions(2).momentum(std::nullopt));
  Tensor a = randn({5, 2}, kFloat64), b = randn({5, 2}, kFloat64);
  bn->to(kFloat64);
  bn(a);
  bn(b);
  const std::vector<double> ma = mean(a, {0}).to_vector<double>(), mb = mean(b, {0}).to_vector<double>();
  const std::vector<double> va = var(a, {0}).to_vector<double>(), vb = var(b, {0}).to_vector<double>();
  expect_near_all(bn->running_mean.to_vector<double>(), {(ma[0] + mb[0]) / 2, (ma[1] + mb[1]) / 2}, 1e-12,
                  "running_mean: the average of the batch means");
  expect_near_all(bn->running_var.to_vector<double>(), {(va[0] + vb[0]) / 2, (va[1] + vb[1]) / 2}, 1e-12,
                  "running_var: the average of the unbiased batch variances");
}

TEST(NormalizationModules, BatchNormWithoutRunningStatsUsesTheBatchInEval) {
  manual_seed(11);
  nn::BatchNorm2d bn(nn::BatchNormOptions(2).track_running_stats(false));
  Tensor x = randn({3, 2, 2, 2});
  Tensor train_out = bn(x);
  bn->eval();
  EXPECT_EQ(bn(x).to_vector<float>(), train_out.to_vector<float>());
}

TEST(NormalizationModules, BatchNormStateDictAndDtype) {
  manual_seed(12);
  nn::BatchNorm2d a(2), b(2);
  a(randn({4, 2, 3, 3}));
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(b->running_mean.to_vector<float>(), a->running_mean.to_vector<float>());
  EXPECT_EQ(b->running_var.to_vector<float>(), a->running_var.to_vector<float>());
  EXPECT_EQ(b->num_batches_tracked.item<int64_t>(), 1);
  b->to(kFloat64);
  EXPECT_EQ(b->running_mean.dtype(), kFloat64);
  EXPECT_EQ(b->weight.dtype(), kFloat64);
  EXPECT_EQ(b->num_batches_tracked.dtype(), kInt64) << "the count stays an integer";
}

TEST(NormalizationModules, ModulesMatchFunctional) {
  manual_seed(13);
  nn::LayerNorm ln(nn::LayerNormOptions({3, 4}).eps(1e-3));
  Tensor x = randn({2, 3, 4});
  EXPECT_EQ(ln(x).to_vector<float>(), layer_norm(x, {3, 4}, ln->weight, ln->bias, 1e-3).to_vector<float>());
  EXPECT_EQ(ln->weight.shape(), (Shape{3, 4}));
  nn::GroupNorm gn(2, 4);
  Tensor y = randn({2, 4, 3});
  EXPECT_EQ(gn(y).to_vector<float>(), nn::functional::group_norm(y, 2, gn->weight, gn->bias).to_vector<float>());
  // Gradients reach the parameters.
  ((ln(x) * x).sum() + (gn(y) * y).sum()).backward();
  EXPECT_TRUE(ln->weight.grad().defined());
  EXPECT_TRUE(gn->bias.grad().defined());

  EXPECT_TRUE(nn::LayerNorm(nn::LayerNormOptions({4}).elementwise_affine(false))->named_parameters().empty());
  nn::LayerNorm no_bias(nn::LayerNormOptions({4}).bias(false));
  ASSERT_EQ(no_bias->named_parameters().size(), 1u);
  EXPECT_EQ(no_bias->named_parameters()[0].first, "weight");
  EXPECT_TRUE(nn::GroupNorm(nn::GroupNormOptions(1, 3).affine(false))->named_parameters().empty());
}

TEST(NormalizationModules, Printing) {
  EXPECT_EQ(minidl::str(*nn::BatchNorm2d(16)), "BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
  EXPECT_EQ(str(*nn::BatchNorm1d(nn::BatchNormOptions(8).momentum(std::nullopt).affine(false))),
            "BatchNorm1d(8, eps=1e-05, momentum=None, affine=false, track_running_stats=true)");
  EXPECT_EQ(str(*nn::LayerNorm(Shape{10})), "LayerNorm([10], eps=1e-05, elementwise_affine=true)");
  EXPECT_EQ(str(*nn::LayerNorm(nn::LayerNormOptions({2, 3}).eps(1e-6))),
            "LayerNorm([2, 3], eps=1e-06, elementwise_affine=true)");
  EXPECT_EQ(str(*nn::GroupNorm(2, 6)), "GroupNorm(2, 6, eps=1e-05, affine=true)");
}

TEST(NormalizationModules, Errors) {
  nn::BatchNorm1d bn1(3);
  EXPECT_ERROR(bn1(zeros({2, 3, 4, 4})), "BatchNorm1d: expected 2D or 3D input ([N, C] or [N, C, L]) (got 4D input");
  nn::BatchNorm2d bn2(3);
  EXPECT_ERROR(bn2(zeros({2, 3, 4})), "BatchNorm2d: expected 4D input ([N, C, H, W]) (got 3D input");
  EXPECT_ERROR(bn2(zeros({2, 4, 3, 3})), "expected weight of shape [4] (one per channel of x of shape [2, 4, 3, 3]), got shape [3]");
  nn::BatchNorm2d no_affine(nn::BatchNormOptions(3).affine(false));
  EXPECT_ERROR(no_affine(zeros({2, 4, 3, 3})),
               "expected running_mean of shape [4] (one per channel of x of shape [2, 4, 3, 3]), got shape [3]");
  EXPECT_ERROR(nn::GroupNorm(4, 6), "GroupNorm: num_channels must be divisible by num_groups, got num_channels=6 and "
                                    "num_groups=4");
  nn::LayerNorm ln(Shape{4});
  EXPECT_ERROR(ln(zeros({4, 3})), "given normalized_shape=[4], expected x of shape [*, 4], but got shape [4, 3]");
  EXPECT_ERROR(nn::BatchNorm1d(nn::BatchNormOptions(0)), "expected num_features > 0");
}

}  // namespace minidl::normalization_test
