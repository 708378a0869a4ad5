// scaled_dot_product_attention: float64 gradients of the fused CPU kernel and of the composition,
// the two paths against each other in float32, the kernel's logsumexp, masks (bool, additive,
// broadcast), 16-bit inputs, dropout, the errors; on CUDA (skipped without a GPU) the device against
// the CPU, gradients in float64, and 16-bit fused kernels against float32.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "minidl.h"
#include "ops/kernels.h"
#include "attention_test_util.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::attention_test {

using minidl::testing::all_close;
using minidl::testing::expect_error;
using minidl::testing::gpu;
using minidl::testing::packed_heads;

namespace {

Tensor leaf(const Shape& shape, DType dtype = kFloat64) { return randn(shape, dtype).requires_grad_(); }

// Float64 gradients are exact up to the central differences' own error, so tolerances are tight.
GradcheckOptions tight() {
  GradcheckOptions o;
  o.atol = 1e-8;
  o.rtol = 1e-6;
  return o;
}

void expect_gradcheck(const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                      std::vector<Tensor> inputs, GradcheckOptions options = tight()) {
  GradcheckResult r = gradcheck(f, std::move(inputs), options);
  EXPECT_TRUE(r) << what << ": " << r.message;
}

// softmax(q k^T * scale + bias) v by explicit loops over [L, S] for one 2-D slice, in float64: the
// hand reference (bias -inf hides a key).
std::vector<double> reference_2d(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<double>& bias,
                                 double scale) {
  const int64_t L = q.size(0), S = k.size(0), E = q.size(1), Ev = v.size(1);
  const auto Q = q.to(kFloat64).contiguous().to_vector<double>(), K = k.to(kFloat64).contiguous().to_vector<double>(),
             V = v.to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> out(static_cast<size_t>(L * Ev), 0.0);
  for (int64_t i = 0; i < L; ++i) {
    std::vector<double> s(static_cast<size_t>(S));
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < S; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += Q[i * E + e] * K[j * E + e];
      s[j] = dot * scale + bias[i * S + j];
      m = std::max(m, s[j]);
    }
    double total = 0;
    for (double& x : s) total += (x = std::exp(x - m));
    for (int64_t j = 0; j < S; ++j)
      for (int64_t e = 0; e < Ev; ++e) out[i * Ev + e] += s[j] / total * V[j * Ev + e];
  }
  return out;
}

void expect_values(const Tensor& got, const std::vector<double>& want, double tol) {
  const auto g = got.to(kFloat64).contiguous().to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "element " << i;
}

// Output and input gradients of f(q, k, v) for the seed gradient `seed`.
std::vector<Tensor> run_with_grads(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f,
                                   const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& seed) {
  Tensor q = q0.detach().clone().requires_grad_(), k = k0.detach().clone().requires_grad_(),
         v = v0.detach().clone().requires_grad_();
  Tensor out = f(q, k, v);
  sum(mul(out, seed)).backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

}  // namespace

TEST(Attention, CpuHasAFusedKernelWithoutDropout) {
  Kernels& cpu = kernels_for(Device::cpu());
  EXPECT_TRUE(cpu.fused_attention_supports(kFloat64, 4, 3, false));
  EXPECT_TRUE(cpu.fused_attention_supports(kFloat32, 64, 64, false));
  EXPECT_TRUE(cpu.fused_attention_supports(kBFloat16, 64, 64, false));
  EXPECT_FALSE(cpu.fused_attention_supports(kFloat32, 64, 64, true));  // dropout is composed
}

TEST(Attention, MatchesHandComputedValues) {
  manual_seed(1);
  const Tensor q = randn({3, 4}, kFloat64), k = randn({5, 4}, kFloat64), v = randn({5, 2}, kFloat64);
  std::vector<double> none(15, 0.0), causal(15, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 5; ++j) causal[i * 5 + j] = -std::numeric_limits<double>::infinity();
  expect_values(scaled_dot_product_attention(q, k, v), reference_2d(q, k, v, none, 0.5), 1e-12);
  expect_values(scaled_dot_product_attention_math(q, k, v), reference_2d(q, k, v, none, 0.5), 1e-12);
  expect_values(scaled_dot_product_attention(q, k, v, {}, 0.0, true), reference_2d(q, k, v, causal, 0.5), 1e-12);
  expect_values(scaled_dot_product_attention_math(q, k, v, {}, 0.0, true), reference_2d(q, k, v, causal, 0.5), 1e-12);
  expect_values(scaled_dot_product_attention(q, k, v, {}, 0.0, false, 0.3), reference_2d(q, k, v, none, 0.3), 1e-12);
}

TEST(Attention, GradcheckFusedCpuPath) {
  manual_seed(2);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    // L = 5 < S = 7 and L = 7 > S = 5 (causal rows then see every key), Ev != E, batch dims broadcast.
    expect_gradcheck("L < S", [causal](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, causal); },
                     {leaf({2, 5, 4}), leaf({2, 7, 4}), leaf({2, 7, 3})});
    expect_gradcheck("L > S, broadcast k and v",
                     [causal](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, causal, 0.7); },
                     {leaf({2, 1, 7, 3}), leaf({3, 5, 3}), leaf({5, 2})});
  }
}

TEST(Attention, GradcheckComposedPath) {
  manual_seed(3);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    expect_gradcheck("math", [causal](auto& in) { return scaled_dot_product_attention_math(in[0], in[1], in[2], {}, 0, causal); },
                     {leaf({2, 5, 4}), leaf({2, 7, 4}), leaf({2, 7, 3})});
  }
  // An additive mask takes the composed path and gets a gradient of its own.
  expect_gradcheck("additive mask", [](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); },
                   {leaf({2, 3, 4}), leaf({2, 5, 4}), leaf({2, 5, 2}), leaf({3, 5})});
  const Tensor keep = Tensor::from_vector<bool>({true, false, true, true, false, true, true, true, false, true}, {2, 1, 5});
  expect_gradcheck("bool mask", [keep](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], keep); },
                   {leaf({2, 3, 4}), leaf({2, 5, 4}), leaf({2, 5, 2})});
}

TEST(Attention, FusedMatchesComposedInFloat32) {
  manual_seed(4);
  // 70 queries make two query blocks of the CPU kernel; causal with L > S and L < S.
  for (auto [L, S] : {std::pair<int64_t, int64_t>{70, 45}, {33, 70}, {1, 1}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE("L=" + std::to_string(L) + " S=" + std::to_string(S) + (causal ? " causal" : ""));
      const Tensor q = randn({2, 3, L, 16}), k = randn({2, 3, S, 16}), v = randn({2, 3, S, 8});
      const Tensor seed = randn({2, 3, L, 8});
      auto fused = run_with_grads([&](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, {}, 0, causal); },
                                  q, k, v, seed);
      auto math = run_with_grads(
          [&](auto& a, auto& b, auto& c) { return scaled_dot_product_attention_math(a, b, c, {}, 0, causal); }, q, k, v, seed);
      const char* names[] = {"out", "grad q", "grad k", "grad v"};
      for (int i = 0; i < 4; ++i) EXPECT_TRUE(all_close(fused[i], math[i], 2e-5, 2e-5)) << names[i];
    }
  }
}

namespace {

// Attention of packed_heads(qkv, H) [B, H, T, hs], fused or composed.
Tensor packed_attention(const Tensor& qkv, int64_t H, bool causal, bool fused) {
  const std::vector<Tensor> h = packed_heads(qkv, H);
  return fused ? scaled_dot_product_attention(h[0], h[1], h[2], {}, 0, causal)
               : scaled_dot_product_attention_math(h[0], h[1], h[2], {}, 0, causal);
}

// The heads merged back to [B, T, C], as gpt.h does.
Tensor merge_heads(const Tensor& y) {
  return y.transpose(1, 2).contiguous().view({y.size(0), y.size(2), y.size(1) * y.size(3)});
}

}  // namespace

// The fused path takes such views in place (rows 8-element aligned: hs = 8, 3C = 48): its output is
// made in [B, T, H, hs] memory (its transpose(1, 2) is contiguous), and its values and gradients,
// through the split views back to the projection, are the composed path's; in float64 by gradcheck.
TEST(Attention, FusedReadsPackedHeadViewsInPlace) {
  manual_seed(12);
  const int64_t B = 2, H = 2;
  {
    const std::vector<Tensor> h = packed_heads(randn({B, 5, 3 * H * 8}, kFloat64), H);
    EXPECT_FALSE(h[0].is_contiguous());
    const Tensor y = scaled_dot_product_attention(h[0], h[1], h[2]);
    EXPECT_EQ(y.shape(), (Shape{B, H, 5, 8}));
    EXPECT_TRUE(y.transpose(1, 2).is_contiguous()) << "the output is not in [B, T, H, hs] memory";
  }
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    expect_gradcheck("packed qkv", [causal](auto& in) { return merge_heads(packed_attention(in[0], H, causal, true)); },
                     {leaf({B, 3, 3 * H * 8})});
    // Against the composed path in float32, T = 37 (odd) and hs = 16. The seed gradient reaches the
    // op as the merge's backward makes it (a transposed view, read in place), or with a non-unit
    // last stride (made contiguous).
    const int64_t T = 37, hs = 16;
    const Tensor qkv = randn({B, T, 3 * H * hs}), seed = randn({B, T, H * hs}), seed_t = randn({B, H, hs, T});
    auto run = [&](bool fused, bool strided_seed) {
      Tensor x = qkv.clone().requires_grad_();
      Tensor y = packed_attention(x, H, causal, fused);
      if (strided_seed) sum(mul(y.transpose(2, 3).contiguous(), seed_t)).backward();
      else sum(mul(merge_heads(y), seed)).backward();
      return std::pair{y.detach(), x.grad()};
    };
    for (bool strided_seed : {false, true}) {
      const auto got = run(true, strided_seed), want = run(false, strided_seed);
      EXPECT_TRUE(all_close(got.first, want.first, 2e-5, 2e-5)) << "out";
      EXPECT_TRUE(all_close(got.second, want.second, 2e-5, 2e-5)) << "grad of qkv, strided seed " << strided_seed;
    }
  }
}

// Head views that the kernels cannot read in place (rows 4 elements apart: hs = 4, 3C = 24) take
// the copying path, with the same values and gradients.
TEST(Attention, FusedCopiesHeadViewsItCannotReadInPlace) {
  manual_seed(13);
  expect_gradcheck("hs = 4", [](auto& in) { return merge_heads(packed_attention(in[0], 2, true, true)); },
                   {leaf({2, 3, 24})});
  const Tensor qkv = randn({2, 6, 24}), seed = randn({2, 6, 8});
  Tensor a = qkv.clone().requires_grad_(), b = qkv.clone().requires_grad_();
  Tensor ya = merge_heads(packed_attention(a, 2, false, true)), yb = merge_heads(packed_attention(b, 2, false, false));
  sum(mul(ya, seed)).backward();
  sum(mul(yb, seed)).backward();
  EXPECT_TRUE(all_close(ya, yb, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(a.grad(), b.grad(), 1e-5, 1e-5));
}

TEST(Attention, KernelLogsumexpOfEachRow) {
  manual_seed(5);
  const Tensor q = randn({2, 5, 4}), k = randn({2, 6, 4}), v = randn({2, 6, 3});
  for (bool causal : {false, true}) {
    Tensor out = Tensor::empty({2, 5, 3}), lse = Tensor::empty({2, 5}), rng = Tensor::empty({2}, kInt64);
    kernels_for(Device::cpu()).attention_forward(q, k, v, 0.5, causal, 0, out, lse, rng, nullptr);
    Tensor scores = matmul(q, k.transpose(1, 2)) * 0.5;
    if (causal) scores = masked_fill(scores, logical_not(tril(ones({5, 6}, kBool))), -INFINITY);
    EXPECT_TRUE(all_close(lse, scores.logsumexp({2}), 1e-5, 1e-5)) << (causal ? "causal" : "");
    EXPECT_TRUE(all_close(out, scaled_dot_product_attention_math(q, k, v, {}, 0, causal, 0.5), 1e-5, 1e-5));
  }
}

TEST(Attention, MasksBoolAdditiveAndBroadcast) {
  manual_seed(6);
  const Tensor q = randn({2, 3, 4, 8}, kFloat64), k = randn({2, 3, 6, 8}, kFloat64), v = randn({2, 3, 6, 5}, kFloat64);
  // A key padding mask [N, 1, 1, S]: batch 0 sees keys 0..3, batch 1 all six.
  std::vector<bool> keep_v(12, true);
  keep_v[4] = keep_v[5] = false;
  const Tensor keep = Tensor::from_vector<bool>(keep_v, {2, 1, 1, 6});
  const Tensor additive = masked_fill(zeros({2, 1, 1, 6}, kFloat64), logical_not(keep), -INFINITY);
  const Tensor with_bool = scaled_dot_product_attention(q, k, v, keep);
  EXPECT_TRUE(all_close(with_bool, scaled_dot_product_attention(q, k, v, additive), 1e-12, 1e-12));
  // Batch 0 equals attention over its first four keys alone; batch 1 is unmasked.
  EXPECT_TRUE(all_close(with_bool[0], scaled_dot_product_attention(q[0], k[0].narrow(1, 0, 4), v[0].narrow(1, 0, 4)),
                        1e-12, 1e-12));
  EXPECT_TRUE(all_close(with_bool[1], scaled_dot_product_attention(q[1], k[1], v[1]), 1e-12, 1e-12));
  // A bool [L, S] causal mask equals is_causal.
  const Tensor causal = tril(ones({4, 6}, kBool));
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v, causal),
                        scaled_dot_product_attention(q, k, v, {}, 0, true), 1e-12, 1e-12));
  // An additive mask of per-element values against the hand computation of one slice.
  const Tensor bias = randn({4, 6}, kFloat64);
  expect_values(scaled_dot_product_attention(q, k, v, bias)[1][2], reference_2d(q[1][2], k[1][2], v[1][2],
                                                                                bias.to_vector<double>(), 1 / std::sqrt(8.0)),
                1e-12);
}

TEST(Attention, RowThatSeesNoKeyIsNaNOnTheComposedPath) {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 4});
  std::vector<bool> keep_v(15, true);
  for (int j = 0; j < 5; ++j) keep_v[5 + j] = false;  // query row 1 sees nothing
  const Tensor out = scaled_dot_product_attention(q, k, v, Tensor::from_vector<bool>(keep_v, {3, 5}));
  EXPECT_TRUE(std::isnan(out[0][1][0].item<float>()));  // PyTorch's math backend gives NaN too
  EXPECT_FALSE(std::isnan(out[0][0][0].item<float>()));
}

TEST(Attention, SixteenBitAgainstFloat32) {
  manual_seed(7);
  const Tensor q = randn({2, 9, 16}), k = randn({2, 11, 16}), v = randn({2, 11, 16});
  for (DType dtype : {kBFloat16, kFloat16}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (causal ? " causal" : ""));
      const Tensor want = scaled_dot_product_attention_math(q, k, v, {}, 0, causal);
      const double tol = dtype == kBFloat16 ? 4e-2 : 5e-3;  // the inputs' own rounding dominates
      Tensor fused = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), {}, 0, causal);
      Tensor math = scaled_dot_product_attention_math(q.to(dtype), k.to(dtype), v.to(dtype), {}, 0, causal);
      EXPECT_EQ(fused.dtype(), dtype);
      EXPECT_EQ(math.dtype(), dtype);
      EXPECT_TRUE(all_close(fused.to(kFloat32), want, tol, tol)) << "fused";
      EXPECT_TRUE(all_close(math.to(kFloat32), want, tol, tol)) << "composed";
      // Gradients flow through the 16-bit fused path.
      Tensor qh = q.to(dtype).requires_grad_();
      sum(scaled_dot_product_attention(qh, k.to(dtype), v.to(dtype), {}, 0, causal)).backward();
      ASSERT_TRUE(qh.grad().defined());
      EXPECT_EQ(qh.grad().dtype(), dtype);
    }
  }
}

TEST(Attention, DropoutIsComposedAndReproducible) {
  const Tensor q = randn({2, 4, 8}), k = randn({2, 6, 8}), v = randn({2, 6, 8});
  manual_seed(8);
  Tensor a = scaled_dot_product_attention(q, k, v, {}, 0.5);
  manual_seed(8);
  Tensor b = scaled_dot_product_attention_math(q, k, v, {}, 0.5);
  EXPECT_TRUE(all_close(a, b, 0, 0));
  EXPECT_FALSE(all_close(a, scaled_dot_product_attention(q, k, v), 1e-3, 1e-3));
  // The dropped weights are the returned ones: out = weights @ v, kept weights scaled by 2.
  Tensor weights;
  manual_seed(9);
  Tensor out = scaled_dot_product_attention_math(q, k, v, {}, 0.5, false, std::nullopt, &weights);
  EXPECT_TRUE(all_close(out, matmul(weights, v), 1e-5, 1e-5));
  Tensor clean;
  scaled_dot_product_attention_math(q, k, v, {}, 0.0, false, std::nullopt, &clean);
  EXPECT_TRUE(all_close(weights, where(eq(weights, 0.0), zeros_like(clean), clean * 2.0), 1e-6, 1e-6));
}

TEST(Attention, ClearErrors) {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  expect_error([&] { scaled_dot_product_attention(randn({4}), k, v); }, {"scaled_dot_product_attention", "at least 2"});
  expect_error([&] { scaled_dot_product_attention(q, randn({2, 5, 3}), v); }, {"E = 4", "key's 3"});
  expect_error([&] { scaled_dot_product_attention(q, k, randn({2, 4, 6})); }, {"S = 5", "value has 4"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({3, 4}, kBool)); },
               {"attn_mask of shape [3, 4]", "[2, 3, 5]"});
  expect_error([&] { scaled_dot_product_attention(q, k.to(kFloat64), v); }, {"one dtype", "float64"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({3, 5}, kInt64)); }, {"attn_mask", "int64"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({3, 5}, kBool), 0, true); }, {"is_causal"});
  expect_error([&] { scaled_dot_product_attention(q, k, v, {}, 1.5); }, {"dropout_p"});
  expect_error([&] { scaled_dot_product_attention(randn({2, 3, 4}), randn({3, 5, 4}), randn({3, 5, 6})); },
               {"batch dims", "query [2]", "key [3]"});  // 2 and 3 heads, say
}

// Grouped-query attention: query head h reads key and value head h / (Hq / Hk), as PyTorch's enable_gqa.
TEST(Attention, GroupedQueryHeadsShareKeyHeads) {
  manual_seed(41);
  const Tensor q = randn({2, 6, 5, 8}, kFloat64), k = randn({2, 2, 7, 8}, kFloat64), v = randn({2, 3, 7, 4}, kFloat64);
  for (bool causal : {false, true}) {
    const Tensor out = scaled_dot_product_attention(q, k, v, {}, 0, causal, std::nullopt, true);
    ASSERT_EQ(out.shape(), (Shape{2, 6, 5, 4}));
    // Each query head against its own key and value heads, by hand: q head h reads k head h / 3, v head h / 2.
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 6; ++h) {
        std::vector<double> bias(5 * 7, 0.0);
        for (int64_t i = 0; i < 5; ++i)
          for (int64_t j = 0; j < 7; ++j)
            if (causal && j > i) bias[i * 7 + j] = -std::numeric_limits<double>::infinity();
        SCOPED_TRACE("batch " + std::to_string(b) + " head " + std::to_string(h) + (causal ? " causal" : ""));
        expect_values(out[b][h], reference_2d(q[b][h], k[b][h / 3], v[b][h / 2], bias, 1 / std::sqrt(8.0)), 1e-12);
      }
    EXPECT_TRUE(all_close(scaled_dot_product_attention_math(q, k, v, {}, 0, causal, std::nullopt, nullptr, true), out,
                          1e-12, 1e-12));
  }
  // Heads that already agree: as without it.
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, q, q, {}, 0, false, std::nullopt, true),
                        scaled_dot_product_attention(q, q, q), 0, 0));
  // A key head's gradient sums over the query heads of its group.
  expect_gradcheck("gqa fused",
                   [](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, true, std::nullopt, true); },
                   {leaf({1, 4, 3, 4}), leaf({1, 2, 5, 4}), leaf({1, 1, 5, 3})});
  expect_gradcheck("gqa with a mask",
                   [](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0, false, std::nullopt, true); },
                   {leaf({4, 3, 4}), leaf({2, 5, 4}), leaf({2, 5, 3}), leaf({3, 5})});
  expect_error([&] { scaled_dot_product_attention(q, randn({2, 4, 7, 8}, kFloat64), v, {}, 0, false, std::nullopt, true); },
               {"enable_gqa", "key (4)", "query's (6)"});
  expect_error([&] { scaled_dot_product_attention(randn({5, 8}), randn({7, 8}), randn({7, 8}), {}, 0, false, std::nullopt, true); },
               {"enable_gqa", "heads dim", "[5, 8]"});
  // Without enable_gqa, 6 and 2 heads do not broadcast.
  expect_error([&] { scaled_dot_product_attention(q, k, k); }, {"batch dims", "do not broadcast"});
}

// ---- CUDA (skipped without a GPU) ----

TEST(CudaSdpa, FusedMatchesCpuInFloat32) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (int64_t E : {32, 64, 128}) {
    for (auto [L, S] : {std::pair<int64_t, int64_t>{1, 1}, {17, 17}, {130, 77}, {64, 200}}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE("E=" + std::to_string(E) + " L=" + std::to_string(L) + " S=" + std::to_string(S) +
                     (causal ? " causal" : ""));
        minidl::testing::expect_cpu_cuda_agree(
            "sdpa", [causal](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, causal); },
            {randn({2, 3, L, E}), randn({2, 3, S, E}), randn({2, 3, S, E})}, 2e-4);
      }
    }
  }
}

TEST(CudaSdpa, MaskedAndBroadcastMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const Tensor keep = gt(rand({2, 1, 1, 9}), 0.3);
  minidl::testing::expect_cpu_cuda_agree(
      "bool mask", [&](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], keep.to(in[0].device())); },
      {randn({2, 3, 5, 32}), randn({2, 3, 9, 32}), randn({2, 3, 9, 32})}, 2e-4);
  minidl::testing::expect_cpu_cuda_agree(
      "additive mask", [](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); },
      {randn({2, 5, 16}), randn({2, 9, 16}), randn({2, 9, 8}), randn({5, 9})}, 2e-4);
  minidl::testing::expect_cpu_cuda_agree(
      "broadcast k, v", [](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, true); },
      {randn({2, 3, 40, 64}), randn({3, 40, 64}), randn({40, 64})}, 2e-4);
}

TEST(CudaSdpa, GroupedQueryHeadsMatchCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor q = randn({2, 6, 40, 64}).to(dtype), k = randn({2, 2, 40, 64}).to(dtype), v = randn({2, 2, 40, 64}).to(dtype);
    const Tensor cpu = scaled_dot_product_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32), {}, 0, true,
                                                    std::nullopt, true);
    const Tensor cuda = scaled_dot_product_attention(q.to(gpu()), k.to(gpu()), v.to(gpu()), {}, 0, true, std::nullopt, true);
    EXPECT_TRUE(all_close(cuda.to(kFloat32), cpu, dtype == kFloat32 ? 2e-4 : 2e-2, dtype == kFloat32 ? 2e-4 : 2e-2));
  }
  minidl::testing::expect_cpu_cuda_agree(
      "gqa gradients",
      [](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, true, std::nullopt, true); },
      {randn({2, 4, 17, 32}), randn({2, 1, 17, 32}), randn({2, 2, 17, 32})}, 2e-4);
}

TEST(CudaSdpa, GradcheckFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  auto g = [](const Shape& s) { return randn(s, kFloat64).to(gpu()).requires_grad_(); };
  for (bool causal : {false, true}) {
    expect_gradcheck("sdpa", [causal](auto& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0, causal); },
                     {g({2, 5, 4}), g({2, 7, 4}), g({2, 7, 3})});
    expect_gradcheck("math",
                     [causal](auto& in) { return scaled_dot_product_attention_math(in[0], in[1], in[2], {}, 0, causal); },
                     {g({2, 5, 4}), g({2, 7, 4}), g({2, 7, 3})});
  }
}

TEST(CudaSdpa, SixteenBitFusedAgainstFloat32) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kBFloat16, kFloat16}) {
    for (int64_t E : {32, 64, 128}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " E=" + std::to_string(E) + (causal ? " causal" : ""));
        const Tensor q = randn({2, 2, 100, E}, kFloat32, gpu()), k = randn({2, 2, 75, E}, kFloat32, gpu()),
                     v = randn({2, 2, 75, E}, kFloat32, gpu()), seed = randn({2, 2, 100, E}, kFloat32, gpu());
        // The reference sees the same rounded inputs, so only the kernel's own rounding is compared.
        const Tensor qh = q.to(dtype), kh = k.to(dtype), vh = v.to(dtype);
        auto fused = run_with_grads([&](auto& a, auto& b, auto& c) { return scaled_dot_product_attention(a, b, c, {}, 0, causal); },
                                    qh, kh, vh, seed.to(dtype));
        auto want = run_with_grads(
            [&](auto& a, auto& b, auto& c) { return scaled_dot_product_attention_math(a, b, c, {}, 0, causal); },
            qh.to(kFloat32), kh.to(kFloat32), vh.to(kFloat32), seed.to(dtype).to(kFloat32));
        // Errors against each tensor's own scale: the kernel rounds P and dS to 16 bits before its GEMMs.
        const double tol = dtype == kBFloat16 ? 3e-2 : 5e-3;
        const char* names[] = {"out", "grad q", "grad k", "grad v"};
        for (int i = 0; i < 4; ++i) {
          EXPECT_EQ(fused[i].dtype(), dtype) << names[i];
          const double scale = std::max(1.0, want[i].abs().max().item<double>());
          EXPECT_TRUE(all_close(fused[i].to(kFloat32), want[i], tol * scale, 0)) << names[i];
        }
      }
    }
  }
}

TEST(CudaSdpa, DevicesMustAgree) {
  MINIDL_REQUIRE_CUDA();
  expect_error([] { scaled_dot_product_attention(randn({2, 3, 4}, kFloat32, gpu()), randn({2, 5, 4}), randn({2, 5, 4})); },
               {"scaled_dot_product_attention", "cuda:0", "cpu"});
}

// Forward and backward captured in a CUDA graph replay on new inputs as eager runs do: the composed
// path (float64, which has no fused kernel; its causal mask made on the device) and the fused one.
TEST(CudaSdpa, CapturedInACudaGraphReplaysOnNewInputs) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  for (DType dtype : {kFloat64, kFloat32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Shape qs{2, 3, 20, 32}, ks{2, 3, 27, 32};
    Tensor q = randn(qs, dtype, gpu()).requires_grad_(), k = randn(ks, dtype, gpu()).requires_grad_(),
           v = randn(ks, dtype, gpu()).requires_grad_();
    const Tensor seed = randn(qs, dtype, gpu());
    auto step = [&] {
      Tensor out = scaled_dot_product_attention(q, k, v, {}, 0, /*is_causal=*/true);
      std::vector<Tensor> grads = autograd::grad({sum(mul(out, seed))}, {q, k, v});
      grads.insert(grads.begin(), out.detach());
      return grads;
    };
    step();  // warm-up outside the capture (library handles, workspaces)
    cuda::Graph graph;
    graph.capture_begin();
    std::vector<Tensor> captured = step();
    graph.capture_end();
    for (int replay = 0; replay < 2; ++replay) {
      {
        NoGradGuard no_grad;
        q.detach().copy_(randn(qs, dtype, gpu()));
        k.detach().copy_(randn(ks, dtype, gpu()));
        v.detach().copy_(randn(ks, dtype, gpu()));
      }
      graph.replay();
      std::vector<Tensor> eager = step();
      for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(all_close(captured[i], eager[i], 1e-6, 1e-6)) << i;
    }
  }
}

}  // namespace minidl::attention_test
