// x.index({...}) and x.index_put_({...}, v): basic indices as views, advanced indices with
// PyTorch's placement rule (values worked out by hand from x = arange(24).reshape({2, 3, 4})),
// bool masks, gradients (by hand and by float64 gradcheck), masked_select, nonzero, and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "minidl.h"
#include "test_util.h"

namespace minidl::indexing_test {

using namespace minidl::indexing;
using minidl::testing::expect_error;

namespace {

Tensor ints(const std::vector<int64_t>& v, Shape shape = {}) { return Tensor::from_vector<int64_t>(v, shape); }
Tensor doubles(const std::vector<double>& v, Shape shape = {}) { return Tensor::from_vector<double>(v, shape); }
Tensor bools(const std::vector<bool>& v, Shape shape = {}) { return Tensor::from_vector<bool>(v, shape); }
// 0, 1, ..., 23 as float64 [2, 3, 4]: x[i][j][k] = 12 i + 4 j + k.
Tensor x24() { return arange(24, kFloat64).reshape({2, 3, 4}); }
std::vector<double> values(const Tensor& t) { return t.contiguous().to_vector<double>(); }

}  // namespace

TEST(Indexing, BasicIndicesAreViews) {
  Tensor x = x24();
  Tensor row = x.index({1});
  EXPECT_EQ(row.shape(), (Shape{3, 4}));
  EXPECT_EQ(row.raw_data(), static_cast<double*>(x.raw_data()) + 12);  // shares x's memory
  EXPECT_EQ(values(x.index({Slice(), 1})), (std::vector<double>{4, 5, 6, 7, 16, 17, 18, 19}));
  EXPECT_EQ(values(x.index({Ellipsis, -1})), (std::vector<double>{3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(values(x.index({"...", -1})), values(x.index({Ellipsis, -1})));
  EXPECT_EQ(x.index({None, Slice(), Slice(None, None, 2)}).shape(), (Shape{1, 2, 2, 4}));
  EXPECT_EQ(values(x.index({1, Slice(0, 2), -1})), (std::vector<double>{15, 19}));
  EXPECT_EQ(values(x.index({0, 2, Slice(-2, None)})), (std::vector<double>{10, 11}));
  EXPECT_EQ(values(x.index({0, 0, Slice(1, None, 2)})), (std::vector<double>{1, 3}));
  EXPECT_EQ(x.index({Slice(5, None)}).shape(), (Shape{0, 3, 4}));  // clamped, as Python's slices
  EXPECT_EQ(x.index({Ellipsis, None}).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(x.index({true}).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x.index({false}).shape(), (Shape{0, 2, 3, 4}));
  EXPECT_EQ(x.index({}).shape(), x.shape());
  Tensor element = x.index({1, 2, 3});
  EXPECT_EQ(element.dim(), 0);
  EXPECT_EQ(element.item<double>(), 23);
}

TEST(Indexing, AdvancedIndicesGatherWithPyTorchsPlacement) {
  Tensor x = x24();
  Tensor v = arange(5, kFloat64);
  EXPECT_EQ(values(v.index({ints({4, -1, 0, 0})})), (std::vector<double>{4, 4, 0, 0}));
  // One index at dim 1: its dims stand there.
  Tensor a = x.index({Slice(), ints({2, 0})});
  EXPECT_EQ(a.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(values(a), (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23, 12, 13, 14, 15}));
  // Two adjacent at the front: x[[1, 0], [2, 1]] = rows x[1, 2] and x[0, 1].
  Tensor b = x.index({ints({1, 0}), ints({2, 1})});
  EXPECT_EQ(b.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(b), (std::vector<double>{20, 21, 22, 23, 4, 5, 6, 7}));
  // Separated by a slice: the broadcast dim goes first. x[[1, 0], :, [3, 0]] = x[1, :, 3], x[0, :, 0].
  Tensor c = x.index({ints({1, 0}), Slice(), ints({3, 0})});
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(c), (std::vector<double>{15, 19, 23, 0, 4, 8}));
  // Adjacent after a slice, broadcast [2, 1] with [2]: out[a][p][q] = x[a][i[p]][j[q]].
  Tensor d = x.index({Slice(), ints({0, 2}, {2, 1}), ints({1, 3})});
  EXPECT_EQ(d.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(values(d), (std::vector<double>{1, 3, 9, 11, 13, 15, 21, 23}));
  // An integer is a basic index (PyTorch, not NumPy): x[0, :, [1, 2]] is [3, 2].
  Tensor e = x.index({0, Slice(), ints({1, 2})});
  EXPECT_EQ(e.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(e), (std::vector<double>{1, 2, 5, 6, 9, 10}));
  // A 0-d index removes its dim; int32 indices work; a gather copies.
  EXPECT_EQ(x.index({ints({1}).reshape(Shape{})}).shape(), (Shape{3, 4}));
  Tensor i32 = ints({2, 1}).to(kInt32);
  EXPECT_EQ(values(x.index({0, i32})), (std::vector<double>{8, 9, 10, 11, 4, 5, 6, 7}));
  Tensor copy = x.index({ints({0})});
  copy.index_put_({0, 0, 0}, 100.0);
  EXPECT_EQ(x.index({0, 0, 0}).item<double>(), 0);
  // A transposed (non-contiguous) source.
  Tensor t = x.index({0}).transpose(0, 1);  // [4, 3]: t[i][j] = 4 j + i
  EXPECT_EQ(values(t.index({ints({3, 1}), ints({2, 0})})), (std::vector<double>{11, 1}));
}

TEST(Indexing, BoolMasks) {
  Tensor x = x24();
  Tensor mask = bools({true, false, true, false, true, false}, {2, 3});
  Tensor a = x.index({mask});  // the rows (0, 0), (0, 2), (1, 1)
  EXPECT_EQ(a.shape(), (Shape{3, 4}));
  EXPECT_EQ(values(a), (std::vector<double>{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19}));
  Tensor last = bools({false, true, false, true});
  EXPECT_EQ(values(x.index({1, 0, last})), (std::vector<double>{13, 15}));
  EXPECT_EQ(x.index({Ellipsis, last}).shape(), (Shape{2, 3, 2}));
  Tensor big = gt(x, 20.0);
  EXPECT_EQ(values(x.index({big})), (std::vector<double>{21, 22, 23}));
  EXPECT_EQ(x.index({lt(x, 0.0)}).shape(), (Shape{0}));
  EXPECT_EQ(x.index({bools({true}).reshape(Shape{})}).shape(), (Shape{1, 2, 3, 4}));  // a 0-d mask acts as a bool
  EXPECT_EQ(values(masked_select(x.index({0}), bools({true, false, false, true}))),
            (std::vector<double>{0, 3, 4, 7, 8, 11}));  // the mask broadcasts over rows
}

TEST(Indexing, Errors) {
  Tensor x = x24();
  expect_error([&] { x.index({doubles({0})}); }, {"tensors used as indices must be long, int, byte or bool", "float64"});
  expect_error([&] { x.index({ints({0, 2})}); }, {"index 2 is out of bounds for dimension 0 with size 2"});
  expect_error([&] { x.index({Slice(), Slice(), ints({-5})}); }, {"index -5 is out of bounds for dimension 2 with size 4"});
  expect_error([&] { x.index({0, 3}); }, {"index 3 is out of bounds for dimension 1 with size 3"});
  expect_error([&] { x.index({0, 0, 0, 0}); }, {"too many indices for a tensor of dimension 3"});
  expect_error([&] { x.index({Ellipsis, 0, Ellipsis}); }, {"single ellipsis"});
  expect_error([&] { x.index({Slice(None, None, 0)}); }, {"slice step must be positive, got 0"});
  expect_error([&] { x.index({bools({true, false, true})}); }, {"shape of the mask [3]", "indexed tensor [2]"});
  expect_error([&] { x.index({ints({0, 1}), ints({0, 1, 2})}); }, {"[2]", "[3]"});
  expect_error([&] { TensorIndex bad("..x"); }, {"\"...\""});
  Tensor y = zeros({2, 3}, kFloat64);
  expect_error([&] { y.index_put_({0}, ones({2}, kFloat64)); }, {"shape mismatch", "[2]", "[3]"});
  expect_error([&] { y.index_put_({0}, ones({3}, kFloat32)); }, {"dtype", "float64", "float32"});
  Tensor leaf = zeros({3}, kFloat64).requires_grad_();
  expect_error([&] { leaf.index_put_({0}, 1.0); }, {"leaf Variable that requires grad"});
}

TEST(Indexing, GradientAddsOverRepeatedIndices) {
  Tensor x = zeros({4}, kFloat64).requires_grad_();
  x.index({ints({0, 0, 2})}).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 0, 1, 0}));
  Tensor m = zeros({2, 3}, kFloat64).requires_grad_();
  (m.index({Slice(), ints({2, 2})}) * doubles({1, 10})).sum().backward();
  EXPECT_EQ(m.grad().to_vector<double>(), (std::vector<double>{0, 0, 11, 0, 0, 11}));
}

TEST(Indexing, Gradcheck) {
  manual_seed(5);
  Tensor x = randn({3, 4, 5}, kFloat64).requires_grad_();
  const Tensor rows = ints({2, 0, 2}), cols = ints({1, -1}, {2, 1}), mask = gt(randn({4, 5}, kFloat64), 0.0);
  std::vector<std::function<Tensor(const Tensor&)>> cases = {
      [&](const Tensor& t) { return t.index({Slice(1, None), None, -1}); },
      [&](const Tensor& t) { return t.index({rows}); },
      [&](const Tensor& t) { return t.index({Slice(), cols, rows}); },
      [&](const Tensor& t) { return t.index({rows, Slice(), cols}); },
      [&](const Tensor& t) { return t.index({1, mask}); },
      [&](const Tensor& t) { return masked_select(t, mask); },
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return cases[i](in[0]); }, {x});
    EXPECT_TRUE(r) << r.message;
  }
}

TEST(IndexPut, WritesInPlaceThroughViews) {
  Tensor x = zeros({2, 3}, kFloat64);
  const uint64_t version = x._version();
  x.index_put_({Slice(), 1}, 5.0);
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0, 5, 0, 0, 5, 0}));
  EXPECT_GT(x._version(), version);
  x.index_put_({Slice(), Slice(None, 1)}, 3);  // an integer Scalar into float64
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{3, 5, 0, 3, 5, 0}));
  x.index_put_({Slice(), Slice(None, 1)}, 0);
  Tensor row = x.index({0});
  row.index_put_({ints({0, 2})}, 7.0);
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{7, 5, 7, 0, 5, 0}));
  x.index_put_({gt(x, 6.0)}, 1.0);
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1, 5, 1, 0, 5, 0}));
  x.index_put_({ints({1})}, doubles({4, 3, 2}));  // broadcast over the indexed row
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1, 5, 1, 4, 3, 2}));
  Tensor xt = x.t();  // a transposed destination [3, 2]
  xt.index_put_({ints({2, 0}), ints({1, 0})}, doubles({-1, -2}));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{-2, 5, 1, 4, 3, -1}));
  Tensor y = zeros({2, 3, 4}, kFloat64);
  y.index_put_({ints({1, 0}), Slice(), ints({3, 0})}, doubles({1, 2, 3}));  // value [3] to the [2, 3] result
  EXPECT_EQ(values(y.index({1, Slice(), 3})), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(values(y.index({0, Slice(), 0})), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(y.sum().item<double>(), 12);
}

TEST(IndexPut, Accumulate) {
  Tensor x = zeros({5}, kFloat64);
  index_put_(x, {ints({0, 0, 1, 4})}, ones({4}, kFloat64), /*accumulate=*/true);
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{2, 1, 0, 0, 1}));
  Tensor y = zeros({5}, kFloat64);
  index_put_(y, {ints({0, 0, 1, 4})}, ones({4}, kFloat64), /*accumulate=*/false);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 1, 0, 0, 1}));
  Tensor m = zeros({2, 2}, kInt64);
  Tensor out = index_put(m, {std::nullopt, ints({1, 1})}, ints({1, 2}, {1, 2}), true);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 0, 3}));
  EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(IndexPut, Autograd) {
  // The value's gradient: the output gradient at the written places.
  Tensor v = doubles({1, 2}).requires_grad_();
  Tensor x = zeros({4}, kFloat64);
  x.index_put_({ints({1, 3})}, v);
  EXPECT_TRUE(x.requires_grad());
  (x * doubles({10, 20, 30, 40})).sum().backward();
  EXPECT_EQ(v.grad().to_vector<double>(), (std::vector<double>{20, 40}));
  // A non-leaf's gradient is zero where it was overwritten.
  Tensor a = ones({4}, kFloat64).requires_grad_();
  Tensor y = a * 2.0;
  y.index_put_({0}, 0.0);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0, 2, 2, 2}));
  y.sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 2, 2, 2}));
  // A broadcast value sums its gradient; accumulate passes x's gradient through.
  Tensor s = doubles({3}, {}).requires_grad_();
  Tensor z = zeros({2, 3}, kFloat64);
  index_put_(z, {ints({0, 0})}, expand(s, {2, 3}), true);
  z.sum().backward();
  EXPECT_EQ(s.grad().item<double>(), 6);
  manual_seed(9);
  auto check = [](bool accumulate, bool mask) {
    Tensor base = randn({3, 4}, kFloat64).requires_grad_();
    Tensor value = randn({2, 4}, kFloat64).requires_grad_();
    auto r = gradcheck(
        [&](const std::vector<Tensor>& in) {
          Tensor t = in[0] * 1.0;
          if (mask) index_put_(t, {bools({true, false, true})}, in[1], accumulate);
          else index_put_(t, {ints({2, 0})}, in[1], accumulate);
          return t;
        },
        {base, value});
    EXPECT_TRUE(r) << (accumulate ? "accumulate " : "") << (mask ? "mask: " : ": ") << r.message;
  };
  check(false, false);
  check(true, false);
  check(false, true);
}

TEST(Nonzero, PositionsInRowMajorOrder) {
  Tensor x = doubles({0, 1.5, 0, -2, 0, 0}, {2, 3});
  EXPECT_EQ(nonzero(x).shape(), (Shape{2, 2}));
  EXPECT_EQ(nonzero(x).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(argwhere(bools({false, true, true})).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nonzero(zeros({3, 0})).shape(), (Shape{0, 2}));
  EXPECT_EQ(nonzero(ints({7}).reshape(Shape{})).shape(), (Shape{1, 0}));
  expect_error([&] { masked_select(x, x); }, {"masked_select", "bool mask", "float64"});
}

}  // namespace minidl::indexing_test
