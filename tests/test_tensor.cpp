// Tensor basics: creation, layout, views, printing, dtype conversion, errors.
#include <gtest/gtest.h>

#include <sstream>

#include "minidl.h"

namespace minidl::tensor_test {

TEST(Tensor, CreationAndItem) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_TRUE(z.device().is_cpu());
  EXPECT_EQ(z.numel(), 6);
  for (float v : z.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(full({}, 2.5, kFloat64).item<double>(), 2.5);
  EXPECT_EQ(ones({4}, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(arange(1, 2, 0.25, kFloat64).to_vector<double>(), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  Tensor v = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(v.to(kFloat64).to_vector<double>()[5], 6.0);
  EXPECT_THROW(ones({2}).item<float>(), Error);
}

TEST(Tensor, RandomIsSeeded) {
  manual_seed(7);
  std::vector<float> a = randn({100}).to_vector<float>();
  manual_seed(7);
  std::vector<float> b = randn({100}).to_vector<float>();
  EXPECT_EQ(a, b);
  std::vector<float> c = randn({100}).to_vector<float>();
  EXPECT_NE(a, c);
  double m = rand({10000}, kFloat64).mean().item<double>();
  EXPECT_NEAR(m, 0.5, 0.02);
  Tensor n = randn({10000}, kFloat64);
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR((n * n).mean().item<double>(), 1.0, 0.05);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor x = arange(24.0).reshape({2, 3, 4});
  Tensor t = x.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  std::vector<float> tv = t.contiguous().to_vector<float>();
  EXPECT_EQ(tv[1], 12.0f);  // t[0][0][1] = x[1][0][0]
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.view({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(x.permute({2, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_THROW(t.view({24}), Error);               // not expressible as a view
  EXPECT_EQ(t.reshape({24}).to_vector<float>(), tv);  // reshape copies instead
  // A view of a transposed tensor that keeps the transposed dims apart needs no copy.
  Tensor tt = x.transpose(0, 1);  // [3, 2, 4], strides [4, 12, 1]
  Tensor merged = tt.view({3, 2, 2, 2});
  EXPECT_TRUE(merged.impl().storage == x.impl().storage);
  EXPECT_EQ(merged.contiguous().to_vector<float>(), tt.contiguous().to_vector<float>());
  EXPECT_THROW(x.view({5, -1}), Error);
}

namespace {
std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
}  // namespace

TEST(Tensor, PrintingAsPyTorchDoes) {
  // Integral floats print as "1.", columns right-aligned, rows under their bracket.
  EXPECT_EQ(printed(Tensor::from_vector<float>({1, 2, -3, 40}, {2, 2})),
            "tensor([[ 1.,  2.],\n        [-3., 40.]], shape=[2, 2], dtype=float32)");
  // Fixed with 4 decimals.
  EXPECT_EQ(printed(Tensor::from_vector<double>({0.5, -1.25, 3})),
            "tensor([ 0.5000, -1.2500,  3.0000], shape=[3], dtype=float64)");
  // Magnitudes 1000x apart: scientific, as PyTorch.
  EXPECT_EQ(printed(Tensor::from_vector<float>({0.001f, 2.5f})),
            "tensor([1.0000e-03, 2.5000e+00], shape=[2], dtype=float32)");
  // Integers, a 0-d tensor, non-finite values, requires_grad.
  EXPECT_EQ(printed(Tensor::from_vector<int64_t>({7, -12})), "tensor([  7, -12], shape=[2], dtype=int64)");
  EXPECT_EQ(printed(full({}, 3.5)), "tensor(3.5000, shape=[], dtype=float32)");
  EXPECT_EQ(printed(Tensor::from_vector<float>({INFINITY, NAN, 1})),
            "tensor([inf, nan,  1.], shape=[3], dtype=float32)");
  EXPECT_EQ(printed(Tensor::from_vector<double>({1}).requires_grad_()),
            "tensor([1.], shape=[1], dtype=float64, requires_grad=true)");
  // 3-D: a blank line between matrices.
  EXPECT_EQ(printed(arange(8, kInt64).view({2, 2, 2})),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]], shape=[2, 2, 2], dtype=int64)");
  // Past 1000 elements, three at each end of every dimension.
  EXPECT_EQ(printed(arange(5000, kInt64)),
            "tensor([   0,    1,    2,  ..., 4997, 4998, 4999], shape=[5000], dtype=int64)");
  const std::string rows = printed(arange(2000, kInt64).view({400, 5}));
  EXPECT_NE(rows.find("[   0,    1,    2,    3,    4],\n        [   5,"), std::string::npos) << rows;
  EXPECT_NE(rows.find("        ...,\n        [1985,"), std::string::npos) << rows;
}

TEST(Tensor, DeviceParsing) {
  EXPECT_EQ(Device("cpu"), Device::cpu());
  EXPECT_EQ(Device("cuda"), Device::cuda(0));
  EXPECT_EQ(Device("cuda:3"), Device::cuda(3));
  EXPECT_THROW(Device("tpu"), Error);
  EXPECT_THROW(Device("cuda:x"), Error);
}

TEST(Tensor, DtypeErrors) {
  Tensor a = ones({2}, kFloat32), b = ones({2}, kFloat64);
  // Elementwise ops promote (core/type_promotion.h); matrix products refuse, as PyTorch's do.
  EXPECT_EQ(add(a, b).dtype(), kFloat64);
  try {
    matmul(a.view({1, 2}), b.view({2, 1}));
    FAIL() << "a product of float32 and float64 must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("float64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ones({2}, kInt64).requires_grad_(), Error);
  EXPECT_THROW(a.data<double>(), Error);
  EXPECT_EQ(exp(ones({2}, kInt64)).dtype(), kFloat32);  // int-to-float, as torch.exp
}

TEST(Tensor, ShapeMismatchNamesBothShapes) {
  try {
    add(ones({2, 3}), ones({4, 3}));
    FAIL() << "shapes [2, 3] and [4, 3] must not broadcast";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4, 3]"), std::string::npos) << msg;
  }
}

}  // namespace minidl::tensor_test
