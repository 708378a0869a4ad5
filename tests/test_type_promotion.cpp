// Type promotion: every op that mixes dtypes returns what PyTorch 2.x returns for the same
// expression (the expected values in the comments are PyTorch's), and in-place ops refuse a result
// their destination cannot hold.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "minidl.h"
#include "test_util.h"

namespace minidl::type_promotion_test {

using minidl::testing::expect_error;

namespace {

Tensor ints(const std::vector<int64_t>& v) { return Tensor::from_vector<int64_t>(v); }
Tensor floats(const std::vector<float>& v) { return Tensor::from_vector<float>(v); }
Tensor doubles(const std::vector<double>& v) { return Tensor::from_vector<double>(v); }

TEST(TypePromotion, AccuracyOfBoolSumOverFloatIsAFraction) {
  // (pred == target).sum() / 8.0  ->  tensor(0.8750)
  Tensor pred = ints({1, 2, 3, 4, 5, 6, 7, 8}), target = ints({1, 2, 3, 4, 5, 6, 7, 0});
  Tensor acc = eq(pred, target).sum() / 8.0;
  EXPECT_EQ(acc.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(acc.item<float>(), 0.875f);
}

TEST(TypePromotion, IntTensorTimesFloatScalarIsFloat32) {
  // labels * 0.1 -> tensor([0.0000, 0.1000, 0.2000, 0.3000]);  torch.arange(4) * 2.5 -> [0., 2.5, 5., 7.5]
  Tensor labels = ints({0, 1, 2, 3});
  Tensor scaled = labels * 0.1;
  EXPECT_EQ(scaled.dtype(), kFloat32);
  EXPECT_EQ(scaled.to_vector<float>(), (std::vector<float>{0.0f, 0.1f, 0.2f, 0.3f}));
  Tensor times = labels * 2.5;
  EXPECT_EQ(times.dtype(), kFloat32);
  EXPECT_EQ(times.to_vector<float>(), (std::vector<float>{0, 2.5f, 5, 7.5f}));
  Tensor left = 2.5 * labels;
  EXPECT_EQ(left.to_vector<float>(), times.to_vector<float>());
}

TEST(TypePromotion, IntTensorWithIntScalarStaysInt64) {
  // torch.arange(4) * 2 -> tensor([0, 2, 4, 6]) (int64);  True-valued bool * 2 -> int64
  Tensor doubled = ints({0, 1, 2, 3}) * 2;
  EXPECT_EQ(doubled.dtype(), kInt64);
  EXPECT_EQ(doubled.to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4, 6}));
  Tensor mask = Tensor::from_vector<bool>({true, false});
  Tensor counted = mask * 2;
  EXPECT_EQ(counted.dtype(), kInt64);
  EXPECT_EQ(counted.to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
}

TEST(TypePromotion, DivisionIsTrueDivision) {
  // torch.tensor(-7) / 2 -> tensor(-3.5000);  torch.tensor([1, 2, 3]) / torch.tensor([2, 2, 2]) -> [0.5, 1., 1.5]
  Tensor q = ints({-7}).view({}) / 2;
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(q.item<float>(), -3.5f);
  Tensor r = div(ints({1, 2, 3}), ints({2, 2, 2}));
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0.5f, 1.0f, 1.5f}));
  // An integral division by zero is IEEE's in true division: 1 / 0 = inf, as in PyTorch.
  EXPECT_TRUE(std::isinf(div(ints({1}), ints({0})).to_vector<float>()[0]));
}

TEST(TypePromotion, FloorDivideAndRemainderTakePythonSigns) {
  // torch.floor_divide(tensor([-7, 7, -7, 7]), tensor([2, 2, -2, -2])) -> [-4, 3, 3, -4]
  // torch.remainder(same)                                               -> [ 1, 1, -1, -1]
  Tensor a = ints({-7, 7, -7, 7}), b = ints({2, 2, -2, -2});
  EXPECT_EQ(floor_divide(a, b).dtype(), kInt64);
  EXPECT_EQ(floor_divide(a, b).to_vector<int64_t>(), (std::vector<int64_t>{-4, 3, 3, -4}));
  EXPECT_EQ(remainder(a, b).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, -1, -1}));
  EXPECT_EQ((a % 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 2, 1}));
  // Floats: torch.tensor([-7.5, 7.5]) // 2 -> [-4., 3.];  % 2 -> [0.5, 1.5];  % -2 -> [-1.5, -0.5]
  Tensor f = doubles({-7.5, 7.5});
  EXPECT_EQ(floor_divide(f, scalar_tensor(2)).to_vector<double>(), (std::vector<double>{-4, 3}));
  EXPECT_EQ((f % 2).to_vector<double>(), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ((f % -2).to_vector<double>(), (std::vector<double>{-1.5, -0.5}));
  // int64 % 2.5 promotes: torch.tensor([7]) % 2.5 -> tensor([2.])
  Tensor mixed = ints({7}) % 2.5;
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(mixed.to_vector<float>()[0], 2.0f);
  expect_error([&] { floor_divide(a, ints({1, 0, 1, 1})); }, {"floor_divide", "division by zero"});
}

TEST(TypePromotion, RemainderGradientAgainstCentralDifferences) {
  manual_seed(3);
  Tensor a = (randn({4, 3}, kFloat64) * 3).requires_grad_();
  Tensor b = (rand({3}, kFloat64) + 0.5).requires_grad_();
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return remainder(in[0], in[1]); }, {a, b}));
}

TEST(TypePromotion, ClampOfIntByFloatBoundIsFloat) {
  // torch.clamp(torch.tensor([1, 2, 3, 4]), min=2.5) -> tensor([2.5000, 2.5000, 3.0000, 4.0000])
  Tensor c = clamp(ints({1, 2, 3, 4}), 2.5);
  EXPECT_EQ(c.dtype(), kFloat32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{2.5f, 2.5f, 3, 4}));
  // Integral bounds keep int64: torch.clamp(tensor([1, 5]), 2, 4) -> tensor([2, 4])
  Tensor i = clamp(ints({1, 5}), 2, 4);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{2, 4}));
}

TEST(TypePromotion, InPlaceRefusesWhatTheDestinationCannotHold) {
  // x = torch.arange(3); x += 0.5 -> RuntimeError: result type Float can't be cast to the desired output type Long
  Tensor x = ints({0, 1, 2});
  expect_error([&] { x += 0.5; }, {"add_", "result type float32 can't be cast", "int64"});
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));  // untouched
  expect_error([&] { x /= 2; }, {"div_", "float32", "int64"});            // true division
  expect_error([&] { add_(x, floats({1, 1, 1})); }, {"add_", "float32", "int64"});
  x *= 3;  // what fits is done: tensor([0, 3, 6])
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 6}));
  // A float32 destination takes a float64 or int64 operand: y += torch.tensor([1., 2.], dtype=float64)
  Tensor y = floats({1, 1});
  y += doubles({1, 2});
  y += ints({1, 1});
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 4}));
  Tensor m = Tensor::from_vector<bool>({true});
  expect_error([&] { m += 1; }, {"bool"});
}

TEST(TypePromotion, MixedTensorsMeetInTheirResultType) {
  // float32 + float64 -> float64;  int64 + float32 -> float32;  int64 [2] * float64 0-d -> float64;
  // float32 [2] * float64 0-d -> float32 (a 0-d tensor of the same category does not widen)
  EXPECT_EQ((floats({1, 2}) + doubles({1, 2})).dtype(), kFloat64);
  EXPECT_EQ((ints({1, 2}) + floats({0.5f, 0.5f})).dtype(), kFloat32);
  EXPECT_EQ((ints({1, 2}) + floats({0.5f, 0.5f})).to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ((ints({1, 2}) * doubles({2}).view({})).dtype(), kFloat64);
  EXPECT_EQ((floats({1, 2}) * doubles({2}).view({})).dtype(), kFloat32);
  EXPECT_EQ((floats({1, 2}) * ints({2}).view({})).dtype(), kFloat32);
  // float64 tensor * Python float stays float64; bool tensor + int64 tensor -> int64
  EXPECT_EQ((doubles({1}) * 0.5).dtype(), kFloat64);
  EXPECT_EQ((Tensor::from_vector<bool>({true}) + ints({1})).to_vector<int64_t>(), (std::vector<int64_t>{2}));
  expect_error([&] { Tensor::from_vector<bool>({true}) + Tensor::from_vector<bool>({true}); }, {"bool"});
}

TEST(TypePromotion, ResultTypeTable) {
  Tensor i = ints({1}), f = floats({1}), d = doubles({1}), b = Tensor::from_vector<bool>({true});
  EXPECT_EQ(promote_types(kBool, kInt64), kInt64);
  EXPECT_EQ(promote_types(kInt64, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(result_type({i, f}), kFloat32);
  EXPECT_EQ(result_type({b, i}), kInt64);
  EXPECT_EQ(result_type(i, 2.5), kFloat32);
  EXPECT_EQ(result_type(i, 2), kInt64);
  EXPECT_EQ(result_type(b, 2), kInt64);
  EXPECT_EQ(result_type(b, true), kBool);
  EXPECT_EQ(result_type(d, 2.5), kFloat64);
  EXPECT_EQ(result_type({i, d.view({})}), kFloat64);   // a 0-d tensor of a higher category counts
  EXPECT_EQ(result_type({f, d.view({})}), kFloat32);   // of the same category it does not
  EXPECT_EQ(result_type({i.view({}), scalar_tensor(0.5)}), kFloat32);  // wrapped float: the default float
  EXPECT_TRUE(can_cast(kInt64, kFloat32));
  EXPECT_FALSE(can_cast(kFloat32, kInt64));
  EXPECT_FALSE(can_cast(kInt64, kBool));
}

TEST(TypePromotion, ComparisonsAcrossDtypes) {
  // torch.tensor([0, 1, 2]) > 0.5 -> [False, True, True];  tensor([1, 2]) == tensor([1., 2.5]) -> [True, False]
  EXPECT_EQ((ints({0, 1, 2}) > 0.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(eq(ints({1, 2}), floats({1, 2.5f})).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(lt(floats({1, 2}), doubles({1.5, 1.5})).to_vector<bool>(), (std::vector<bool>{true, false}));
}

TEST(TypePromotion, CatAndWhereOfMixedDtypes) {
  // torch.cat([tensor([1, 2]), tensor([0.5])]) -> tensor([1.0000, 2.0000, 0.5000])
  Tensor c = cat({ints({1, 2}), floats({0.5f})}, 0);
  EXPECT_EQ(c.dtype(), kFloat32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 0.5f}));
  // torch.where(mask, tensor([1, 2]), tensor([0.5, 0.5])) -> float32
  Tensor mask = Tensor::from_vector<bool>({true, false});
  Tensor w = where(mask, ints({1, 2}), floats({0.5f, 0.5f}));
  EXPECT_EQ(w.dtype(), kFloat32);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 0.5f}));
  EXPECT_EQ(where(mask, ints({1, 2}), 0.5).to_vector<float>(), (std::vector<float>{1, 0.5f}));
}

TEST(TypePromotion, UnaryMathOfIntegersIsFloat) {
  // torch.exp(torch.tensor([0, 1])) -> tensor([1.0000, 2.7183]);  torch.abs(tensor([-3, 2])) -> tensor([3, 2])
  Tensor e = exp(ints({0, 1}));
  EXPECT_EQ(e.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(e.to_vector<float>()[1], std::exp(1.0f));
  EXPECT_EQ(sqrt(ints({4})).to_vector<float>(), (std::vector<float>{2}));
  Tensor a = abs(ints({-3, 2}));
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(pow(ints({2, 3}), 2).to_vector<int64_t>(), (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(pow(ints({4}), 0.5).to_vector<float>(), (std::vector<float>{2}));
  // torch.tensor([2]) ** -1 -> RuntimeError: Integers to negative integer powers are not allowed.
  expect_error([] { pow(ints({2}), -1); }, {"pow", "negative integer powers"});
  EXPECT_EQ(pow(ints({2}), -1.0).to_vector<float>(), (std::vector<float>{0.5f}));
}

TEST(TypePromotion, GradientsFlowThroughTheCasts) {
  // w (float32, requires grad) * x (float64): the product is float64, w.grad is float32.
  Tensor w = floats({1, 2}).requires_grad_();
  Tensor x = doubles({3, 4});
  Tensor y = (w * x).sum();
  EXPECT_EQ(y.dtype(), kFloat64);
  y.backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3, 4}));
  // Through cat and where as well.
  Tensor v = floats({1}).requires_grad_();
  (cat({v, doubles({2})}, 0) * 2).sum().backward();
  EXPECT_EQ(v.grad().dtype(), kFloat32);
  EXPECT_EQ(v.grad().to_vector<float>(), (std::vector<float>{2}));
}

}  // namespace

}  // namespace minidl::type_promotion_test
