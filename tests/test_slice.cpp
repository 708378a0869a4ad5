// narrow, split, chunk (views) and cat, stack (copies): values against direct indexing, shared
// storage for the views, float64 gradient checks, and the errors.
#include <gtest/gtest.h>

#include "minidl.h"
#include "float64_util.h"

namespace minidl::slice_test {

using minidl::testing::expect_gradcheck;
using minidl::testing::leaf;

TEST(Slice, NarrowIsAViewOfTheWindow) {
  Tensor x = arange(12, kFloat32).view({3, 4});
  Tensor n = narrow(x, 1, 1, 2);  // x[:, 1:3]
  EXPECT_EQ(n.shape(), (Shape{3, 2}));
  EXPECT_EQ(n.contiguous().to_vector<float>(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(n.raw_data(), static_cast<float*>(x.raw_data()) + 1);  // no copy
  EXPECT_EQ(narrow(x, -2, 2, 1).to_vector<float>(), (std::vector<float>{8, 9, 10, 11}));
  EXPECT_THROW(narrow(x, 1, 3, 2), Error);
  EXPECT_THROW(narrow(x, 2, 0, 1), Error);
}

TEST(Slice, CatAndStackJoin) {
  Tensor a = arange(6, kFloat32).view({2, 3}), b = full({2, 1}, -1.0);
  EXPECT_EQ(cat({a, b}, 1).to_vector<float>(), (std::vector<float>{0, 1, 2, -1, 3, 4, 5, -1}));
  EXPECT_EQ(cat({a, a}, 0).shape(), (Shape{4, 3}));
  Tensor s = stack({a, a * 2.0}, 1);  // [2, 2, 3]
  EXPECT_EQ(s.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{0, 1, 2, 0, 2, 4, 3, 4, 5, 6, 8, 10}));
  try {
    cat({a, full({3, 3}, 0.0)}, 1);
    FAIL() << "shapes that differ outside dim must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 1 has shape [3, 3]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cat({a, a.to(kFloat64)}).dtype(), kFloat64);  // promoted, as torch.cat
  EXPECT_THROW(stack({a, b}), Error);
  EXPECT_THROW(cat({}), Error);
  // An empty part (no storage behind it) adds nothing, as torch.cat.
  EXPECT_EQ(cat({a, zeros({2, 0})}, 1).to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(cat({zeros({0, 3}), a}, 0).shape(), (Shape{2, 3}));
}

TEST(Slice, SplitAndChunk) {
  Tensor x = arange(10, kFloat32);
  auto parts = split(x, 4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].to_vector<float>(), (std::vector<float>{8, 9}));
  auto chunks = chunk(x.view({2, 5}), 2, 1);  // sizes 3 and 2, as torch.chunk
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(chunks[1].contiguous().to_vector<float>(), (std::vector<float>{3, 4, 8, 9}));
  EXPECT_THROW(split(x, 0), Error);
  EXPECT_THROW(chunk(x, 0), Error);
}

TEST(Slice, Gradients) {
  manual_seed(31);
  expect_gradcheck("narrow", [](auto& in) { return narrow(in[0], 1, 1, 3) * 2.0; }, {leaf({2, 5, 3})});
  expect_gradcheck("cat", [](auto& in) { return cat({in[0], exp(in[1]), in[0]}, -1); }, {leaf({2, 3}), leaf({2, 2})});
  expect_gradcheck("stack", [](auto& in) { return stack({in[0], in[1] * in[0]}, 2); }, {leaf({2, 3}), leaf({2, 3})});
  expect_gradcheck("split", [](auto& in) {
    auto p = split(in[0], 2, 0);
    return p[0] * p[1] + p[2].sum();
  }, {leaf({6, 2})});
  expect_gradcheck("split with parts unused", [](auto& in) {
    auto p = split(in[0], 2, 1);  // widths 2, 2, 1: only the middle one reaches the output
    return p[1] * 3.0;
  }, {leaf({3, 5})});
  // cat's backward hands split's parts windows of one gradient: in their places (taken whole) or not.
  expect_gradcheck("split then cat in order", [](auto& in) {
    auto p = split(in[0], 2, 1);
    return cat({p[0], p[1], p[2]}, 1) * in[0];
  }, {leaf({3, 5})});
  expect_gradcheck("split then cat out of order", [](auto& in) {
    auto p = split(in[0], 2, 1);
    return cat({p[1], p[0], p[2]}, 1) * 2.0;
  }, {leaf({3, 5})});
  expect_gradcheck("chunk through matmul", [](auto& in) {
    auto c = chunk(in[0], 2, 1);
    return matmul(c[0], c[1].t());
  }, {leaf({3, 4})});
  // A cat input that needs no gradient is skipped; the other gets its window.
  Tensor a = Tensor::from_vector<double>({1, 2}).requires_grad_(), b = Tensor::from_vector<double>({3});
  (cat({a, b}) * Tensor::from_vector<double>({10, 20, 30})).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{10, 20}));
}

}  // namespace minidl::slice_test
