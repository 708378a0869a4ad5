// Gradient clipping against hand-computed values, and in-place ops' rules.
#include <gtest/gtest.h>

#include "minidl.h"
#include "nn/nn.h"

namespace minidl::clip_grad_test {

namespace {
Tensor param_with_grad(std::vector<double> value, std::vector<double> grad) {
  Tensor p = Tensor::from_vector<double>(value).requires_grad_();
  p.set_grad(Tensor::from_vector<double>(grad));
  return p;
}
}  // namespace

TEST(ClipGrad, NormScalesAllGradientsJointly) {
  Tensor a = param_with_grad({0, 0}, {3, 0}), b = param_with_grad({0, 0}, {0, 4});
  Tensor no_grad = Tensor::from_vector<double>({1}).requires_grad_();  // skipped
  const void* buffer = a.grad().raw_data();
  Tensor total = nn::utils::clip_grad_norm_({a, b, no_grad}, 1.0);
  EXPECT_DOUBLE_EQ(total.item<double>(), 5.0);  // sqrt(3^2 + 4^2), before clipping
  const double scale = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(a.grad().to_vector<double>()[0], 3 * scale, 1e-12);
  EXPECT_NEAR(b.grad().to_vector<double>()[1], 4 * scale, 1e-12);
  EXPECT_EQ(a.grad().raw_data(), buffer);  // in place
  // Under the limit: unchanged.
  Tensor c = param_with_grad({0}, {0.5});
  EXPECT_DOUBLE_EQ(nn::utils::clip_grad_norm_({c}, 1.0).item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(c.grad().item<double>(), 0.5);
  EXPECT_THROW(nn::utils::clip_grad_norm_({no_grad}, 1.0), Error);
  EXPECT_THROW(nn::utils::clip_grad_norm_({c}, 1.0, 0.0), Error);  // norm_type must be > 0
}

TEST(ClipGrad, ValueClampsEachElement) {
  Tensor a = param_with_grad({0, 0, 0, 0}, {-3, 0.5, 7, -1});
  nn::utils::clip_grad_value_({a}, 1.0);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{-1, 0.5, 1, -1}));
}

TEST(InPlaceOps, AddAndMulFollowPyTorchsRules) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3});
  add_(x, Tensor::from_vector<double>({1, 1, 1}));
  mul_(x, scalar_like(2, x));  // a scalar broadcasts
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{4, 6, 8}));
  Tensor leaf = Tensor::from_vector<double>({1}).requires_grad_();
  EXPECT_THROW(add_(leaf, Tensor::from_vector<double>({1})), Error);  // would be invisible to autograd
  {
    NoGradGuard no_grad;
    add_(leaf, Tensor::from_vector<double>({1}));  // allowed, as under torch.no_grad()
  }
  EXPECT_DOUBLE_EQ(leaf.item<double>(), 2.0);
  EXPECT_THROW(add_(x, Tensor::from_vector<double>({1, 2})), Error);  // does not broadcast to [3]
}

}  // namespace minidl::clip_grad_test
