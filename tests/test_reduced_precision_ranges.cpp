// bfloat16 and float16 where an intermediate value leaves the 16-bit dtype: a C++ number the dtype
// cannot hold (x / 257 in bfloat16, x / 1e5 in float16), and the statistics whose sums or counts
// outgrow float16's 65,504 (a mean, variance or norm of 70,000 values), and the compositions that
// PyTorch fuses (add with an alpha, addcmul, addcdiv, lerp, prelu). Each result must be the
// float32 computation rounded once to the 16-bit dtype, as PyTorch gives it: exactly, for a single
// elementwise op, and within a unit or two in the last place for a reduction (whose float32 sums
// may add in another order). It runs on the CPU and on CUDA.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "float64_util.h"
#include "minidl.h"
#include "test_cuda_util.h"

namespace minidl::reduced_precision_ranges_test {

using minidl::testing::values;

namespace {

constexpr DType kDtypes[] = {kBFloat16, kFloat16};

// Numbers that bfloat16 or float16 cannot hold (257, 0.1, 1e-3, 70,000, 1e5, 1 / 3) and two that
// both can (0.5, -2), whose results must not change.
const std::vector<double> kScalars = {257.0, 0.1, 1e-3, 70000.0, 1e5, 1.0 / 3.0, -3.3, 0.5, -2.0};

// got == want bit for bit, NaN matching NaN, naming the first element that differs.
::testing::AssertionResult same_values(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << ", expected " << want.dtype();
  if (got.shape() != want.shape()) return ::testing::AssertionFailure() << "shapes differ";
  const std::vector<double> a = values(got), b = values(want);
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
    return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << ", expected " << b[i];
  }
  return ::testing::AssertionSuccess();
}

// got within `ulps` units in the last place of the 16-bit dtype of want (finite and of got's dtype).
::testing::AssertionResult within_ulps(const Tensor& got, const Tensor& want, double ulps) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype " << got.dtype() << ", expected " << want.dtype();
  const double eps = got.dtype() == kBFloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
  const std::vector<double> a = values(got), b = values(want);
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(b[i])) return ::testing::AssertionFailure() << "element " << i << " expected " << b[i];
    if (!(std::fabs(a[i] - b[i]) <= ulps * eps * std::fabs(b[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << ", expected " << b[i]
                                           << " within " << ulps << " ulps";
    }
  }
  return ::testing::AssertionSuccess();
}

// x op number and number op x, for the four arithmetic ops and pow, against float32 rounded once.
void check_scalar_arithmetic(Device device) {
  for (DType dtype : kDtypes) {
    const Tensor x = uniform({300}, 0.5, 4.0).to(dtype).to(device);
    const Tensor x32 = x.to(kFloat32);
    for (double s : kScalars) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", number " + std::to_string(s));
      EXPECT_TRUE(same_values(x + s, (x32 + s).to(dtype)));
      EXPECT_TRUE(same_values(x - s, (x32 - s).to(dtype)));
      EXPECT_TRUE(same_values(x * s, (x32 * s).to(dtype)));
      EXPECT_TRUE(same_values(x / s, (x32 / s).to(dtype)));
      EXPECT_TRUE(same_values(s - x, (s - x32).to(dtype)));
      EXPECT_TRUE(same_values(s / x, (s / x32).to(dtype)));
      EXPECT_TRUE(same_values(div(x, Scalar(s)), (x32 / s).to(dtype)));
      EXPECT_TRUE(same_values(add(x, Scalar(s), 2), (x32 + 2 * s).to(dtype)));
      if (s < 10) {
        EXPECT_TRUE(same_values(pow(x, Scalar(s)), pow(x32, Scalar(s)).to(dtype)));
      }
    }
  }
}

// The in-place forms round once too, into contiguous and strided destinations.
void check_inplace_scalar_arithmetic(Device device) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = uniform({20, 30}, 0.5, 4.0).to(dtype).to(device);
    Tensor y = x.clone();
    y /= 257.0;
    EXPECT_TRUE(same_values(y, (x.to(kFloat32) / 257.0).to(dtype)));
    y = x.clone();
    y.mul_(0.1);
    y.add_(1e-3);
    y.sub_(1.0 / 3.0);
    Tensor want = ((x.to(kFloat32) * 0.1).to(dtype).to(kFloat32) + 1e-3).to(dtype);
    want = (want.to(kFloat32) - 1.0 / 3.0).to(dtype);
    EXPECT_TRUE(same_values(y, want));
    Tensor z = x.clone();
    Tensor columns = z.t();  // a strided destination
    columns.div_(1e5);
    EXPECT_TRUE(same_values(z, (x.to(kFloat32) / 1e5).to(dtype)));
  }
}

// d(x * s)/dx and d(s / x)/dx as PyTorch computes them in a 16-bit tensor: in float32, rounded.
void check_scalar_gradients(Device device) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor start = uniform({50}, 0.5, 4.0).to(dtype).to(device);
    Tensor x = start.clone().requires_grad_();
    (x * 0.1).sum().backward();
    EXPECT_TRUE(same_values(x.grad(), full({50}, 0.1, kFloat32, device).to(dtype)));
    Tensor y = start.clone().requires_grad_();
    (y / 257.0).sum().backward();
    EXPECT_TRUE(same_values(y.grad(), full({50}, 1.0 / 257.0, kFloat32, device).to(dtype)));
  }
}

// mean over 70,000 (past float16's largest value and bfloat16's exact integers), and its gradient,
// 1 / 70,000 in each element (0 where the count was rounded to float16's infinity).
void check_mean(Device device) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = uniform({70000}, 0.0, 1.0).to(dtype).to(device);
    const Tensor want = x.to(kFloat32).mean().to(dtype);
    EXPECT_TRUE(within_ulps(x.mean(), want, 1));
    EXPECT_TRUE(within_ulps(full({70000}, 0.5, dtype, device).mean(), full({}, 0.5, dtype), 0));
    const Tensor rows = x.view({7, 10000});
    EXPECT_TRUE(within_ulps(rows.mean({1}), rows.to(kFloat32).mean({1}).to(dtype), 1));
    EXPECT_TRUE(within_ulps(rows.mean({0}, true), rows.to(kFloat32).mean({0}, true).to(dtype), 1));
    // sum(x, kFloat32) reads the 16-bit values into float32 sums (no copy) and returns float32; its
    // gradient comes back in x's dtype.
    Tensor summed = x.clone().requires_grad_();
    const Tensor total = sum(summed, {0}, false, kFloat32);
    EXPECT_EQ(total.dtype(), kFloat32);
    EXPECT_NEAR(total.item<double>(), x.to(kFloat64).sum().item<double>(), 1e-5 * 70000);
    total.backward();
    EXPECT_TRUE(same_values(summed.grad(), full({70000}, 1.0, dtype, device)));
    Tensor leaf = x.clone().requires_grad_();
    leaf.mean().backward();
    EXPECT_TRUE(same_values(leaf.grad(), full({70000}, 1.0 / 70000.0, kFloat32, device).to(dtype)));
    // 257 elements: bfloat16's first integer it cannot hold.
    Tensor small = uniform({257}, 1.0, 2.0).to(dtype).to(device).requires_grad_();
    EXPECT_TRUE(within_ulps(small.mean(), small.detach().to(kFloat32).mean().to(dtype), 1));
    small.mean().backward();
    EXPECT_TRUE(same_values(small.grad(), full({257}, 1.0 / 257.0, kFloat32, device).to(dtype)));
  }
}

// The statistics built on sums: their float16 sums of squares or exponentials pass 65,504 here.
void check_statistics(Device device) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = (randn({100000}) + 1.0).to(dtype).to(device);
    const Tensor x32 = x.to(kFloat32);
    EXPECT_TRUE(within_ulps(x.var(), x32.var().to(dtype), 1));
    EXPECT_TRUE(within_ulps(x.std(), x32.std().to(dtype), 1));
    EXPECT_TRUE(within_ulps(var(x, {0}, Scalar(0), false), var(x32, {0}, Scalar(0), false).to(dtype), 1));
    EXPECT_TRUE(within_ulps(minidl::std(x, {0}, Scalar(0), false), minidl::std(x32, {0}, Scalar(0), false).to(dtype), 1));
    EXPECT_TRUE(within_ulps(x.norm(), x32.norm().to(dtype), 1));
    EXPECT_TRUE(within_ulps(norm(x, 3), norm(x32, 3).to(dtype), 1));
    EXPECT_TRUE(within_ulps(logsumexp(zeros({100000}, dtype, device), {0}), full({}, std::log(1e5), dtype), 1));
    EXPECT_TRUE(within_ulps(logsumexp(x, {0}), logsumexp(x32, {0}).to(dtype), 1));
    const Tensor with_nan = cat({x, full({1}, NAN, dtype, device)});
    EXPECT_TRUE(within_ulps(nanmean(with_nan), x32.mean().to(dtype), 1));
    // 50,000 observations: a float16 sum of 50,000 squares passes 65,504.
    const Tensor rows = x.view({2, 50000});
    EXPECT_TRUE(within_ulps(cov(rows).diagonal(), cov(rows.to(kFloat32)).diagonal().to(dtype), 1));
    EXPECT_TRUE(within_ulps(corrcoef(rows).diagonal(), full({2}, 1.0, dtype), 1));
    // kl_div's batch mean divides by 70,000 rows.
    const Tensor logp = full({70000, 2}, std::log(0.5), dtype, device), target = full({70000, 2}, 0.25, dtype, device);
    EXPECT_TRUE(within_ulps(kl_div(logp, target, Reduction::BatchMean),
                            kl_div(logp.to(kFloat32), target.to(kFloat32), Reduction::BatchMean).to(dtype), 2));
    // nll_loss's and the composed cross_entropy's mean divide by 70,000 rows' weight.
    const Tensor logits = randn({70000, 4}).to(dtype).to(device);
    const Tensor labels = randint(0, 4, {70000}).to(device);
    EXPECT_TRUE(within_ulps(nll_loss(log_softmax(logits, 1), labels),
                            nll_loss(log_softmax(logits.to(kFloat32), 1), labels).to(dtype), 2));
    EXPECT_TRUE(within_ulps(cross_entropy(logits, labels, {}, Reduction::Mean, -100, 0.1),
                            cross_entropy(logits.to(kFloat32), labels, {}, Reduction::Mean, -100, 0.1).to(dtype), 2));
    // Global average pooling over 300 x 300 pixels, and its gradient, 1 / 90,000 a pixel.
    Tensor image = uniform({1, 2, 300, 300}, 0.0, 1.0).to(dtype).to(device).requires_grad_();
    const Tensor pooled = adaptive_avg_pool2d(image, {1, 1});
    EXPECT_TRUE(within_ulps(pooled, adaptive_avg_pool2d(image.detach().to(kFloat32), {1, 1}).to(dtype), 1));
    pooled.sum().backward();
    EXPECT_TRUE(same_values(image.grad(), full({1, 2, 300, 300}, 1.0 / 90000.0, kFloat32, device).to(dtype)));
    // Their gradients flow through the float32 computation: finite, and as float32's rounded.
    Tensor leaf = x.clone().requires_grad_();
    leaf.norm().backward();
    Tensor leaf32 = x32.clone().requires_grad_();
    leaf32.norm().backward();
    EXPECT_TRUE(within_ulps(leaf.grad(), leaf32.grad().to(dtype), 1));
  }
}

// add and sub with an alpha, addcmul, addcdiv and lerp: one float32 computation, rounded once, as
// PyTorch's fused kernels give them (lerp from the nearer end); and lerp's gradients rounded once.
void check_compositions(Device device) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto make = [&](double low, double high) { return uniform({400}, low, high).to(dtype).to(device); };
    const Tensor a = make(-4.0, 4.0), b = make(-4.0, 4.0), c = make(0.5, 4.0);
    const Tensor a32 = a.to(kFloat32), b32 = b.to(kFloat32), c32 = c.to(kFloat32);
    for (double v : {0.1, 1.0 / 3.0, -3.3, 257.0, 0.5, -2.0}) {
      SCOPED_TRACE("value " + std::to_string(v));
      EXPECT_TRUE(same_values(add(a, b, v), (a32 + b32 * v).to(dtype)));
      EXPECT_TRUE(same_values(sub(a, b, v), (a32 - b32 * v).to(dtype)));
      EXPECT_TRUE(same_values(addcmul(a, b, c, v), (a32 + (b32 * c32) * v).to(dtype)));
      EXPECT_TRUE(same_values(addcdiv(a, b, c, v), (a32 + (b32 / c32) * v).to(dtype)));
    }
    for (double w : {0.0, 0.1, 1.0 / 3.0, 0.5, 0.7, 1.0, -0.6}) {
      SCOPED_TRACE("weight " + std::to_string(w));
      const Tensor want = std::fabs(w) < 0.5 ? a32 + (b32 - a32) * w : b32 - (b32 - a32) * (1.0 - w);
      EXPECT_TRUE(same_values(lerp(a, b, w), want.to(dtype)));
    }
    const Tensor weights = Tensor::from_vector<double>({0.0, 0.1, 0.25, 0.5, 0.7, 1.0, 1.0 / 3.0, -0.6}, {8})
                               .repeat({50}).to(dtype).to(device);
    const Tensor w32 = weights.to(kFloat32);
    const Tensor want = where(lt(abs(w32), 0.5), a32 + w32 * (b32 - a32), b32 - (b32 - a32) * (1.0 - w32));
    EXPECT_TRUE(same_values(lerp(a, b, weights), want.to(dtype)));
    Tensor start = a.clone().requires_grad_(), end = b.clone().requires_grad_();
    lerp(start, end, 0.1).sum().backward();
    EXPECT_TRUE(same_values(start.grad(), full({400}, 1.0 - 0.1, kFloat32, device).to(dtype)));
    EXPECT_TRUE(same_values(end.grad(), full({400}, 0.1, kFloat32, device).to(dtype)));
    // prelu's slope gradient sums its products in float32 and rounds once, as PyTorch's kernel; the
    // composition rounded each product first (1 in 100 random draws fell outside the sweep's tolerance).
    const Tensor x = a.reshape({8, 5, 10}), upstream = b.reshape({8, 5, 10});
    Tensor slope = uniform({5}, 0.1, 0.3).to(dtype).to(device).requires_grad_();
    Tensor slope32 = slope.detach().to(kFloat32).requires_grad_();
    prelu(x, slope).backward(upstream);
    prelu(x.to(kFloat32), slope32).backward(upstream.to(kFloat32));
    EXPECT_TRUE(same_values(slope.grad(), slope32.grad().to(dtype)));
  }
}

}  // namespace

TEST(ReducedPrecisionRanges, ScalarArithmeticRoundsOnce) { check_scalar_arithmetic(Device::cpu()); }
TEST(ReducedPrecisionRanges, InPlaceScalarArithmeticRoundsOnce) { check_inplace_scalar_arithmetic(Device::cpu()); }
TEST(ReducedPrecisionRanges, ScalarGradientsRoundOnce) { check_scalar_gradients(Device::cpu()); }
TEST(ReducedPrecisionRanges, MeanOfMoreThanTheDtypeCounts) { check_mean(Device::cpu()); }
TEST(ReducedPrecisionRanges, StatisticsPastFloat16sRange) { check_statistics(Device::cpu()); }
TEST(ReducedPrecisionRanges, FusedCompositionsRoundOnce) { check_compositions(Device::cpu()); }

TEST(CudaReducedPrecisionRanges, ScalarArithmeticRoundsOnce) {
  MINIDL_REQUIRE_CUDA();
  check_scalar_arithmetic(Device::cuda());
}
TEST(CudaReducedPrecisionRanges, InPlaceScalarArithmeticRoundsOnce) {
  MINIDL_REQUIRE_CUDA();
  check_inplace_scalar_arithmetic(Device::cuda());
}
TEST(CudaReducedPrecisionRanges, ScalarGradientsRoundOnce) {
  MINIDL_REQUIRE_CUDA();
  check_scalar_gradients(Device::cuda());
}
TEST(CudaReducedPrecisionRanges, MeanOfMoreThanTheDtypeCounts) {
  MINIDL_REQUIRE_CUDA();
  check_mean(Device::cuda());
}
TEST(CudaReducedPrecisionRanges, StatisticsPastFloat16sRange) {
  MINIDL_REQUIRE_CUDA();
  check_statistics(Device::cuda());
}
TEST(CudaReducedPrecisionRanges, FusedCompositionsRoundOnce) {
  MINIDL_REQUIRE_CUDA();
  check_compositions(Device::cuda());
}

}  // namespace minidl::reduced_precision_ranges_test
