// pad (constant, reflect, replicate, circular) with values by hand, as PyTorch gives them, and
// einsum against the explicit compositions it stands for; float64 gradchecks and the errors.
#include <gtest/gtest.h>

#include "minidl.h"
#include "nn/functional.h"
#include "ops/einsum.h"
#include "ops/pad.h"
#include "float64_util.h"
#include "test_util.h"

namespace minidl::pad_einsum_test {

using minidl::testing::expect_error;
using minidl::testing::f64;
using minidl::testing::values;
using minidl::testing::leaf;
using minidl::testing::expect_gradcheck;

namespace {

void expect_near(const Tensor& a, const Tensor& b, double tol = 1e-12) {
  ASSERT_EQ(a.shape(), b.shape());
  std::vector<double> x = values(a), y = values(b);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol) << "element " << i;
}

}  // namespace

TEST(Pad, Constant) {
  Tensor x = f64({1, 2, 3});
  EXPECT_EQ(values(pad(x, {1, 2})), (std::vector<double>{0, 1, 2, 3, 0, 0}));
  EXPECT_EQ(values(pad(x, {0, 1}, "constant", 5)), (std::vector<double>{1, 2, 3, 5}));
  EXPECT_EQ(values(pad(x, {-1, 1})), (std::vector<double>{2, 3, 0}));  // a negative pad crops
  Tensor m = f64({1, 2, 3, 4}, {2, 2});
  Tensor p = pad(m, {1, 0, 0, 1});  // left 1 on the last dim, bottom 1 on the first
  EXPECT_EQ(p.shape(), (Shape{3, 3}));
  EXPECT_EQ(values(p), (std::vector<double>{0, 1, 2, 0, 3, 4, 0, 0, 0}));
  EXPECT_EQ(pad(zeros({2, 3, 4, 5}), {1, 1, 2, 2, 3, 3}).shape(), (Shape{2, 9, 8, 7}));
  EXPECT_EQ(pad(ones({2}, kInt64), {1, 0}).dtype(), kInt64);
  expect_gradcheck("constant", [](auto& in) { return pad(in[0], {1, 2, -1, 1}, "constant", 0.5); }, {leaf({3, 4})});
}

TEST(Pad, ReflectReplicateCircular) {
  Tensor x = f64({1, 2, 3, 4}, {1, 1, 4});
  EXPECT_EQ(values(pad(x, {2, 1}, "reflect")), (std::vector<double>{3, 2, 1, 2, 3, 4, 3}));
  EXPECT_EQ(values(pad(x, {2, 1}, "replicate")), (std::vector<double>{1, 1, 1, 2, 3, 4, 4}));
  EXPECT_EQ(values(pad(x, {2, 1}, "circular")), (std::vector<double>{3, 4, 1, 2, 3, 4, 1}));
  EXPECT_EQ(values(pad(x, {4, 0}, "circular")), (std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4}));
  // 2-D reflect of [[1, 2, 3], [4, 5, 6], [7, 8, 9]] by one on every side.
  Tensor img = f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor r = pad(img, {1, 1, 1, 1}, "reflect");
  EXPECT_EQ(r.shape(), (Shape{1, 1, 5, 5}));
  EXPECT_EQ(values(r), (std::vector<double>{5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 8, 7, 8, 9, 8, 5, 4, 5, 6, 5}));
  // [C, H, W] (no batch) takes a 2-D pad too; the options form is F::pad's.
  Tensor chw = pad(f64({1, 2, 3, 4}, {1, 2, 2}), nn::functional::PadFuncOptions({1, 0, 0, 1}).mode("replicate"));
  EXPECT_EQ(values(chw), (std::vector<double>{1, 1, 2, 3, 3, 4, 3, 3, 4}));
  // The edge is copied three times by a replicate pad of two: its gradient is 3.
  Tensor ones3 = ones({1, 1, 3}, kFloat64).requires_grad_();
  sum(pad(ones3, {2, 0}, "replicate")).backward();
  EXPECT_EQ(values(ones3.grad()), (std::vector<double>{3, 1, 1}));
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    expect_gradcheck("1-D", [mode](auto& in) { return pad(in[0], {2, 3}, mode); }, {leaf({2, 4})});
    expect_gradcheck("2-D", [mode](auto& in) { return pad(in[0], {1, 2, 2, 1}, mode); }, {leaf({1, 2, 3, 4})});
    expect_gradcheck("3-D", [mode](auto& in) { return pad(in[0], {1, 0, 0, 1, 1, 1}, mode); }, {leaf({1, 2, 2, 3})});
  }
}

TEST(Pad, Errors) {
  Tensor x = zeros({1, 2, 3});
  expect_error([&] { pad(x, {1}); }, {"pad", "even"});
  expect_error([&] { pad(x, {1, 1, 1, 1, 1, 1, 1, 1}); }, {"pad", "4 dimensions", "[1, 2, 3]"});
  expect_error([&] { pad(x, {1, 1}, "mirror"); }, {"pad", "mirror", "reflect"});
  expect_error([&] { pad(x, {3, 0}, "reflect"); }, {"pad", "reflect", "smaller", "size 3"});
  expect_error([&] { pad(x, {4, 0}, "circular"); }, {"pad", "circular", "once", "size 3"});
  expect_error([&] { pad(zeros({3}), {1, 1}, "reflect"); }, {"pad", "reflect", "2-D or 3-D", "[3]"});
  expect_error([&] { pad(x, {1, 1}, "reflect", 2.0); }, {"pad", "constant"});
  expect_error([&] { pad(x, {-1, 1}, "replicate"); }, {"pad", ">= 0"});
  expect_error([&] { pad(x, {-2, -2}); }, {"pad", "negative size"});
}

TEST(Einsum, MatchesCompositions) {
  Tensor a = randn({3, 4}, kFloat64), b = randn({4, 5}, kFloat64);
  expect_near(einsum("ij,jk->ik", {a, b}), matmul(a, b));
  expect_near(einsum("ij,jk", {a, b}), matmul(a, b));  // implicit: i and k, alphabetical
  expect_near(einsum("ij->ji", {a}), transpose(a, 0, 1));
  expect_near(einsum("ba", {a}), transpose(a, 0, 1));  // implicit output "ab"
  expect_near(einsum("ij->", {a}), sum(a));
  expect_near(einsum("ij->j", {a}), sum(a, {0}));
  Tensor ba = randn({2, 3, 4}, kFloat64), bb = randn({2, 4, 5}, kFloat64);
  expect_near(einsum("bij,bjk->bik", {ba, bb}), matmul(ba, bb));
  Tensor u = randn({3}, kFloat64), v = randn({4}, kFloat64);
  expect_near(einsum("i,j->ij", {u, v}), mul(unsqueeze(u, 1), unsqueeze(v, 0)));
  expect_near(einsum("i,i->", {u, u}), sum(mul(u, u)));
  // Trace and diagonal by hand.
  Tensor sq = f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_DOUBLE_EQ(einsum("ii->", {sq}).item<double>(), 15.0);
  EXPECT_DOUBLE_EQ(einsum("ii", {sq}).item<double>(), 15.0);
  EXPECT_EQ(values(einsum("ii->i", {sq})), (std::vector<double>{1, 5, 9}));
  // Bilinear: out[b, a] = sum_n,m l[b, n] w[a, n, m] r[b, m], by loops.
  Tensor l = randn({2, 3}, kFloat64), w = randn({4, 3, 5}, kFloat64), r = randn({2, 5}, kFloat64);
  Tensor got = einsum("bn,anm,bm->ba", {l, w, r});
  ASSERT_EQ(got.shape(), (Shape{2, 4}));
  std::vector<double> lv = values(l), wv = values(w), rv = values(r), gv = values(got);
  for (int bi = 0; bi < 2; ++bi)
    for (int ai = 0; ai < 4; ++ai) {
      double s = 0;
      for (int n = 0; n < 3; ++n)
        for (int m = 0; m < 5; ++m) s += lv[bi * 3 + n] * wv[(ai * 3 + n) * 5 + m] * rv[bi * 5 + m];
      EXPECT_NEAR(gv[bi * 4 + ai], s, 1e-12);
    }
  // "..." broadcasts: [2, 1, 3, 4] with [5, 4, 2] -> [2, 5, 3, 2].
  Tensor e1 = randn({2, 1, 3, 4}, kFloat64), e2 = randn({5, 4, 2}, kFloat64);
  expect_near(einsum("...ij,...jk->...ik", {e1, e2}), matmul(expand(e1, {2, 5, 3, 4}).reshape({10, 3, 4}),
                                                             expand(e2, {2, 5, 4, 2}).reshape({10, 4, 2}))
                                                          .reshape({2, 5, 3, 2}));
  expect_near(einsum("...ij->...ji", {ba}), transpose(ba, 1, 2));
  expect_near(einsum("b...->...", {ba}), sum(ba, {0}));
  expect_near(einsum("  ij , jk -> ik ", {a, b}), matmul(a, b));  // spaces are ignored
}

TEST(Einsum, Gradients) {
  expect_gradcheck("matmul", [](auto& in) { return einsum("ij,jk->ik", {in[0], in[1]}); }, {leaf({2, 3}), leaf({3, 4})});
  expect_gradcheck("batched", [](auto& in) { return einsum("bij,bkj->bik", {in[0], in[1]}); },
                   {leaf({2, 2, 3}), leaf({2, 4, 3})});
  expect_gradcheck("trace", [](auto& in) { return einsum("ii", {in[0]}); }, {leaf({3, 3})});
  expect_gradcheck("diagonal", [](auto& in) { return einsum("bii->bi", {in[0]}); }, {leaf({2, 3, 3})});
  expect_gradcheck("bilinear", [](auto& in) { return einsum("bn,anm,bm->ba", {in[0], in[1], in[2]}); },
                   {leaf({2, 3}), leaf({2, 3, 4}), leaf({2, 4})});
  expect_gradcheck("ellipsis", [](auto& in) { return einsum("...i,i->...", {in[0], in[1]}); },
                   {leaf({2, 3, 4}), leaf({4})});
}

TEST(Einsum, Errors) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  expect_error([&] { einsum("ij,jk->ik", {a}); }, {"einsum", "2 operands", "1 tensors"});
  expect_error([&] { einsum("ijk->i", {a}); }, {"einsum", "\"ijk\"", "3 dimensions", "[2, 3]"});
  expect_error([&] { einsum("ij,jk->ik", {a, b}); }, {"einsum", "'j'", "3", "4"});
  expect_error([&] { einsum("ij->z", {a}); }, {"einsum", "'z'", "no operand"});
  expect_error([&] { einsum("ij->ii", {a}); }, {"einsum", "'i'", "twice"});
  expect_error([&] { einsum("i1->i", {a}); }, {"einsum", "'1'"});
  expect_error([&] { einsum("ii->i", {a}); }, {"einsum", "'i'", "2", "3"});
  expect_error([&] { einsum("...i...->i", {a}); }, {"einsum", "more than one"});
}

}  // namespace minidl::pad_einsum_test
