// square, exp2, fmax / fmin, clip, diff, take, msort and cross, as libtorch gives them (values worked
// out by hand), their gradients checked in float64, and the CUDA results against the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "minidl.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::libtorch_ops_more_test {

namespace {

using testing::expect_error;
using F = std::vector<float>;
using L = std::vector<int64_t>;

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }

TEST(LibtorchOpsMore, SquareAndExp2) {
  EXPECT_EQ(square(tensor({-3.0, 0.5})).to_vector<float>(), (F{9, 0.25}));
  EXPECT_EQ(tensor({-3, 4}, kInt64).square().to_vector<int64_t>(), (L{9, 16}));
  const Tensor flags = tensor({1, 0}, kInt64).to(kBool);
  EXPECT_EQ(square(flags).dtype(), kInt64);  // torch.square(bool) -> int64
  EXPECT_EQ(exp2(tensor({-1.0, 0.0, 10.0})).to_vector<float>(), (F{0.5, 1, 1024}));
  const Tensor ints = tensor({3, -1}, kInt64).exp2();
  EXPECT_EQ(ints.dtype(), kFloat32);
  EXPECT_EQ(ints.to_vector<float>(), (F{8, 0.5}));
  manual_seed(1);
  GradcheckResult r = gradcheck([](auto& in) { return square(in[0]); }, {leaf({3, 2})});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([](auto& in) { return exp2(in[0]); }, {leaf({4})});
  EXPECT_TRUE(r) << r.message;
}

TEST(LibtorchOpsMore, FmaxAndFminTreatNanAsMissing) {
  const Tensor a = tensor({1.0, NAN, 3.0, NAN, 2.0}), b = tensor({2.0, 5.0, NAN, NAN, 2.0});
  const std::vector<float> high = fmax(a, b).to_vector<float>(), low = a.fmin(b).to_vector<float>();
  EXPECT_EQ((F{high[0], high[1], high[2], high[4]}), (F{2, 5, 3, 2}));
  EXPECT_TRUE(std::isnan(high[3]));
  EXPECT_EQ((F{low[0], low[1], low[2], low[4]}), (F{1, 5, 3, 2}));
  EXPECT_TRUE(std::isnan(low[3]));
  // The gradient: to a where a >= b (ties included) or b is NaN, else to b, as PyTorch's.
  Tensor x = tensor({1.0, 4.0, 2.0}, kFloat64).requires_grad_(), y = tensor({3.0, 1.0, 2.0}, kFloat64).requires_grad_();
  fmax(x, y).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(fmax(tensor({1, 7}, kInt64), tensor({2.5, 0.0})).dtype(), kFloat32);  // promoted as maximum
}

TEST(LibtorchOpsMore, ClipIsClamp) {
  const Tensor x = tensor({-2.0, 0.5, 3.0});
  EXPECT_EQ(clip(x, -1, 1).to_vector<float>(), (F{-1, 0.5, 1}));
  EXPECT_EQ(x.clip(std::nullopt, 0).to_vector<float>(), (F{-2, 0, 0}));
}

TEST(LibtorchOpsMore, Diff) {
  const Tensor x = tensor({1.0, 4.0, 9.0, 16.0});
  EXPECT_EQ(diff(x).to_vector<float>(), (F{3, 5, 7}));
  EXPECT_EQ(x.diff(2).to_vector<float>(), (F{2, 2}));
  EXPECT_EQ(diff(x, 0).to_vector<float>(), (F{1, 4, 9, 16}));
  EXPECT_EQ(diff(x, 5).numel(), 0);
  // torch.diff(x, prepend=tensor([0.]), append=tensor([20.])) -> [1, 3, 5, 7, 4]
  EXPECT_EQ(diff(x, 1, -1, tensor({0.0}), tensor({20.0})).to_vector<float>(), (F{1, 3, 5, 7, 4}));
  const Tensor m = tensor({{1, 2, 4}, {7, 11, 16}}, kInt64);
  EXPECT_EQ(diff(m, 1, 0).to_vector<int64_t>(), (L{6, 9, 12}));
  EXPECT_EQ(m.diff().sizes(), (Shape{2, 2}));
  const Tensor flags = tensor({1, 1, 0, 1}, kInt64).to(kBool);
  EXPECT_EQ(diff(flags).to(kInt64).to_vector<int64_t>(), (L{0, 1, 1}));
  expect_error([] { diff(full({}, 1.0)); }, {"diff", "0-d"});
  expect_error([&] { diff(x, -1); }, {"diff", "-1"});
  expect_error([&] { diff(m, 1, -1, tensor({1}, kInt64)); }, {"diff", "rank"});
  manual_seed(2);
  GradcheckResult r = gradcheck([](auto& in) { return diff(in[0], 2, 0, in[1]); }, {leaf({4, 3}), leaf({1, 3})});
  EXPECT_TRUE(r) << r.message;
}

TEST(LibtorchOpsMore, Take) {
  const Tensor x = tensor({{4.0, 3.0, 5.0}, {6.0, 7.0, 8.0}});
  EXPECT_EQ(take(x, tensor({0, 2, 5}, kInt64)).to_vector<float>(), (F{4, 5, 8}));
  const Tensor picked = x.take(tensor({{-1, 0}, {1, -6}}, kInt64));  // negative counts from the end
  EXPECT_EQ(picked.sizes(), (Shape{2, 2}));
  EXPECT_EQ(picked.to_vector<float>(), (F{8, 4, 3, 4}));
  EXPECT_EQ(x.t().take(tensor({1}, kInt64)).item<float>(), 6);  // a view is read in its own order
  expect_error([&] { take(x, tensor({6}, kInt64)); }, {"take", "6"});
  manual_seed(3);
  const Tensor index = tensor({0, 5, 5, -2}, kInt64);
  GradcheckResult r = gradcheck([&](auto& in) { return take(in[0], index); }, {leaf({2, 3})});
  EXPECT_TRUE(r) << r.message;
}

TEST(LibtorchOpsMore, Msort) {
  const Tensor x = tensor({{3.0, 1.0}, {1.0, 2.0}, {2.0, 0.0}});
  EXPECT_EQ(msort(x).to_vector<float>(), (F{1, 0, 2, 1, 3, 2}));
  EXPECT_TRUE(equal(x.msort(), std::get<0>(x.sort(0))));
}

TEST(LibtorchOpsMore, Cross) {
  const Tensor i = tensor({1.0, 0.0, 0.0}), j = tensor({0.0, 1.0, 0.0});
  EXPECT_EQ(linalg_cross(i, j).to_vector<float>(), (F{0, 0, 1}));
  EXPECT_EQ(cross(j, i).to_vector<float>(), (F{0, 0, -1}));
  // [1, 2, 3] x [4, 5, 6] = [-3, 6, -3], here along dim 0 of [3, 2] (the first dim of length 3)
  const Tensor a = tensor({{1.0, 1.0}, {2.0, 0.0}, {3.0, 0.0}}), b = tensor({{4.0, 0.0}, {5.0, 1.0}, {6.0, 0.0}});
  EXPECT_EQ(a.cross(b).to_vector<float>(), (F{-3, 0, 6, 0, -3, 1}));
  EXPECT_TRUE(equal(cross(a, b), linalg_cross(a, b, 0)));
  // Broadcasting: one vector against a batch.
  EXPECT_EQ(linalg_cross(i, stack({i, j})).to_vector<float>(), (F{0, 0, 0, 0, 0, 1}));
  expect_error([] { linalg_cross(zeros({4}), zeros({4})); }, {"linalg_cross", "length 3", "[4]"});
  expect_error([] { cross(zeros({2, 4}), zeros({2, 4})); }, {"cross", "length 3"});
  manual_seed(4);
  GradcheckResult r = gradcheck([](auto& in) { return linalg_cross(in[0], in[1]); }, {leaf({2, 3}), leaf({3})});
  EXPECT_TRUE(r) << r.message;
}

TEST(CudaLibtorchOpsMore, MatchTheCpu) {
  MINIDL_REQUIRE_CUDA();
  manual_seed(5);
  const Tensor x = randn({5, 3}), y = randn({5, 3});
  const Tensor xc = x.to(Device::cuda()), yc = y.to(Device::cuda());
  const Tensor index = tensor({0, 14, -1, 7}, kInt64);
  EXPECT_TRUE(allclose(square(xc).cpu(), square(x)));
  EXPECT_TRUE(allclose(exp2(xc).cpu(), exp2(x)));
  EXPECT_TRUE(equal(fmax(xc, yc).cpu(), fmax(x, y)));
  EXPECT_TRUE(equal(diff(xc, 2, 0).cpu(), diff(x, 2, 0)));
  EXPECT_TRUE(equal(take(xc, index.to(Device::cuda())).cpu(), take(x, index)));
  EXPECT_TRUE(equal(msort(xc).cpu(), msort(x)));
  EXPECT_TRUE(allclose(linalg_cross(xc, yc).cpu(), linalg_cross(x, y)));
}

}  // namespace

}  // namespace minidl::libtorch_ops_more_test
