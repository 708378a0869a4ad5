// libtorch's Tensor methods, each checked against the value libtorch gives (worked out by hand).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <tuple>

#include "core/cuda.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::tensor_api_test {

namespace {

using testing::expect_error;
using F = std::vector<float>;
using L = std::vector<int64_t>;

// [[0, 1, 2], [3, 4, 5]] as float32.
Tensor m23() { return tensor({{0., 1., 2.}, {3., 4., 5.}}); }

TEST(TensorApi, Metadata) {
  Tensor x = m23();
  EXPECT_EQ(x.sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.size(-1), 3);
  EXPECT_EQ(x.strides(), (Shape{3, 1}));
  EXPECT_EQ(x.stride(0), 3);
  EXPECT_EQ(x.t().stride(0), 1);
  EXPECT_EQ(x.numel(), 6);
  EXPECT_EQ(x.dim(), 2);
  EXPECT_EQ(x.ndimension(), 2);
  EXPECT_EQ(x.element_size(), 4);
  EXPECT_EQ(x.to(kFloat64).element_size(), 8);
  EXPECT_EQ(x.scalar_type(), kFloat32);
  EXPECT_EQ(x.dtype(), kFloat32);
  EXPECT_TRUE(x.is_floating_point());
  EXPECT_FALSE(tensor({1, 2}).is_floating_point());
  EXPECT_TRUE(x.is_cpu());
  EXPECT_FALSE(x.is_cuda());
  EXPECT_EQ(x.device(), Device(kCPU));
  TensorOptions o = x.options();
  EXPECT_EQ(o.dtype(), kFloat32);
  EXPECT_EQ(o.device(), Device::cpu());
  EXPECT_FALSE(o.requires_grad());
  EXPECT_EQ(zeros({1}, x.options()).dtype(), kFloat32);
}

TEST(TensorApi, ItemAndDataAccess) {
  EXPECT_DOUBLE_EQ(tensor(2.5).item().toDouble(), 2.5);
  EXPECT_TRUE(tensor(2.5).item().isFloatingPoint());
  EXPECT_EQ(tensor({7}).item().toLong(), 7);
  EXPECT_TRUE(tensor({7}).item().isIntegral(false));
  EXPECT_TRUE(tensor(true).item().toBool());
  EXPECT_EQ(tensor(3.0).item<float>(), 3.0f);
  std::ostringstream printed;
  printed << tensor({5}).item() << " " << tensor(0.5).item();
  EXPECT_EQ(printed.str(), "5 0.5");
  expect_error([] { (void)m23().item(); }, {"item()", "one element", "[2, 3]"});

  Tensor x = m23();
  EXPECT_EQ(x.data_ptr<float>()[4], 4.0f);
  EXPECT_EQ(x.data_ptr(), static_cast<void*>(x.data_ptr<float>()));
  auto a = x.accessor<float, 2>();
  EXPECT_EQ(a.size(0), 2);
  EXPECT_EQ(a[1][2], 5.0f);
  a[0][1] = 10;
  EXPECT_EQ(x.to_vector<float>(), (F{0, 10, 2, 3, 4, 5}));
  Tensor t = x.t();  // strided: a[i][j] follows the strides
  auto at = t.accessor<float, 2>();
  EXPECT_EQ(at[2][1], 5.0f);
  expect_error([&] { (void)x.accessor<double, 2>(); }, {"accessor<float64, 2>", "dtype float64", "got float32"});
  expect_error([&] { (void)x.accessor<float, 3>(); }, {"accessor<float32, 3>", "3-d tensor", "got 2-d"});
}

TEST(TensorApi, ScalarAccessors) {
  Scalar d = 2.75, i = int64_t{-3}, b = true;
  EXPECT_EQ(d.toFloat(), 2.75f);
  EXPECT_EQ(d.toInt(), 2);
  EXPECT_EQ(i.toLong(), -3);
  EXPECT_EQ(i.toDouble(), -3.0);
  EXPECT_TRUE(b.toBool());
  EXPECT_TRUE(b.isIntegral(true));
  EXPECT_FALSE(b.isIntegral(false));
  EXPECT_FALSE(d.isIntegral(true));
}

TEST(TensorApi, Reductions) {
  Tensor x = m23();
  EXPECT_EQ(x.sum().item<float>(), 15);
  EXPECT_EQ(x.sum(1).to_vector<float>(), (F{3, 12}));
  EXPECT_EQ(x.sum({0, 1}).item<float>(), 15);
  EXPECT_EQ(x.sum(0, /*keepdim=*/true).sizes(), (Shape{1, 3}));
  EXPECT_EQ(x.mean().item<float>(), 2.5f);
  EXPECT_EQ(x.mean(1).to_vector<float>(), (F{1, 4}));
  EXPECT_EQ(x.mean({1}, true).sizes(), (Shape{2, 1}));
  // torch.tensor([[0., 1, 2], [3, 4, 5]]).var(1) -> [1., 1.]; unbiased=False -> 2/3
  EXPECT_EQ(x.var(1).to_vector<float>(), (F{1, 1}));
  EXPECT_NEAR(x.var(1, false).to_vector<float>()[0], 2.0 / 3.0, 1e-6);

  Tensor y = tensor({{1., 5., 2.}, {7., 0., 7.}});
  auto [v, i] = y.max(1);
  EXPECT_EQ(v.to_vector<float>(), (F{5, 7}));
  EXPECT_EQ(i.to_vector<int64_t>(), (L{1, 0}));  // the first of ties
  Tensor mv, mi;
  std::tie(mv, mi) = y.min(1, /*keepdim=*/true);
  EXPECT_EQ(mv.sizes(), (Shape{2, 1}));
  EXPECT_EQ(mv.to_vector<float>(), (F{1, 0}));
  EXPECT_EQ(std::get<1>(y.min(1)).to_vector<int64_t>(), (L{0, 1}));
  EXPECT_EQ(y.argmax(1).to_vector<int64_t>(), (L{1, 0}));
  EXPECT_EQ(y.argmax(0, true).sizes(), (Shape{1, 3}));
  EXPECT_EQ(y.argmin(0).to_vector<int64_t>(), (L{0, 1, 0}));

  // softmax([0, ln 3]) = [0.25, 0.75]
  Tensor s = tensor({0.0, std::log(3.0)}, kFloat64);
  EXPECT_NEAR(s.softmax(0).to_vector<double>()[1], 0.75, 1e-12);
  EXPECT_NEAR(s.log_softmax(-1).to_vector<double>()[0], std::log(0.25), 1e-12);
}

// libtorch's var(bool unbiased) and std(bool unbiased) are over every element; an int stays a dim.
// x.var(false) once took the false for dim 0 and gave the unbiased variance over it.
TEST(TensorApi, UnbiasedAsTheOnlyArgument) {
  Tensor x = m23();  // var over all six: 17.5 / 5 unbiased, 17.5 / 6 biased
  EXPECT_NEAR(x.var(false).item<float>(), 17.5 / 6, 1e-6);
  EXPECT_NEAR(x.var(true).item<float>(), 17.5 / 5, 1e-6);
  EXPECT_EQ(x.var(false).dim(), 0);
  EXPECT_NEAR(x.std(false).item<float>(), std::sqrt(17.5 / 6), 1e-6);
  EXPECT_NEAR(x.std(true).item<float>(), std::sqrt(17.5 / 5), 1e-6);
  EXPECT_EQ(x.var(0).to_vector<float>(), (F{4.5, 4.5, 4.5}));  // an int: dim 0, unbiased
  auto [v, m] = var_mean(x, false);
  EXPECT_NEAR(v.item<float>(), 17.5 / 6, 1e-6);
  EXPECT_EQ(m.item<float>(), 2.5f);
  EXPECT_NEAR(std::get<0>(std_mean(x, true)).item<float>(), std::sqrt(17.5 / 5), 1e-6);
}

// The free reductions take a dim list as libtorch's IntArrayRef does: one integer, a braced list or
// a Shape, as torch::sum(x, 1) and torch::logsumexp(x, 1) are written.
TEST(TensorApi, FreeReductionsTakeOneDim) {
  Tensor x = m23();
  EXPECT_EQ(sum(x, 1).to_vector<float>(), (F{3, 12}));
  EXPECT_EQ(mean(x, 0).to_vector<float>(), (F{1.5, 2.5, 3.5}));
  EXPECT_EQ(amax(x, 1).to_vector<float>(), (F{2, 5}));
  EXPECT_EQ(amin(x, -1, true).sizes(), (Shape{2, 1}));
  EXPECT_EQ(var(x, 1).to_vector<float>(), (F{1, 1}));
  EXPECT_EQ(minidl::std(x, 0, false).to_vector<float>(), (F{1.5, 1.5, 1.5}));
  EXPECT_NEAR(logsumexp(tensor({0.0, std::log(3.0)}, kFloat64), 0).item<double>(), std::log(4.0), 1e-12);
  EXPECT_NEAR(norm(x, 2, 1).to_vector<float>()[0], std::sqrt(5.0f), 1e-6);
  EXPECT_EQ(count_nonzero(x, 1).to_vector<int64_t>(), (L{2, 3}));
  EXPECT_EQ(nansum(x, 0).to_vector<float>(), (F{3, 5, 7}));
  EXPECT_EQ(std::get<1>(var_mean(x, 1)).to_vector<float>(), (F{1, 4}));
  const Shape dims = {0, 1};
  EXPECT_EQ(sum(x, dims).item<float>(), 15);
}

// torch.argmax(x) without a dim indexes the flattened tensor; amax and amin as methods.
TEST(TensorApi, ArgmaxWithoutADimAndAmax) {
  Tensor y = tensor({{1., 5., 2.}, {7., 0., 7.}});
  EXPECT_EQ(y.argmax().item<int64_t>(), 3);  // the first of the two 7s
  EXPECT_EQ(y.argmax().dim(), 0);
  EXPECT_EQ(y.argmin().item<int64_t>(), 4);
  EXPECT_EQ(argmax(y, std::nullopt, /*keepdim=*/true).sizes(), (Shape{1, 1}));
  EXPECT_EQ(y.argmin(std::nullopt, true).item<int64_t>(), 4);
  EXPECT_EQ(tensor({{3., 9.}}).t().argmax().item<int64_t>(), 1);  // a transposed view, flattened in its order
  EXPECT_EQ(full({}, 2.0).argmax().item<int64_t>(), 0);
  EXPECT_EQ(y.amax().item<float>(), 7);
  EXPECT_EQ(y.amax(1).to_vector<float>(), (F{5, 7}));
  EXPECT_EQ(y.amin({0, 1}).item<float>(), 0);
  EXPECT_EQ(y.amin(0, true).sizes(), (Shape{1, 3}));
}

// torch.div with rounding_mode: "trunc" toward zero, "floor" down; integers stay integers.
TEST(TensorApi, DivRoundingModes) {
  const Tensor a = tensor({-7, 7, -8, 8, -6}, kInt64), b = tensor({2, 2, 3, -3, 3}, kInt64);
  // torch.div(a, b, rounding_mode='trunc') -> [-3, 3, -2, -2, -2]; 'floor' -> [-4, 3, -3, -3, -2]
  Tensor trunc_q = div(a, b, "trunc");
  EXPECT_EQ(trunc_q.dtype(), kInt64);
  EXPECT_EQ(trunc_q.to_vector<int64_t>(), (L{-3, 3, -2, -2, -2}));
  EXPECT_EQ(a.div(b, "floor").to_vector<int64_t>(), (L{-4, 3, -3, -3, -2}));
  EXPECT_EQ(div(a.to(kInt32), 2, "trunc").to(kInt64).to_vector<int64_t>(), (L{-3, 3, -4, 4, -3}));
  EXPECT_EQ(div(a.to(kInt32), 2, "trunc").dtype(), kInt32);
  EXPECT_EQ(a.div(b, std::nullopt).to_vector<float>(), (F{-3.5, 3.5, -8.f / 3, -8.f / 3, -2}));
  const Tensor x = tensor({-7.5, 7.5, 7.0});
  EXPECT_EQ(x.div(2.0, "trunc").to_vector<float>(), (F{-3, 3, 3}));
  EXPECT_EQ(x.div(2.0, "floor").to_vector<float>(), (F{-4, 3, 3}));
  EXPECT_EQ(div(tensor({-7.0, 7.0}), 2.5, "trunc").to_vector<float>(), (F{-2, 2}));
  Tensor counts = tensor({5, -5}, kInt64);
  counts.div_(2, "floor");
  EXPECT_EQ(counts.to_vector<int64_t>(), (L{2, -3}));
  expect_error([&] { div(a, b, "round"); }, {"div", "rounding_mode", "trunc", "floor", "round"});
  expect_error([&] { div(a, tensor({0, 1, 1, 1, 1}, kInt64), "trunc"); }, {"zero"});
  // bfloat16: the float32 quotient truncated, then rounded once (not the rounded quotient truncated).
  manual_seed(5);
  const Tensor p = uniform({2000}, -100.0, 100.0).to(kBFloat16), q = uniform({2000}, 0.5, 2.0).to(kBFloat16);
  EXPECT_TRUE(equal(div(p, q, "trunc"), trunc(p.to(kFloat32) / q.to(kFloat32)).to(kBFloat16)));
  EXPECT_TRUE(equal(div(p, q, "floor"), floor_divide(p.to(kFloat32), q.to(kFloat32)).to(kBFloat16)));
}

TEST(TensorApi, Products) {
  Tensor a = m23(), b = tensor({{1.}, {1.}, {2.}});  // [2, 3] @ [3, 1]
  EXPECT_EQ(a.matmul(b).to_vector<float>(), (F{5, 17}));
  EXPECT_EQ(a.mm(b).to_vector<float>(), (F{5, 17}));
  Tensor batch = a.unsqueeze(0).expand({2, 2, 3});
  EXPECT_EQ(batch.bmm(b.unsqueeze(0).expand({2, 3, 1})).sizes(), (Shape{2, 2, 1}));
  expect_error([&] { (void)a.mm(b.unsqueeze(0)); }, {"mm", "2-D", "3-d"});
  expect_error([&] { (void)a.mm(a); }, {"mm", "cannot be multiplied", "2x3 and 2x3"});
  expect_error([&] { (void)a.bmm(b); }, {"bmm", "3-D"});
}

TEST(TensorApi, Arithmetic) {
  Tensor x = tensor({1., 2.}), y = tensor({3., 5.});
  EXPECT_EQ(x.add(y).to_vector<float>(), (F{4, 7}));
  EXPECT_EQ(x.add(y, 2).to_vector<float>(), (F{7, 12}));  // torch.add(x, y, alpha=2)
  EXPECT_EQ(x.add(1).to_vector<float>(), (F{2, 3}));
  EXPECT_EQ(x.sub(y).to_vector<float>(), (F{-2, -3}));
  EXPECT_EQ(x.sub(y, 0.5).to_vector<float>(), (F{-0.5f, -0.5f}));
  EXPECT_EQ(x.sub(1).to_vector<float>(), (F{0, 1}));
  EXPECT_EQ(x.mul(y).to_vector<float>(), (F{3, 10}));
  EXPECT_EQ(x.mul(3).to_vector<float>(), (F{3, 6}));
  EXPECT_EQ(y.div(x).to_vector<float>(), (F{3, 2.5f}));
  EXPECT_EQ(y.div(2).to_vector<float>(), (F{1.5f, 2.5f}));
  Tensor n = tensor({-7, 7});
  EXPECT_EQ(n.floor_divide(2).to_vector<int64_t>(), (L{-4, 3}));
  EXPECT_EQ(n.floor_divide(tensor({2, -2})).to_vector<int64_t>(), (L{-4, -4}));
  EXPECT_EQ(n.remainder(2).to_vector<int64_t>(), (L{1, 1}));
  EXPECT_EQ(n.remainder(tensor({-2, -2})).to_vector<int64_t>(), (L{-1, -1}));
  EXPECT_EQ(n.add(1).dtype(), kInt64);
  EXPECT_EQ(n.add(0.5).dtype(), kFloat32);  // int64 + 0.5 promotes to the default float
  expect_error([&] { (void)n.add(n, 0.5); }, {"add", "alpha must not be a floating point"});
  EXPECT_EQ(x.pow(2).to_vector<float>(), (F{1, 4}));
  EXPECT_EQ(x.pow(y).to_vector<float>(), (F{1, 32}));
  EXPECT_EQ(x.neg().to_vector<float>(), (F{-1, -2}));
  EXPECT_NEAR(x.exp().to_vector<float>()[1], std::exp(2.0), 1e-5);
  EXPECT_NEAR(y.log().to_vector<float>()[0], std::log(3.0), 1e-6);
  EXPECT_EQ(tensor({4., 9.}).sqrt().to_vector<float>(), (F{2, 3}));
  EXPECT_EQ(tensor({-1.5, 2.}).abs().to_vector<float>(), (F{1.5f, 2}));
  EXPECT_EQ(tensor({-1.5, 2.}).relu().to_vector<float>(), (F{0, 2}));
  EXPECT_EQ(tensor({0.}).sigmoid().item<float>(), 0.5f);
  EXPECT_EQ(tensor({0.}).tanh().item<float>(), 0.0f);
}

TEST(TensorApi, Comparisons) {
  Tensor x = tensor({1, 2, 3}), y = tensor({3, 2, 1});
  using B = std::vector<bool>;
  EXPECT_EQ(x.eq(y).to_vector<bool>(), (B{false, true, false}));
  EXPECT_EQ(x.eq(2).to_vector<bool>(), (B{false, true, false}));
  EXPECT_EQ(x.ne(y).to_vector<bool>(), (B{true, false, true}));
  EXPECT_EQ(x.ne(2).to_vector<bool>(), (B{true, false, true}));
  EXPECT_EQ(x.lt(y).to_vector<bool>(), (B{true, false, false}));
  EXPECT_EQ(x.lt(2).to_vector<bool>(), (B{true, false, false}));
  EXPECT_EQ(x.le(y).to_vector<bool>(), (B{true, true, false}));
  EXPECT_EQ(x.le(2).to_vector<bool>(), (B{true, true, false}));
  EXPECT_EQ(x.gt(y).to_vector<bool>(), (B{false, false, true}));
  EXPECT_EQ(x.gt(2.5).to_vector<bool>(), (B{false, false, true}));
  EXPECT_EQ(x.ge(y).to_vector<bool>(), (B{false, true, true}));
  EXPECT_EQ(x.ge(2).to_vector<bool>(), (B{false, true, true}));
  Tensor mask = tensor({true, false, true});
  EXPECT_EQ(x.where(mask, y).to_vector<int64_t>(), (L{1, 2, 3}));
  EXPECT_EQ(x.where(mask, 0).to_vector<int64_t>(), (L{1, 0, 3}));
  Tensor f = tensor({1., 2., 3.});
  EXPECT_EQ(f.masked_fill(mask, -1).to_vector<float>(), (F{-1, 2, -1}));
  EXPECT_EQ(f.masked_fill(mask, tensor(9.)).to_vector<float>(), (F{9, 2, 9}));
  EXPECT_EQ(f.clamp(1.5, 2.5).to_vector<float>(), (F{1.5f, 2, 2.5f}));
  EXPECT_EQ(f.clamp_min(2).to_vector<float>(), (F{2, 2, 3}));
  EXPECT_EQ(f.clamp_max(2).to_vector<float>(), (F{1, 2, 2}));
  EXPECT_EQ(f.index_select(0, tensor({2, 0})).to_vector<float>(), (F{3, 1}));
}

TEST(TensorApi, ViewsAndShapes) {
  Tensor x = m23();
  EXPECT_EQ(x.view({3, 2}).sizes(), (Shape{3, 2}));
  EXPECT_EQ(x.view(-1).sizes(), (Shape{6}));
  EXPECT_EQ(x.reshape(6).sizes(), (Shape{6}));
  EXPECT_EQ(x.t().reshape({-1}).to_vector<float>(), (F{0, 3, 1, 4, 2, 5}));
  Tensor other = zeros({3, 2});
  EXPECT_EQ(x.view_as(other).sizes(), (Shape{3, 2}));
  EXPECT_EQ(x.t().reshape_as(zeros({6})).to_vector<float>(), (F{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.permute({1, 0}).to_vector<float>(), (F{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.transpose(0, 1).sizes(), (Shape{3, 2}));
  EXPECT_FALSE(x.t().is_contiguous());
  EXPECT_TRUE(x.t().contiguous().is_contiguous());
  EXPECT_EQ(x.unsqueeze(1).sizes(), (Shape{2, 1, 3}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.view({1, 2, 1, 3}).squeeze().sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.flatten().sizes(), (Shape{6}));
  EXPECT_EQ(tensor({1., 2.}).expand({3, 2}).sum(0).to_vector<float>(), (F{3, 6}));
  EXPECT_EQ(tensor({{1.}, {2.}}).expand_as(x).to_vector<float>(), (F{1, 1, 1, 2, 2, 2}));

  EXPECT_EQ(x.select(1, 2).to_vector<float>(), (F{2, 5}));
  EXPECT_EQ(x.select(0, -1).to_vector<float>(), (F{3, 4, 5}));
  EXPECT_EQ(x[1].to_vector<float>(), (F{3, 4, 5}));
  EXPECT_EQ(x[1][2].item<float>(), 5.0f);
  expect_error([&] { (void)x.select(1, 3); }, {"select", "index 3 out of range", "[2, 3]", "dimension 1"});
  EXPECT_EQ(x.narrow(1, 1, 2).to_vector<float>(), (F{1, 2, 4, 5}));
  EXPECT_EQ(x.slice(1, 0, 3, 2).to_vector<float>(), (F{0, 2, 3, 5}));
  std::vector<Tensor> cols = x.unbind(1);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[1].to_vector<float>(), (F{1, 4}));
  std::vector<Tensor> parts = x.split(2, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].to_vector<float>(), (F{2, 5}));
  std::vector<Tensor> chunks = x.chunk(2, 0);
  EXPECT_EQ(chunks[1].to_vector<float>(), (F{3, 4, 5}));
}

TEST(TensorApi, ConversionsAndCopies) {
  Tensor x = m23();
  EXPECT_EQ(x.to(kInt64).dtype(), kInt64);
  EXPECT_TRUE(x.to(kFloat32).is_same(x));  // no copy when nothing changes
  EXPECT_TRUE(x.to(Device::cpu()).is_same(x));
  EXPECT_TRUE(x.to(kCPU).is_same(x));
  EXPECT_EQ(x.to(Device::cpu(), kFloat64).dtype(), kFloat64);
  EXPECT_EQ(x.to(TensorOptions().dtype(kInt64)).dtype(), kInt64);
  EXPECT_EQ(x.to(tensor({1})).dtype(), kInt64);
  EXPECT_TRUE(x.cpu().is_same(x));
  Tensor c = x.clone();
  EXPECT_FALSE(c.is_same(x));
  c.fill_(1);
  EXPECT_EQ(x.sum().item<float>(), 15);  // the clone has its own memory
  Tensor d = x.detach();
  EXPECT_EQ(d.data_ptr(), x.data_ptr());
  if (!cuda::is_available()) {
    expect_error([&] { (void)x.cuda(); }, {"CUDA"});
  }
}

TEST(TensorApi, InPlace) {
  Tensor x = tensor({1., 2.});
  x.add_(tensor({1., 1.}));
  EXPECT_EQ(x.to_vector<float>(), (F{2, 3}));
  x.add_(tensor({1., 1.}), /*alpha=*/-2);
  EXPECT_EQ(x.to_vector<float>(), (F{0, 1}));
  x.add_(1);
  x.sub_(tensor({0.5, 0.5}));
  x.sub_(0.5);
  EXPECT_EQ(x.to_vector<float>(), (F{0, 1}));
  x.add_(1).mul_(tensor({2., 3.}));
  EXPECT_EQ(x.to_vector<float>(), (F{2, 6}));
  x.mul_(0.5);
  x.div_(tensor({1., 3.}));
  EXPECT_EQ(x.to_vector<float>(), (F{1, 1}));
  x.div_(4);
  EXPECT_EQ(x.to_vector<float>(), (F{0.25f, 0.25f}));
  x.fill_(7);
  EXPECT_EQ(x.to_vector<float>(), (F{7, 7}));
  x.zero_();
  EXPECT_EQ(x.to_vector<float>(), (F{0, 0}));
  x.copy_(tensor({5, 6}));  // converted to x's dtype
  EXPECT_EQ(x.to_vector<float>(), (F{5, 6}));
  Tensor n = tensor({1, 2});
  expect_error([&] { n.add_(0.5); }, {"add_"});
  expect_error([&] { x.copy_(zeros({3})); }, {"copy_", "[3]", "[2]"});
  Tensor r = zeros({1000});
  r.uniform_(-1, 1);
  EXPECT_GE(std::get<0>(r.min(0)).item<float>(), -1.0f);
  EXPECT_LT(std::get<0>(r.max(0)).item<float>(), 1.0f);
  r.normal_(3, 0.5);
  EXPECT_NEAR(r.mean().item<float>(), 3.0, 0.1);
  r.bernoulli_(0.25);
  EXPECT_NEAR(r.mean().item<float>(), 0.25, 0.06);
  EXPECT_EQ(r.eq(0).sum().item<int64_t>() + r.eq(1).sum().item<int64_t>(), 1000);
}

TEST(TensorApi, RequiresGrad) {
  Tensor w = zeros({2}).requires_grad_();
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.options().requires_grad());
  expect_error([&] { w.add_(1); }, {"add_", "leaf"});
  expect_error([&] { w.uniform_(); }, {"uniform_", "leaf"});
  {
    NoGradGuard no_grad;
    w.add_(1);
  }
  EXPECT_EQ(w.to_vector<float>(), (F{1, 1}));
  EXPECT_FALSE(w.detach().requires_grad());
}

TEST(TensorApi, MathMethods) {
  Tensor x = tensor({-1.5, 0.5, 2.5});
  EXPECT_EQ(x.floor().to_vector<float>(), (F{-2, 0, 2}));
  EXPECT_EQ(x.ceil().to_vector<float>(), (F{-1, 1, 3}));
  EXPECT_EQ(x.round().to_vector<float>(), (F{-2, 0, 2}));  // half to even
  EXPECT_EQ(tensor({1.26}).round(1).item<float>(), 1.3f);
  EXPECT_EQ(x.trunc().to_vector<float>(), (F{-1, 0, 2}));
  EXPECT_EQ(x.sign().to_vector<float>(), (F{-1, 1, 1}));
  EXPECT_EQ(tensor({0.}).sin().item<float>(), 0.0f);
  EXPECT_EQ(tensor({0.}).cos().item<float>(), 1.0f);
  EXPECT_EQ(tensor({0.}).tan().item<float>(), 0.0f);
  EXPECT_EQ(tensor({4.}).rsqrt().item<float>(), 0.5f);
  EXPECT_EQ(tensor({4.}).reciprocal().item<float>(), 0.25f);
  EXPECT_EQ(tensor({0.}).log1p().item<float>(), 0.0f);
  EXPECT_EQ(tensor({0.}).expm1().item<float>(), 0.0f);
  EXPECT_EQ(tensor({8.}).log2().item<float>(), 3.0f);
  EXPECT_EQ(tensor({100.}).log10().item<float>(), 2.0f);
  EXPECT_EQ(tensor({0.}).erf().item<float>(), 0.0f);
  Tensor y = tensor({1., 1., 1.});
  EXPECT_EQ(x.maximum(y).to_vector<float>(), (F{1, 1, 2.5f}));
  EXPECT_EQ(x.minimum(y).to_vector<float>(), (F{-1.5f, 0.5f, 1}));
  EXPECT_EQ(x.fmod(2).to_vector<float>(), (F{-1.5f, 0.5f, 0.5f}));  // C's sign rule
  EXPECT_EQ(x.fmod(tensor({2., 2., 2.})).to_vector<float>(), (F{-1.5f, 0.5f, 0.5f}));
  EXPECT_NEAR(tensor({1.}).atan2(tensor({1.})).item<float>(), M_PI / 4, 1e-6);
  Tensor a = tensor({true, true, false}), b = tensor({true, false, false});
  using B = std::vector<bool>;
  EXPECT_EQ(a.logical_and(b).to_vector<bool>(), (B{true, false, false}));
  EXPECT_EQ(a.logical_or(b).to_vector<bool>(), (B{true, true, false}));
  EXPECT_EQ(a.logical_xor(b).to_vector<bool>(), (B{false, true, false}));
  EXPECT_EQ(a.logical_not().to_vector<bool>(), (B{false, false, true}));
  Tensor odd = tensor({1.0, std::nan(""), INFINITY});
  EXPECT_EQ(odd.isnan().to_vector<bool>(), (B{false, true, false}));
  EXPECT_EQ(odd.isinf().to_vector<bool>(), (B{false, false, true}));
  EXPECT_EQ(odd.isfinite().to_vector<bool>(), (B{true, false, false}));
  EXPECT_EQ(odd.nan_to_num(0.0, 9.0).to_vector<float>(), (F{1, 0, 9}));
}

TEST(TensorApi, MoreReductionMethods) {
  Tensor x = tensor({{1., 5., 2.}, {7., 0., 3.}});
  EXPECT_EQ(x.max().item<float>(), 7.0f);
  EXPECT_EQ(x.min().item<float>(), 0.0f);
  EXPECT_EQ(x.prod().item<float>(), 0.0f);
  EXPECT_EQ(x.prod(1).to_vector<float>(), (F{10, 0}));
  EXPECT_TRUE(x.any().item<bool>());
  EXPECT_FALSE(x.all().item<bool>());
  EXPECT_EQ(x.all(1).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(x.any(0, true).sizes(), (Shape{1, 3}));
  Tensor v = tensor({1., 2., 3., 4.});
  EXPECT_NEAR(v.var().item<float>(), 5.0 / 3.0, 1e-6);  // torch.tensor([1., 2, 3, 4]).var()
  EXPECT_NEAR(v.std().item<float>(), std::sqrt(5.0 / 3.0), 1e-6);
  EXPECT_NEAR(x.std(1).to_vector<float>()[0], std::sqrt(13.0 / 3.0), 1e-5);  // var of [1, 5, 2] is 13/3
  EXPECT_EQ(tensor({3., 4.}).norm().item<float>(), 5.0f);
  EXPECT_EQ(tensor({{3., -4.}}).norm(1, {1}).to_vector<float>(), (F{7}));
  EXPECT_NEAR(tensor({0., 0.}).logsumexp(0).item<float>(), std::log(2.0), 1e-6);
  EXPECT_EQ(v.cumsum(0).to_vector<float>(), (F{1, 3, 6, 10}));
  EXPECT_EQ(v.cumprod(0).to_vector<float>(), (F{1, 2, 6, 24}));
  auto [sorted, order] = x.sort(1, /*descending=*/true);
  EXPECT_EQ(sorted.to_vector<float>(), (F{5, 2, 1, 7, 3, 0}));
  EXPECT_EQ(order.to_vector<int64_t>(), (L{1, 2, 0, 0, 2, 1}));
  EXPECT_EQ(x.argsort(1).to_vector<int64_t>(), (L{0, 2, 1, 1, 2, 0}));
  auto [top, where] = x.topk(1);
  EXPECT_EQ(top.to_vector<float>(), (F{5, 7}));
  EXPECT_EQ(where.to_vector<int64_t>(), (L{1, 0}));
  EXPECT_TRUE(v.allclose(v + 1e-7));
  EXPECT_FALSE(v.allclose(v + 1e-3));
  EXPECT_EQ(v.isclose(tensor({1., 2.1, 3., 4.})).to_vector<bool>(), (std::vector<bool>{true, false, true, true}));
  EXPECT_TRUE(v.equal(tensor({1., 2., 3., 4.})));
  EXPECT_FALSE(v.equal(tensor({1., 2., 3.})));
}

TEST(TensorApi, GatherScatterAndRearrangeMethods) {
  Tensor x = tensor({{1., 2.}, {3., 4.}});
  Tensor idx = tensor({{1, 0}, {0, 0}});
  EXPECT_EQ(x.gather(1, idx).to_vector<float>(), (F{2, 1, 3, 3}));
  EXPECT_EQ(zeros({2, 2}).scatter(1, tensor({{1}, {0}}), tensor({{5.}, {6.}})).to_vector<float>(), (F{0, 5, 6, 0}));
  EXPECT_EQ(zeros({2, 2}).scatter(1, tensor({{1}, {0}}), 9).to_vector<float>(), (F{0, 9, 9, 0}));
  EXPECT_EQ(zeros({1, 2}).scatter_add(1, tensor({{1, 1}}), tensor({{2., 3.}})).to_vector<float>(), (F{0, 5}));
  EXPECT_EQ(zeros({3}).index_add(0, tensor({2, 2}), tensor({1., 2.}), 2).to_vector<float>(), (F{0, 0, 6}));
  EXPECT_EQ(x.masked_select(x.gt(2)).to_vector<float>(), (F{3, 4}));
  EXPECT_EQ(tensor({0, 3, 0, 5}).nonzero().to_vector<int64_t>(), (L{1, 3}));
  EXPECT_EQ(tensor({1., 2.}).repeat({2}).to_vector<float>(), (F{1, 2, 1, 2}));
  EXPECT_EQ(x.flip(0).to_vector<float>(), (F{3, 4, 1, 2}));
  EXPECT_EQ(tensor({1., 2., 3.}).roll(1).to_vector<float>(), (F{3, 1, 2}));
  EXPECT_EQ(x.tril().to_vector<float>(), (F{1, 0, 3, 4}));
  EXPECT_EQ(x.triu(1).to_vector<float>(), (F{0, 2, 0, 0}));
}

TEST(TensorApi, UnflattenMovedimSwapaxesTypeAsAndNewFactories) {
  const Tensor x = arange(24, kFloat32).reshape({2, 12});
  EXPECT_EQ(x.unflatten(1, {3, 4}).sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.unflatten(1, {-1, 6}).sizes(), (Shape{2, 2, 6}));
  EXPECT_EQ(x.unflatten(-1, {3, 4}).flatten(1).to_vector<float>(), x.to_vector<float>());
  expect_error([&] { (void)x.unflatten(1, {5, -1}); }, {"unflatten", "do not multiply", "12"});
  expect_error([&] { (void)x.unflatten(1, {-1, -1}); }, {"unflatten", "-1"});
  const Tensor y = randn({2, 3, 4, 5});
  const Tensor last = y.movedim(1, -1);  // [N, C, H, W] -> [N, H, W, C]
  EXPECT_EQ(last.sizes(), (Shape{2, 4, 5, 3}));
  EXPECT_EQ(last.select(3, 2).contiguous().to_vector<float>(), y.select(1, 2).contiguous().to_vector<float>());
  EXPECT_EQ(y.movedim({0, 1}, {3, 2}).sizes(), (Shape{4, 5, 3, 2}));  // the others keep their order
  expect_error([&] { (void)y.movedim({0, 0}, {1, 2}); }, {"movedim", "repeats"});
  expect_error([&] { (void)y.movedim({0}, {1, 2}); }, {"movedim", "as many"});
  EXPECT_EQ(y.swapaxes(0, 3).sizes(), (Shape{5, 3, 4, 2}));
  EXPECT_EQ(y.swapdims(1, 2).to_vector<float>(), y.transpose(1, 2).to_vector<float>());
  const Tensor d = Tensor::from_vector<double>({1.5, -2}, {2});
  EXPECT_EQ(Tensor::from_vector<int64_t>({1, 2}, {2}).type_as(d).dtype(), kFloat64);
  const Tensor z = d.new_zeros({2, 3});
  EXPECT_EQ(z.dtype(), kFloat64);
  EXPECT_EQ(z.sizes(), (Shape{2, 3}));
  EXPECT_EQ(d.new_ones(2).to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(d.new_full({2}, 7).to_vector<double>(), (std::vector<double>{7, 7}));
  EXPECT_EQ(d.new_full({2}, 7, kInt64).dtype(), kInt64);
  EXPECT_EQ(d.new_empty({4}).sizes(), (Shape{4}));
  EXPECT_EQ(d.new_empty({4}).dtype(), kFloat64);
}

TEST(TensorApi, ReductionsAndSoftmaxInAnAskedDtype) {
  // 2^24 + 1 is not a float32: summed in float64 the ones are counted exactly.
  const Tensor big = cat({full({1}, 16777216.0, kFloat32), ones({4}, kFloat32)});
  EXPECT_EQ(big.sum(kFloat64).dtype(), kFloat64);
  EXPECT_EQ(big.sum(kFloat64).item<double>(), 16777220.0);
  EXPECT_EQ(minidl::sum(big, {0}, true, kFloat64).sizes(), (Shape{1}));
  const Tensor h = tensor({{1., 2.}, {3., 5.}}).to(kBFloat16);
  EXPECT_EQ(h.mean(kFloat32).dtype(), kFloat32);
  EXPECT_EQ(h.mean({1}, false, kFloat32).to_vector<float>(), (F{1.5f, 4}));
  const Tensor p = h.softmax(1, kFloat32);
  EXPECT_EQ(p.dtype(), kFloat32);
  EXPECT_NEAR(p.to_vector<float>()[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(h.log_softmax(1, kFloat64).dtype(), kFloat64);
  // The gradient flows back through the conversion to the input's dtype.
  const Tensor x = randn({3}).requires_grad_();
  x.sum(kFloat64).backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(x.grad().to_vector<float>(), (F{1, 1, 1}));
}

}  // namespace

}  // namespace minidl::tensor_api_test
