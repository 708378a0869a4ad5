// The bool dtype, comparisons (tensor and scalar, broadcast), where / masked_fill / clamp with their
// gradients, in-place ops and their autograd rule, and the small view and creation helpers
// (squeeze(), slice, full_like): values against direct loops, float64 gradchecks, clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "minidl.h"
#include "test_util.h"

namespace minidl::compare_where_test {

using minidl::testing::expect_error;

namespace {

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

std::vector<bool> bools(const Tensor& t) { return t.to_vector<bool>(); }

// The value of element `flat` of a row-major `shape` broadcast from `from` (a direct reference).
double broadcast_at(const std::vector<double>& v, const Shape& from, const Shape& shape, int64_t flat) {
  int64_t offset = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1, fd = static_cast<int64_t>(from.size()) - 1; d >= 0; --d, --fd) {
    const int64_t i = flat % shape[d];
    flat /= shape[d];
    if (fd < 0) continue;
    if (from[fd] != 1) offset += i * stride;
    stride *= from[fd];
  }
  return v[static_cast<size_t>(offset)];
}

void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs) {
  GradcheckResult r = gradcheck(f, std::move(inputs));
  EXPECT_TRUE(r) << r.message;
}

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }

}  // namespace

TEST(BoolDType, SizeNameConversionsAndVectors) {
  EXPECT_EQ(element_size(kBool), 1u);
  EXPECT_STREQ(dtype_name(kBool), "bool");
  EXPECT_FALSE(is_floating(kBool));
  Tensor b = Tensor::from_vector<bool>({true, false, true});
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(b.nbytes(), 3u);
  EXPECT_EQ(bools(b), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(b.to(kFloat32).to_vector<float>(), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(b.to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  // Any nonzero converts to true, as in PyTorch; NaN is nonzero.
  Tensor f = Tensor::from_vector<float>({0, -2.5f, 0.25f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(bools(f.to(kBool)), (std::vector<bool>{false, true, true, true}));
  EXPECT_TRUE(full({}, 1, kBool).item<bool>());
  EXPECT_EQ(bools(zeros({2}, kBool)), (std::vector<bool>{false, false}));
  EXPECT_EQ(bools(Tensor::from_vector<bool>({true, true, false, false}, {2, 2}).t().contiguous()),
            (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(bools(index_select(b, Tensor::from_vector<int64_t>({2, 1}))), (std::vector<bool>{true, false}));
  // A conversion to bool carries no gradient; bool cannot require one.
  Tensor x = randn({3}).requires_grad_();
  EXPECT_FALSE(x.to(kBool).requires_grad());
  expect_error([&] { b.requires_grad_(); }, {"floating", "bool"});
  // No arithmetic on bool; the message says how to get a number.
  expect_error([&] { add(b, b); }, {"add", "bool", "to(kFloat32)"});
  expect_error([&] { mean(b); }, {"mean", "bool"});
}

TEST(BoolDType, PrintsLikePyTorch) {
  EXPECT_EQ(printed(Tensor::from_vector<bool>({true, false, true})),
            "tensor([ True, False,  True], shape=[3], dtype=bool)");
  EXPECT_EQ(printed(Tensor::from_vector<bool>({true, true, false, true}, {2, 2})),
            "tensor([[ True,  True],\n        [False,  True]], shape=[2, 2], dtype=bool)");
  EXPECT_EQ(printed(full({}, 1, kBool)), "tensor(True, shape=[], dtype=bool)");
}

TEST(Compare, EveryOpAgainstLoopsWithBroadcasting) {
  manual_seed(31);
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {{{4, 5}, {4, 5}}, {{3, 1, 4}, {2, 1}}, {{}, {3, 2}}, {{1, 6}, {5, 1}}};
  using Ref = std::function<bool(double, double)>;
  const std::vector<std::tuple<const char*, std::function<Tensor(const Tensor&, const Tensor&)>, Ref>> ops = {
      {"eq", [](auto& a, auto& b) { return a == b; }, [](double x, double y) { return x == y; }},
      {"ne", [](auto& a, auto& b) { return a != b; }, [](double x, double y) { return x != y; }},
      {"lt", [](auto& a, auto& b) { return a < b; }, [](double x, double y) { return x < y; }},
      {"le", [](auto& a, auto& b) { return a <= b; }, [](double x, double y) { return x <= y; }},
      {"gt", [](auto& a, auto& b) { return a > b; }, [](double x, double y) { return x > y; }},
      {"ge", [](auto& a, auto& b) { return a >= b; }, [](double x, double y) { return x >= y; }},
  };
  for (DType dtype : {kFloat32, kFloat64, kInt64}) {
    for (const Case& c : cases) {
      // Small integers, so that equal pairs occur in every dtype.
      Tensor a = (rand(c.a, kFloat64) * 3.0).to(kInt64).to(dtype), b = (rand(c.b, kFloat64) * 3.0).to(kInt64).to(dtype);
      std::vector<double> av = a.to(kFloat64).to_vector<double>(), bv = b.to(kFloat64).to_vector<double>();
      const Shape shape = broadcast_shapes(c.a, c.b, "test");
      for (const auto& [name, op, ref] : ops) {
        SCOPED_TRACE(std::string(name) + " " + dtype_name(dtype));
        Tensor out = op(a, b);
        EXPECT_EQ(out.dtype(), kBool);
        EXPECT_EQ(out.shape(), shape);
        std::vector<bool> got = bools(out);
        for (int64_t i = 0; i < shape_numel(shape); ++i)
          EXPECT_EQ(static_cast<bool>(got[i]), ref(broadcast_at(av, c.a, shape, i), broadcast_at(bv, c.b, shape, i))) << i;
      }
    }
  }
  // A transposed operand is read through its strides.
  Tensor m = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(bools(m.t() > m), (std::vector<bool>{false, true, false, false}));
  // bool against bool.
  Tensor p = Tensor::from_vector<bool>({true, false}), q = Tensor::from_vector<bool>({true, true});
  EXPECT_EQ(bools(p == q), (std::vector<bool>{true, false}));
  EXPECT_EQ(bools(p != q), (std::vector<bool>{false, true}));
}

TEST(Compare, NaNAndScalars) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::from_vector<double>({nan, 1, 2});
  EXPECT_EQ(bools(x == x), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(bools(x != x), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(bools(x < 2.0), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(bools(x >= 1.0), (std::vector<bool>{false, true, true}));
  // A scalar on the left flips the comparison.
  EXPECT_EQ(bools(1.5 < x), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(bools(1.0 >= x), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(bools(2.0 == x), (std::vector<bool>{false, false, true}));
  // float32 against a double scalar compares in float32, as PyTorch rounds the scalar.
  Tensor f = Tensor::from_vector<float>({0.1f});
  EXPECT_TRUE(eq(f, 0.1).item<bool>());
  // int64 against a fractional scalar is not truncated.
  Tensor i = Tensor::from_vector<int64_t>({0, 1, 2});
  EXPECT_EQ(bools(i > 0.5), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(bools(i == 1), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(bools(i < -0.5), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(bools(Tensor::from_vector<bool>({true, false}) == 1.0), (std::vector<bool>{true, false}));
}

TEST(Compare, AccuracyCountsAndErrors) {
  Tensor logits = Tensor::from_vector<float>({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, {3, 2});
  Tensor target = Tensor::from_vector<int64_t>({1, 0, 0});
  Tensor hits = eq(argmax(logits, 1), target);
  EXPECT_EQ(hits.dtype(), kBool);
  Tensor correct = hits.sum();
  EXPECT_EQ(correct.dtype(), kInt64);
  EXPECT_EQ(correct.item<int64_t>(), 2);
  EXPECT_EQ(sum(hits.view({3, 1}), {1}).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
  // Mixed dtypes compare in their result type (float64 here), as in PyTorch.
  EXPECT_EQ(bools(gt(full({2}, 0.1), full({2}, 0.1, kFloat64))), (std::vector<bool>{true, true}));
  expect_error([] { lt(zeros({2, 3}), zeros({4})); }, {"lt", "[2, 3]", "[4]", "cannot be broadcast"});
  // Comparisons are not differentiable: the result needs no gradient.
  EXPECT_FALSE(gt(randn({2}).requires_grad_(), 0.0).requires_grad());
}

TEST(Where, ValuesBroadcastingAndScalars) {
  Tensor cond = Tensor::from_vector<bool>({true, false, true}, {3, 1});
  Tensor a = Tensor::from_vector<double>({1, 2});     // [2]
  Tensor b = Tensor::from_vector<double>({-1, -2, -3}, {3, 1});
  Tensor out = where(cond, a, b);
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, 2, -2, -2, 1, 2}));
  Tensor x = Tensor::from_vector<double>({-1, 0, 3});
  EXPECT_EQ(where(x > 0.0, x, 0.0).to_vector<double>(), (std::vector<double>{0, 0, 3}));
  EXPECT_EQ(where(x > 0.0, 7.0, x).to_vector<double>(), (std::vector<double>{-1, 0, 7}));
  EXPECT_EQ(where(x > 0.0, Tensor::from_vector<int64_t>({1, 1, 1}), zeros({3}, kInt64)).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(bools(where(x > 0.0, x < 0.0, x == 0.0)), (std::vector<bool>{false, true, false}));
  expect_error([&] { where(x, x, x); }, {"where", "bool condition", "float64"});
  EXPECT_EQ(where(x > 0.0, x, zeros({3})).dtype(), kFloat64);  // promoted, as torch.where
  expect_error([&] { where(x > 0.0, x, zeros({2}, kFloat64)); }, {"where", "[3]", "[2]"});
}

TEST(Where, GradientsGoToTheChosenSide) {
  manual_seed(32);
  Tensor cond = Tensor::from_vector<bool>({true, false, false, true, true, false}, {2, 3});
  // Hand-computed: a gets the seed where cond, b elsewhere; a broadcast [3] sums over rows.
  Tensor a = Tensor::from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor b = zeros({2, 3}, kFloat64).requires_grad_();
  where(cond, a, b).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{2, 1, 0}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0, 1, 1, 0, 0, 1}));
  expect_gradcheck([&](auto& in) { return where(cond, in[0], in[1]); }, {leaf({2, 3}), leaf({2, 3})});
  expect_gradcheck([&](auto& in) { return where(cond, in[0], in[1]); }, {leaf({3}), leaf({2, 1})});
  expect_gradcheck([&](auto& in) { return where(cond.view({2, 3, 1}), in[0], in[1]); }, {leaf({1, 3, 4}), leaf({})});
  expect_gradcheck([&](auto& in) { return where(in[0] > 0.0, in[0], in[0] * 0.1); }, {leaf({7})});
}

TEST(MaskedFill, ValuesGradientsAndErrors) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mask = Tensor::from_vector<bool>({true, false, true});  // broadcast over rows
  EXPECT_EQ(masked_fill(x, mask, -1).to_vector<double>(), (std::vector<double>{-1, 2, -1, -1, 5, -1}));
  manual_seed(33);
  expect_gradcheck([&](auto& in) { return masked_fill(in[0], mask, 0.5); }, {leaf({2, 3})});
  // A 0-d tensor value gets the gradient of every filled element.
  Tensor v = full({}, 2.0, kFloat64).requires_grad_();
  Tensor xl = x.clone().requires_grad_();
  masked_fill(xl, mask, v).sum().backward();
  EXPECT_DOUBLE_EQ(v.grad().item<double>(), 4.0);
  EXPECT_EQ(xl.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 0, 1, 0}));
  expect_gradcheck([&](auto& in) { return masked_fill(in[0], mask, in[1]); }, {leaf({2, 3}), leaf({})});
  expect_error([&] { masked_fill(x, Tensor::from_vector<double>({1, 0, 1}), 0); }, {"masked_fill", "bool", "float64"});
  expect_error([&] { masked_fill(x, zeros({4, 2, 3}, kBool), 0); }, {"masked_fill", "[4, 2, 3]", "[2, 3]"});
  expect_error([&] { masked_fill(x, zeros({4}, kBool), 0); }, {"masked_fill", "mask of shape [4]", "[2, 3]"});
  expect_error([&] { masked_fill(x, mask, zeros({1}, kFloat64)); }, {"masked_fill", "0-d", "[1]"});
}

TEST(Clamp, ValuesAndPyTorchGradientAtTheBounds) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = Tensor::from_vector<double>({-2, -1, 0, 1, 2, nan});
  std::vector<double> got = clamp(x, -1.0, 1.0).to_vector<double>();
  EXPECT_EQ(std::vector<double>(got.begin(), got.end() - 1), (std::vector<double>{-1, -1, 0, 1, 1}));
  EXPECT_TRUE(std::isnan(got.back()));
  EXPECT_EQ(clamp(x.slice(0, 0, 5), std::nullopt, 0.5).to_vector<double>(), (std::vector<double>{-2, -1, 0, 0.5, 0.5}));
  EXPECT_EQ(clamp(x.slice(0, 0, 5), 0.5).to_vector<double>(), (std::vector<double>{0.5, 0.5, 0.5, 1, 2}));
  // min > max: every element becomes max, as torch.clamp.
  EXPECT_EQ(clamp(x.slice(0, 0, 5), 1.0, -1.0).to_vector<double>(), (std::vector<double>(5, -1.0)));
  EXPECT_EQ(clamp(Tensor::from_vector<int64_t>({-5, 0, 5}), -1, 1).to_vector<int64_t>(),
            (std::vector<int64_t>{-1, 0, 1}));
  // Floating bounds promote an int64 tensor to float32, as torch.clamp does.
  EXPECT_EQ(clamp(Tensor::from_vector<int64_t>({-5, 0, 5}), -1.0, 1.0).to_vector<float>(),
            (std::vector<float>{-1, 0, 1}));
  // The gradient is 1 on [min, max] with both bounds included, 0 outside.
  Tensor b = Tensor::from_vector<double>({-1.5, -1, -0.5, 1, 1.5}).requires_grad_();
  clamp(b, -1.0, 1.0).sum().backward();
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0, 1, 1, 1, 0}));
  Tensor c = Tensor::from_vector<double>({-1, 0, 1}).requires_grad_();
  clamp(c, std::nullopt, 0.0).sum().backward();
  EXPECT_EQ(c.grad().to_vector<double>(), (std::vector<double>{1, 1, 0}));
  // Away from the kinks the numeric gradient agrees.
  Tensor away = Tensor::from_vector<double>({-3, -0.7, 0.2, 0.9, 2.5, -1.6}).requires_grad_();
  expect_gradcheck([](auto& in) { return clamp(in[0], -1.0, 1.0); }, {away});
  expect_error([&] { clamp(x, std::nullopt, std::nullopt); }, {"clamp", "min", "max"});
  expect_error([&] { clamp(x > 0.0, 0.0, 1.0); }, {"clamp", "bool"});
}

TEST(InPlace, OperatorsZeroAndTheLeafRule) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3});
  x += Tensor::from_vector<double>({1, 1, 1});
  x -= 0.5;
  x *= 2.0;
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{3, 5, 7}));
  x *= Tensor::from_vector<double>({2});  // broadcasts
  x -= x;
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{0, 0, 0}));
  Tensor m = ones({2, 3}, kFloat64);
  m.zero_();
  EXPECT_EQ(m.to_vector<double>(), std::vector<double>(6, 0.0));
  // zero_ on a strided view clears exactly its elements of the base.
  Tensor base = ones({3, 4}, kFloat64);
  Tensor column = base.slice(1, 1, 4, 2);  // columns 1 and 3
  column.zero_();
  EXPECT_EQ(base.to_vector<double>(), (std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0}));
  zero_(base);
  EXPECT_EQ(sum(base).item<double>(), 0.0);

  // A leaf that requires grad: an error while grad mode is on, with PyTorch's message; allowed
  // under NoGradGuard (how optimizers update parameters).
  Tensor w = ones({3}, kFloat64).requires_grad_();
  expect_error([&] { w += 1.0; }, {"add_", "a leaf Variable that requires grad is being used in an in-place operation"});
  expect_error([&] { w -= w; }, {"sub_", "leaf Variable"});
  expect_error([&] { w *= 2.0; }, {"mul_", "leaf Variable"});
  expect_error([&] { w.zero_(); }, {"zero_", "leaf Variable"});
  {
    NoGradGuard no_grad;
    w += 1.0;
    w *= 3.0;
  }
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{6, 6, 6}));
  {
    NoGradGuard no_grad;
    w.zero_();
  }
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0, 0, 0}));
  // A non-leaf that requires grad: an in-place change would be invisible to the tape.
  Tensor y = w * 2.0;
  expect_error([&] { y += 1.0; }, {"add_", "requires grad", "out-of-place"});
  // Gradients are plain tensors: zeroing one in place is fine.
  (w * 2.0).sum().backward();
  w.grad().zero_();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
  expect_error([&] { Tensor a = zeros({3}); a += zeros({2}); }, {"add_", "[2]", "[3]"});
}

TEST(Views, SqueezeAllFullLikeAndSlice) {
  Tensor x = zeros({2, 1, 3, 1});
  EXPECT_EQ(x.squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(squeeze(zeros({1, 1})).shape(), Shape{});
  EXPECT_EQ(squeeze(zeros({4})).shape(), (Shape{4}));
  Tensor s = randn({1, 3, 1}, kFloat64).requires_grad_();
  expect_gradcheck([](auto& in) { return squeeze(in[0]); }, {s});

  Tensor f = full_like(zeros({2, 2}, kInt64), 7);
  EXPECT_EQ(f.dtype(), kInt64);
  EXPECT_EQ(f.to_vector<int64_t>(), (std::vector<int64_t>{7, 7, 7, 7}));
  EXPECT_EQ(bools(full_like(zeros({2}, kBool), 1)), (std::vector<bool>{true, true}));

  Tensor r = arange(10, kFloat64);
  EXPECT_EQ(slice(r, 0, 2, 8, 3).to_vector<double>(), (std::vector<double>{2, 5}));
  EXPECT_EQ(slice(r, 0, -3).to_vector<double>(), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(slice(r, 0, std::nullopt, -8).to_vector<double>(), (std::vector<double>{0, 1}));
  EXPECT_EQ(slice(r, 0, 1, std::nullopt, 4).to_vector<double>(), (std::vector<double>{1, 5, 9}));
  EXPECT_EQ(slice(r, 0, 8, 2).numel(), 0);
  EXPECT_EQ(slice(r, 0, -100, 100).numel(), 10);  // clamped to the size
  Tensor m = arange(12, kFloat64).view({3, 4});
  Tensor v = m.slice(1, 1, std::nullopt, 2);  // m[:, 1::2], a view
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(v.to_vector<double>(), (std::vector<double>{1, 3, 5, 7, 9, 11}));
  EXPECT_TRUE(v.impl().storage == m.impl().storage);
  manual_seed(34);
  expect_gradcheck([](auto& in) { return slice(in[0], 1, 1, std::nullopt, 2); }, {leaf({3, 5})});
  expect_gradcheck([](auto& in) { return slice(slice(in[0], 0, -3), 1, 0, 3, 2); }, {leaf({4, 4})});
  expect_error([&] { slice(r, 0, 0, 5, 0); }, {"slice", "step > 0", "got 0"});
  expect_error([&] { slice(r, 1); }, {"slice", "dimension out of range"});
  expect_error([] { slice(zeros({}), 0); }, {"slice", "scalar"});
}

}  // namespace minidl::compare_where_test
