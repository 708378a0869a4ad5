// index_select along any dim: values against a direct loop, the gradient scattered back with
// repeated indices accumulating (by hand and by float64 gradcheck), and the errors.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "minidl.h"
#include "test_util.h"

namespace minidl::index_select_test {

using minidl::testing::expect_error;

namespace {

Tensor index_of(const std::vector<int64_t>& v) { return Tensor::from_vector<int64_t>(v); }

// out[.., k, ..] = x[.., index[k], ..] along `dim` of a contiguous row-major x.
std::vector<double> reference(const std::vector<double>& x, const Shape& shape, int64_t dim,
                              const std::vector<int64_t>& index) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<double> out;
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t k : index)
      for (int64_t c = 0; c < inner; ++c) out.push_back(x[static_cast<size_t>((a * shape[dim] + k) * inner + c)]);
  return out;
}

}  // namespace

TEST(IndexSelect, AnyDimMatchesReference) {
  manual_seed(41);
  const Shape shape{3, 4, 5};
  Tensor x = randn(shape, kFloat64);
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<int64_t> index{2, 0, 2, 1};
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const int64_t d = dim < 0 ? dim + 3 : dim;
    std::vector<int64_t> idx = index;
    if (shape[d] < 3) idx = {1, 0, 1};
    Tensor out = index_select(x, dim, index_of(idx));
    Shape expected = shape;
    expected[d] = static_cast<int64_t>(idx.size());
    EXPECT_EQ(out.shape(), expected);
    EXPECT_EQ(out.to_vector<double>(), reference(xv, shape, d, idx));
  }
  // A transposed source, float32 and int64, an empty index, a 0-d index (keeps the dim, size 1).
  Tensor t = x.transpose(0, 2);  // [5, 4, 3]
  EXPECT_EQ(index_select(t, 1, index_of({3})).to_vector<double>(),
            reference(t.contiguous().to_vector<double>(), {5, 4, 3}, 1, {3}));
  EXPECT_EQ(index_select(x.to(kFloat32), 2, index_of({4})).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(index_select(arange(6, kInt64).view({2, 3}), 1, index_of({2, 2})).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 2, 5, 5}));
  EXPECT_EQ(index_select(x, 1, Tensor::empty({0}, kInt64)).shape(), (Shape{3, 0, 5}));
  EXPECT_EQ(index_select(x, 0, full({}, 1, kInt64)).shape(), (Shape{1, 4, 5}));
  // The two-argument form is dim 0, as before.
  EXPECT_EQ(index_select(x, index_of({1})).to_vector<double>(), index_select(x, 0, index_of({1})).to_vector<double>());
}

TEST(IndexSelect, GradientAccumulatesIntoRepeatedIndices) {
  // Hand-computed: rows 0 and 2 picked twice and once, row 1 never; the upstream gradient is the
  // row number + 1, so row 0 gets 1 + 3 = 4 per element, row 2 gets 2, row 1 gets 0.
  Tensor x = zeros({3, 2}, kFloat64).requires_grad_();
  Tensor out = index_select(x, 0, index_of({0, 2, 0}));
  out.backward(Tensor::from_vector<double>({1, 1, 2, 2, 3, 3}, {3, 2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4, 4, 0, 0, 2, 2}));
  // Along dim 1: column 1 picked three times.
  Tensor y = zeros({2, 3}, kFloat64).requires_grad_();
  index_select(y, 1, index_of({1, 1, 2, 1})).sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{0, 3, 1, 0, 3, 1}));
}

TEST(IndexSelect, Gradcheck) {
  manual_seed(42);
  Tensor index = index_of({1, 0, 1, 3});
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    // A non-contiguous source (a narrowed view) exercises the copy before the gather.
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], dim, index); },
                       {narrow(randn({4, 5, 4}, kFloat64), 1, 0, 4).requires_grad_()});
    EXPECT_TRUE(r) << r.message;
  }
  // Composed with other ops, a transposed gradient arriving, and an index into a 1-D tensor.
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return (index_select(in[0].t(), 1, index) * 2.0).t(); },
                     {randn({4, 3}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
  r = gradcheck([&](const std::vector<Tensor>& in) { return index_select(in[0], 0, index); },
                {randn({5}, kFloat64).requires_grad_()});
  EXPECT_TRUE(r) << r.message;
}

TEST(IndexSelect, Errors) {
  Tensor x = zeros({3, 4});
  expect_error([&] { index_select(x, 0, index_of({0, 3})); }, {"index_select", "index 3", "position 1", "size 3"});
  expect_error([&] { index_select(x, 1, index_of({-1})); }, {"index_select", "index -1", "size 4"});
  expect_error([&] { index_select(x, 0, Tensor::from_vector<float>({0})); }, {"index_select", "int64", "float32"});
  expect_error([&] { index_select(x, 0, zeros({2, 2}, kInt64)); }, {"index_select", "1-D", "[2, 2]"});
  expect_error([&] { index_select(x, 2, index_of({0})); }, {"index_select", "dimension out of range"});
  expect_error([&] { index_select(zeros({}), 0, index_of({0})); }, {"index_select", "scalar"});
}

}  // namespace minidl::index_select_test
